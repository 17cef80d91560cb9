// Model specs: "350M" (a GPT-like shape is derived), presets from the catalog ("llama2-7b"),
// or explicit shapes "layers=48,hidden=8192,heads=64,seq=2048,vocab=51200"; any of them may
// be followed by ",key=value" overrides (seq, vocab, precision, optimizer, recompute,
// attention=standard|flash).
#pragma once
#include <optional>
#include <string>

#include "scaleguard/catalog.h"
#include "scaleguard/result.h"

namespace scaleguard {

enum class Precision { fp32, fp16, bf16 };
enum class Optimizer { adam, sgd };
enum class Recompute { none, selective, full };
const char* to_string(Precision);
const char* to_string(Optimizer);
const char* to_string(Recompute);
Result<Precision> parse_precision(const std::string&);
Result<Optimizer> parse_optimizer(const std::string&);
Result<Recompute> parse_recompute(const std::string&);

struct ModelSpec {
  std::string name;     // preset name or the count as written
  double params = 0;    // total parameters (embeddings included)
  int layers = 0, hidden = 0, heads = 0, seq = 0, vocab = 0;
  Precision precision = Precision::bf16;   // bf16/fp16 = mixed precision with fp32 master weights
  Optimizer optimizer = Optimizer::adam;
  std::optional<Recompute> recompute;      // pinned by the spec; otherwise the search chooses
  // attention=flash: fused attention (FlashAttention) never stores the a*s*s score and
  // softmax matrices, so activations drop Korthikanti's 5*a*s/h term; FLOPs are unchanged.
  bool flash_attention = false;
  // Architecture (catalog `arch`, spec key arch=): gpt, or llama (Hugging Face
  // LlamaForCausalLM as scaleguard-run --model llama builds it: per layer q/o [h, h], k/v
  // [kv_heads*h/heads, h], SwiGLU gate/up/down [ffn_hidden, h], two RMSNorm weights; final
  // norm; embedding, plus lm_head when untied; no biases, no position table).
  std::string arch = "gpt";
  int kv_heads = 0;     // llama: key/value heads (= heads without GQA)
  int ffn_hidden = 0;   // llama: SwiGLU width
  bool tied = true;     // llama: lm_head = embedding^T
  bool llama() const { return arch == "llama"; }
  // Embedding and output-head parameters (vocab x hidden once, twice for an untied llama):
  // what tensor parallel splits by vocabulary and the layers do not hold.
  double embedding_params() const { return double(vocab) * hidden * (llama() && !tied ? 2 : 1); }
};

// Parameters of a GPT-style decoder: 12*L*h^2 + 13*L*h + (vocab + seq)*h.
double gpt_params(int layers, int hidden, int seq, int vocab);
// Parameters of a Llama decoder, exactly as scaleguard-run builds it (d = hidden/heads):
// L*(2*h*h + 2*h*kv_heads*d + 3*h*ffn + 2*h) + h + vocab*h*(tied ? 1 : 2).
// llama2-7b: 6,738,415,616; llama3-8b: 8,030,261,248.
double llama_params(int layers, int hidden, int heads, int kv_heads, int ffn_hidden, int vocab, bool tied);
// Llama's default SwiGLU width (Meta's rule, multiple_of = 256, no ffn_dim_multiplier):
// int(2 * 4*hidden / 3) rounded up to a multiple of 256; 11008 for hidden 4096.
int llama_ffn_hidden(int hidden);
// The shape rule for a bare count (documented in planner/README.md): aspect ratio
// hidden/layers = 32 * (P/1e8)^(1/6), hidden a multiple of 128 (64 below 1B), heads = hidden/128
// (hidden/64 below 2048), seq 2048, vocab 51200, layers from the non-embedding params.
Result<ModelSpec> derive_shape(double params);
Result<ModelSpec> parse_model_spec(const std::string& text, const Catalog& catalog);

}  // namespace scaleguard
