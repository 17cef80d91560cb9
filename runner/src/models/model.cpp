// MLP and GPT-style decoder, nanoGPT-shaped. B batch, T context, C width, H heads,
// D = C / H head width, V vocabulary.
#include "models/model.h"

#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/utils.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/version.h>
#include <torch/csrc/autograd/autograd.h>
#include <ATen/CPUGeneratorImpl.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace scaleguard::run {
namespace {

namespace nn = torch::nn;

// Per-parameter initial values: the global tensor from a generator seeded by (seed, name),
// so a pipeline stage or tensor-parallel slice gets exactly the values of the full model
// without building it. nanoGPT's scheme: matrices N(0, 0.02), residual projections scaled by
// 1/sqrt(2 * n_layer); biases 0, layer norms 1 (weight) and 0 (bias). Llama: every
// matrix N(0, 0.02) (HF's initializer_range), RMSNorm weights 1.
at::Tensor initial_value(const Config& c, const std::string& name, at::IntArrayRef shape) {
  auto ends_with = [&name](const std::string& tail) {
    return name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  if (shape.size() < 2) {
    // GPT's ln1/ln2/ln_f, Llama's input_layernorm/post_attention_layernorm/model.norm.
    bool norm_weight = (name.find("ln") != std::string::npos || name.find("norm") != std::string::npos) &&
                       ends_with(".weight");
    return norm_weight ? at::ones(shape) : at::zeros(shape);
  }
  double std = 0.02;
  if (c.model == "gpt" && ends_with(".proj.weight")) std /= std::sqrt(2.0 * static_cast<double>(c.n_layer));
  at::Generator gen = at::detail::createCPUGenerator(XXH3_64bits_withSeed(name.data(), name.size(), c.seed));
  return at::empty(shape).normal_(0.0, std, gen);
}

void initialise(const Config& c, LanguageModel& m) {
  torch::NoGradGuard no_grad;
  for (auto& p : m.named_parameters()) {
    Slice s = m.slice_of(p.key());
    p.value().copy_(take_slice(initial_value(c, p.key(), global_shape(p.value().sizes(), s)), s));
  }
}

// The working dtype of a master parameter for activations `like`: the fp32 master itself
// under fp32, a bf16 copy (autograd sends the gradient back to the fp32 master) under bf16.
at::Tensor as_compute(const at::Tensor& t, const at::Tensor& like) {
  return t.scalar_type() == like.scalar_type() ? t : t.to(like.scalar_type());
}

// nn::LayerNorm's forward with its fp32 parameters cast to the activations' dtype (the
// same call as LayerNormImpl::forward under fp32).
at::Tensor layer_norm(const nn::LayerNorm& ln, const at::Tensor& x) {
  return at::layer_norm(x, ln->options.normalized_shape(), as_compute(ln->weight, x), as_compute(ln->bias, x),
                        ln->options.eps());
}

enum class Recompute { kNone, kSelective, kFull };

Recompute parse_recompute(const std::string& s) {
  if (s == "selective") return Recompute::kSelective;
  if (s == "full") return Recompute::kFull;
  return Recompute::kNone;
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

template <class T>
int64_t ptr_as_int(T* p) { return static_cast<int64_t>(reinterpret_cast<intptr_t>(p)); }
template <class T>
T* int_as_ptr(const c10::IValue& v) { return reinterpret_cast<T*>(static_cast<intptr_t>(v.toInt())); }

// softmax(q k^T / sqrt(D) + causal mask) v: (B, H, T, D) each -> (B, H, T, D). `mask`:
// (T_max, T_max) bool, true above the diagonal (positions a token may not attend to).
at::Tensor attention_core(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask) {
  const int64_t T = q.size(2), D = q.size(3);
#if defined(TORCH_VERSION_MAJOR) && TORCH_VERSION_MAJOR >= 2
  // LibTorch >= 2.0: the fused kernel (flash / memory-efficient on GPUs) never holds the
  // (B, H, T, T) scores. Causal masking by is_causal equals the triu mask below.
  (void)T, (void)D, (void)mask;
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0, /*is_causal=*/true);
#else
  // LibTorch 1.13: no fused attention; the scores are materialised (selective recompute
  // keeps them out of the saved activations).
  auto att = at::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(D)));  // (B, H, T, T)
  att = att.masked_fill(mask.slice(0, 0, T).slice(1, 0, T), -INFINITY).softmax(-1);
  return at::matmul(att, v);                                          // (B, H, T, D)
#endif
}

// Selective recompute (Megatron's): the attention core -- scores, mask, softmax, weighted
// sum -- keeps only q, k, v (which the projections' backward needs anyway) and redoes
// the (B, H, T, T) scores and probabilities in backward. The same ops on the same inputs:
// gradients bit-identical to keeping them.
struct AttentionCoreRecompute : torch::autograd::Function<AttentionCoreRecompute> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& mask) {
    ctx->save_for_backward({q, k, v, mask});
    return attention_core(q, k, v, mask);  // grad mode is off inside a custom Function's forward
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    variable_list saved = ctx->get_saved_variables();
    variable_list in;
    for (size_t i = 0; i < 3; ++i) in.push_back(saved[i].detach().requires_grad_(true));  // same strides as in forward
    at::Tensor y;
    {
      at::AutoGradMode grad(true);
      y = attention_core(in[0], in[1], in[2], saved[3]);
    }
    variable_list g = torch::autograd::grad({y}, in, {grads[0]});
    return {g[0], g[1], g[2], at::Tensor()};
  }
};

// The attention core as configured: selective recompute while building a graph, else direct.
at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                  bool selective) {
  return selective && at::GradMode::is_enabled() ? AttentionCoreRecompute::apply(q, k, v, mask)
                                                 : attention_core(q, k, v, mask);
}

class CausalSelfAttention : public nn::Module {
 public:
  CausalSelfAttention(int64_t C, int64_t H, int64_t T, TpGroup* tp, Recompute rc)
      : n_head_(H / tp->size()), selective_(rc == Recompute::kSelective) {
    // Fused q|k|v, column-parallel by heads: each rank holds its heads' rows of q, k and v.
    qkv = register_module("qkv", std::make_shared<ParallelLinear>(C, 3 * C, Split::kColumn, tp, 3));
    proj = register_module("proj", std::make_shared<ParallelLinear>(C, C, Split::kRow, tp));
    // (T, T) true above the diagonal: positions a token may not attend to.
    mask_ = register_buffer("mask", at::ones({T, T}, at::kBool).triu(1));
  }
  at::Tensor forward(const at::Tensor& x) {  // x (B, T, C); H, C local to this tp rank below
    auto qkv3 = qkv->forward(x).chunk(3, /*dim=*/2);                    // 3 x (B, T, C)
    int64_t B = x.size(0), T = x.size(1), C = qkv3[0].size(2), D = C / n_head_;
    auto q = qkv3[0].view({B, T, n_head_, D}).transpose(1, 2);          // (B, H, T, D)
    auto k = qkv3[1].view({B, T, n_head_, D}).transpose(1, 2);
    auto v = qkv3[2].view({B, T, n_head_, D}).transpose(1, 2);
    auto y = attend(q, k, v, mask_, selective_);                        // (B, H, T, D)
    y = y.transpose(1, 2).contiguous().view({B, T, C});                 // (B, T, C)
    return proj->forward(y);                                            // (B, T, C) global C
  }
  std::shared_ptr<ParallelLinear> qkv, proj;

 private:
  int64_t n_head_;
  bool selective_;
  at::Tensor mask_;
};

class Mlp : public nn::Module {
 public:
  Mlp(int64_t C, TpGroup* tp) {
    fc = register_module("fc", std::make_shared<ParallelLinear>(C, 4 * C, Split::kColumn, tp));
    proj = register_module("proj", std::make_shared<ParallelLinear>(4 * C, C, Split::kRow, tp));
  }
  at::Tensor forward(const at::Tensor& x) { return proj->forward(at::gelu(fc->forward(x))); }  // (B, T, C)
  std::shared_ptr<ParallelLinear> fc, proj;
};

class Block : public nn::Module {
 public:
  Block(int64_t C, int64_t H, int64_t T, TpGroup* tp, Recompute rc) {
    ln1_ = register_module("ln1", nn::LayerNorm(nn::LayerNormOptions({C})));
    attn = register_module("attn", std::make_shared<CausalSelfAttention>(C, H, T, tp, rc));
    ln2_ = register_module("ln2", nn::LayerNorm(nn::LayerNormOptions({C})));
    mlp = register_module("mlp", std::make_shared<Mlp>(C, tp));
  }
  at::Tensor forward(at::Tensor x) {  // (B, T, C) -> (B, T, C), pre-norm residual
    x = x + attn->forward(layer_norm(ln1_, x));
    return x + mlp->forward(layer_norm(ln2_, x));
  }
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<Mlp> mlp;

 private:
  nn::LayerNorm ln1_{nullptr}, ln2_{nullptr};
};

// Full recompute (activation checkpointing): a block keeps only its input; backward runs
// the block's forward again under grad and back-propagates through that graph (a nested,
// reentrant backward: the parameters' gradients accumulate into their flat buckets and fire
// the data-parallel hooks as usual). The models have no dropout, so the rerun is the same
// computation and the gradients are bit-identical to keeping every activation.
template <class BlockT>
struct BlockRecompute : torch::autograd::Function<BlockRecompute<BlockT>> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, BlockT* block) {
    ctx->saved_data["block"] = ptr_as_int(block);
    ctx->save_for_backward({x});
    return block->forward(x);  // no graph: grad mode is off here
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* block = int_as_ptr<BlockT>(ctx->saved_data["block"]);
    at::Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    at::Tensor y;
    {
      at::AutoGradMode grad(true);
      y = block->forward(x);
    }
    torch::autograd::backward({y}, {grads[0]});
    return {x.grad(), at::Tensor()};
  }
};


class Gpt : public LanguageModel {
 public:
  Gpt(const Config& c, const ModelPart& part)
      : part_(part), tp_(part.tp_group), compute_(c.precision == "bf16" ? at::kBFloat16 : at::kFloat),
        recompute_(parse_recompute(c.recompute)) {
    tied_copy_ = part.has_head && !part.has_embedding && !c.untied_head;
    // Vocabulary parallel (Megatron): under tp the token embedding and the output head hold
    // V/tp rows each, so no rank computes all V logits. A vocabulary tp does not divide
    // stays replicated (full logits on every rank, as before).
    vocab_parallel_ = tp_.size() > 1 && c.vocab_size % tp_.size() == 0;
    const int64_t vocab_rows = vocab_parallel_ ? c.vocab_size / tp_.size() : c.vocab_size;
    vocab_first_ = vocab_parallel_ ? vocab_rows * tp_.rank() : 0;
    const Slice vocab_slice = vocab_parallel_ ? Slice{0, tp_.size(), tp_.rank(), 1} : Slice{};
    if (part.has_embedding || tied_copy_) {
      wte_ = register_module("wte", nn::Embedding(vocab_rows, c.n_embd));
      slices_["wte.weight"] = vocab_slice;
    }
    if (part.has_embedding) wpe_ = register_module("wpe", nn::Embedding(c.seq_len, c.n_embd));
    // A plain module, not a ModuleList: children are named by their global block number.
    auto blocks = register_module("blocks", std::make_shared<nn::Module>());
    for (int64_t i = part_.first_block; i < part_.end_block; ++i)
      blocks_.push_back(blocks->register_module(std::to_string(i), std::make_shared<Block>(c.n_embd, c.n_head, c.seq_len, &tp_, recompute_)));
    if (part.has_head) {
      ln_f_ = register_module("ln_f", nn::LayerNorm(nn::LayerNormOptions({c.n_embd})));
      if (c.untied_head) {
        head_ = register_module("head", nn::Linear(nn::LinearOptions(c.n_embd, vocab_rows).bias(false)));
        slices_["head.weight"] = vocab_slice;
      }
    }
    for (const auto& m : named_modules("", /*include_self=*/false))
      if (auto* lin = m.value()->as<ParallelLinear>()) {
        slices_[m.key() + ".weight"] = lin->weight_slice();
        slices_[m.key() + ".bias"] = lin->bias_slice();
      }
  }
  at::Tensor forward(const at::Tensor& input) override {
    // Activations in the compute dtype (bf16 under --precision bf16), the stage-to-stage
    // tensors included (the pipeline sends them as they are); the embedding lookup is fp32,
    // logits are bf16.
    at::Tensor x;                                                        // (B, T, C)
    if (!part_.has_embedding) x = input.to(compute_);                    // from the previous stage
    else {                                           // input: idx (B, T)
      auto pos = at::arange(input.size(1), input.options());             // (T)
      at::Tensor tok = vocab_parallel_ ? vocab_parallel_embedding(input, wte_->weight, vocab_first_, tp_)
                                       : wte_->forward(input);
      x = (tok + wpe_->forward(pos)).to(compute_);                       // (B, T, C)
    }
    const bool full = recompute_ == Recompute::kFull && at::GradMode::is_enabled();
    for (size_t i = 0; i < blocks_.size(); ++i) {
      Block* b = blocks_[i].get();
      x = hooked_block(part_.first_block + static_cast<int64_t>(i), x,
                       [&](const at::Tensor& in) { return full ? BlockRecompute<Block>::apply(in, b) : b->forward(in); });
    }
    if (!part_.has_head) return x;
    x = layer_norm(ln_f_, x);
    // Vocabulary parallel: f (all-reduce of the gradient in backward), then this rank's
    // V/tp columns of the logits (B, T, V/tp).
    if (vocab_parallel_) x = tp_.f(x);
    return at::linear(x, as_compute(head_ ? head_->weight : wte_->weight, x));  // (B, T, V) or (B, T, V/tp)
  }
  at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& targets) override {
    if (!vocab_parallel_) return LanguageModel::cross_entropy(logits, targets);
    return vocab_parallel_cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}), vocab_first_, tp_);
  }
  bool predicts_every_position() const override { return true; }
  bool calls_block_hooks() const override { return true; }
  bool has_head() const override { return part_.has_head; }
  bool holds_tied_copy() const override { return tied_copy_; }
  Slice slice_of(const std::string& name) const override {
    auto it = slices_.find(name);
    return it == slices_.end() ? Slice{} : it->second;
  }
  bool counts_in_norm(const std::string& name) const override {
    if (tied_copy_ && is_tied_embedding(name)) return false;
    return !slice_of(name).whole() || tp_.rank() == 0;
  }

 private:
  ModelPart part_;
  TpGroup tp_;  // before the blocks: they keep a pointer to it
  at::ScalarType compute_;
  Recompute recompute_;
  bool vocab_parallel_ = false;
  int64_t vocab_first_ = 0;  // first vocabulary row (logit column) this rank holds
  bool tied_copy_ = false;
  nn::Embedding wte_{nullptr}, wpe_{nullptr};
  std::vector<std::shared_ptr<Block>> blocks_;
  nn::LayerNorm ln_f_{nullptr};
  nn::Linear head_{nullptr};
  std::map<std::string, Slice> slices_;
};

// ---- Llama (Hugging Face LlamaForCausalLM) ------------------------------------------
// KV key/value heads (H/KV query heads share each), F SwiGLU width; no biases anywhere.
// Parameter names are HF's (model.embed_tokens, model.layers.N.self_attn.q_proj, ...,
// model.norm, lm_head), so safetensors export/import maps them one to one.

// HF's LlamaRMSNorm: x * rsqrt(mean(x^2) + eps) in fp32, cast back to the activations'
// dtype, times the weight.
class RmsNorm : public nn::Module {
 public:
  RmsNorm(int64_t C, double eps) : eps_(eps) { weight = register_parameter("weight", at::ones({C})); }
  at::Tensor forward(const at::Tensor& x) {  // (..., C)
    at::Tensor xf = x.to(at::kFloat);
    at::Tensor y = xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps_);
    return as_compute(weight, x) * y.to(x.scalar_type());
  }
  at::Tensor weight;

 private:
  double eps_;
};

// Rotary embeddings, HF's convention: inv_freq_i = theta^(-2i/D), angle (t, i) = t inv_freq_i
// for i < D/2, the table repeated for the second half (cat(freqs, freqs)); applied as
// x cos + rotate_half(x) sin, rotate_half(x) = cat(-x2, x1) of the two halves (not
// interleaved pairs). (T, D) fp32 tables, cast to the activations' dtype as HF does.
struct Rope {
  at::Tensor cos, sin;  // the model's buffers (moved with it to the device)
  at::Tensor apply(const at::Tensor& x, int64_t pos = 0) const {  // (B, H, T, D) at positions [pos, pos + T)
    const int64_t T = x.size(2), half = x.size(3) / 2;
    at::Tensor c = cos.slice(0, pos, pos + T).to(x.scalar_type()), s = sin.slice(0, pos, pos + T).to(x.scalar_type());
    at::Tensor rotated = at::cat({x.slice(-1, half).neg(), x.slice(-1, 0, half)}, -1);
    return x * c + rotated * s;
  }
};

class LlamaAttention : public nn::Module {
 public:
  LlamaAttention(const Config& c, TpGroup* tp, const Rope* rope, const at::Tensor* mask, Recompute rc)
      : head_dim_(c.n_embd / c.n_head), n_head_(c.n_head / tp->size()), n_kv_(c.n_kv_head / tp->size()),
        selective_(rc == Recompute::kSelective), rope_(rope), mask_(mask) {
    const int64_t C = c.n_embd, q_out = c.n_head * head_dim_, kv_out = c.n_kv_head * head_dim_;
    // Column-parallel by heads: rank r holds query heads [r H/tp, (r+1) H/tp) and key/value
    // heads [r KV/tp, (r+1) KV/tp), exactly the ones its query heads read.
    q_proj = register_module("q_proj", std::make_shared<ParallelLinear>(C, q_out, Split::kColumn, tp, 1, false));
    k_proj = register_module("k_proj", std::make_shared<ParallelLinear>(C, kv_out, Split::kColumn, tp, 1, false));
    v_proj = register_module("v_proj", std::make_shared<ParallelLinear>(C, kv_out, Split::kColumn, tp, 1, false));
    o_proj = register_module("o_proj", std::make_shared<ParallelLinear>(q_out, C, Split::kRow, tp, 1, false));
  }
  at::Tensor forward(const at::Tensor& x) {  // x (B, T, C); heads local to this tp rank
    const int64_t B = x.size(0), T = x.size(1), D = head_dim_;
    auto q = q_proj->forward(x).view({B, T, n_head_, D}).transpose(1, 2);  // (B, H, T, D)
    auto k = k_proj->forward(x).view({B, T, n_kv_, D}).transpose(1, 2);    // (B, KV, T, D)
    auto v = v_proj->forward(x).view({B, T, n_kv_, D}).transpose(1, 2);
    q = rope_->apply(q);
    k = rope_->apply(k);
    if (n_head_ != n_kv_) {  // HF's repeat_kv: query head j reads key/value head j / (H/KV)
      k = k.repeat_interleave(n_head_ / n_kv_, 1);                          // (B, H, T, D)
      v = v.repeat_interleave(n_head_ / n_kv_, 1);
    }
    auto y = attend(q, k, v, *mask_, selective_);                          // (B, H, T, D)
    y = y.transpose(1, 2).contiguous().view({B, T, n_head_ * D});
    return o_proj->forward(y);                                             // (B, T, C)
  }
  // Decoding: x (B, T, C) at positions [pos, pos + T); kc, vc the cached (B, KV, pos, D)
  // keys and values (undefined when pos = 0), extended here. The same ops as forward()'s
  // naive attention core on the rows [pos, pos + T) of the whole sequence.
  at::Tensor forward_cached(const at::Tensor& x, at::Tensor& kc, at::Tensor& vc, int64_t pos) {
    const int64_t B = x.size(0), T = x.size(1), D = head_dim_;
    auto q = rope_->apply(q_proj->forward(x).view({B, T, n_head_, D}).transpose(1, 2), pos);  // (B, H, T, D)
    auto k = rope_->apply(k_proj->forward(x).view({B, T, n_kv_, D}).transpose(1, 2), pos);    // (B, KV, T, D)
    auto v = v_proj->forward(x).view({B, T, n_kv_, D}).transpose(1, 2);
    kc = kc.defined() ? at::cat({kc, k}, 2) : k;                             // (B, KV, pos + T, D)
    vc = vc.defined() ? at::cat({vc, v}, 2) : v;
    at::Tensor kk = kc, vv = vc;
    if (n_head_ != n_kv_) {
      kk = kk.repeat_interleave(n_head_ / n_kv_, 1);                        // (B, H, pos + T, D)
      vv = vv.repeat_interleave(n_head_ / n_kv_, 1);
    }
    auto att = at::matmul(q, kk.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(D)));  // (B, H, T, pos + T)
    att = att.masked_fill(mask_->slice(0, pos, pos + T).slice(1, 0, pos + T), -INFINITY).softmax(-1);
    auto y = at::matmul(att, vv).transpose(1, 2).contiguous().view({B, T, n_head_ * D});
    return o_proj->forward(y);                                             // (B, T, C)
  }
  std::shared_ptr<ParallelLinear> q_proj, k_proj, v_proj, o_proj;

 private:
  int64_t head_dim_, n_head_, n_kv_;
  bool selective_;
  const Rope* rope_;
  const at::Tensor* mask_;
};

class LlamaMlp : public nn::Module {  // SwiGLU: down(silu(gate(x)) * up(x))
 public:
  LlamaMlp(int64_t C, int64_t F, TpGroup* tp) {
    gate_proj = register_module("gate_proj", std::make_shared<ParallelLinear>(C, F, Split::kColumn, tp, 1, false));
    up_proj = register_module("up_proj", std::make_shared<ParallelLinear>(C, F, Split::kColumn, tp, 1, false));
    down_proj = register_module("down_proj", std::make_shared<ParallelLinear>(F, C, Split::kRow, tp, 1, false));
  }
  at::Tensor forward(const at::Tensor& x) {  // (B, T, C) -> (B, T, F/tp) -> (B, T, C)
    return down_proj->forward(at::silu(gate_proj->forward(x)) * up_proj->forward(x));
  }
  std::shared_ptr<ParallelLinear> gate_proj, up_proj, down_proj;
};

class LlamaBlock : public nn::Module {  // HF's LlamaDecoderLayer, pre-norm residual
 public:
  LlamaBlock(const Config& c, TpGroup* tp, const Rope* rope, const at::Tensor* mask, Recompute rc) {
    input_layernorm = register_module("input_layernorm", std::make_shared<RmsNorm>(c.n_embd, c.norm_eps));
    self_attn = register_module("self_attn", std::make_shared<LlamaAttention>(c, tp, rope, mask, rc));
    post_attention_layernorm =
        register_module("post_attention_layernorm", std::make_shared<RmsNorm>(c.n_embd, c.norm_eps));
    mlp = register_module("mlp", std::make_shared<LlamaMlp>(c.n_embd, c.ffn_hidden, tp));
  }
  at::Tensor forward(at::Tensor x) {  // (B, T, C) -> (B, T, C)
    x = x + self_attn->forward(input_layernorm->forward(x));
    return x + mlp->forward(post_attention_layernorm->forward(x));
  }
  at::Tensor forward_cached(at::Tensor x, at::Tensor& kc, at::Tensor& vc, int64_t pos) {
    x = x + self_attn->forward_cached(input_layernorm->forward(x), kc, vc, pos);
    return x + mlp->forward(post_attention_layernorm->forward(x));
  }
  std::shared_ptr<RmsNorm> input_layernorm, post_attention_layernorm;
  std::shared_ptr<LlamaAttention> self_attn;
  std::shared_ptr<LlamaMlp> mlp;
};

class Llama : public LanguageModel {
 public:
  Llama(const Config& c, const ModelPart& part)
      : part_(part), tp_(part.tp_group), compute_(c.precision == "bf16" ? at::kBFloat16 : at::kFloat),
        recompute_(parse_recompute(c.recompute)), seq_len_(c.seq_len) {
    tied_copy_ = part.has_head && !part.has_embedding && !c.untied_head;
    // Vocabulary parallel as the GPT: V/tp rows of embed_tokens and lm_head per rank.
    vocab_parallel_ = tp_.size() > 1 && c.vocab_size % tp_.size() == 0;
    const int64_t vocab_rows = vocab_parallel_ ? c.vocab_size / tp_.size() : c.vocab_size;
    vocab_first_ = vocab_parallel_ ? vocab_rows * tp_.rank() : 0;
    const Slice vocab_slice = vocab_parallel_ ? Slice{0, tp_.size(), tp_.rank(), 1} : Slice{};
    // Rotary tables and the causal mask, shared by the blocks (buffers: not parameters).
    const int64_t D = c.n_embd / c.n_head;
    at::Tensor inv_freq = 1.0 / at::pow(c.rope_theta, at::arange(0, D, 2, at::kLong).to(at::kFloat) / D);  // (D/2)
    at::Tensor freqs = at::outer(at::arange(c.seq_len, at::kLong).to(at::kFloat), inv_freq);                // (T, D/2)
    at::Tensor angles = at::cat({freqs, freqs}, -1);                                                        // (T, D)
    rope_.cos = register_buffer("rope_cos", angles.cos());
    rope_.sin = register_buffer("rope_sin", angles.sin());
    mask_ = register_buffer("causal_mask", at::ones({c.seq_len, c.seq_len}, at::kBool).triu(1));
    auto model = register_module("model", std::make_shared<nn::Module>());
    if (part.has_embedding || tied_copy_) {
      embed_ = model->register_module("embed_tokens", nn::Embedding(vocab_rows, c.n_embd));
      slices_["model.embed_tokens.weight"] = vocab_slice;
    }
    // A plain module, not a ModuleList: children are named by their global layer number.
    auto layers = model->register_module("layers", std::make_shared<nn::Module>());
    for (int64_t i = part_.first_block; i < part_.end_block; ++i)
      blocks_.push_back(
          layers->register_module(std::to_string(i), std::make_shared<LlamaBlock>(c, &tp_, &rope_, &mask_, recompute_)));
    if (part.has_head) {
      norm_ = model->register_module("norm", std::make_shared<RmsNorm>(c.n_embd, c.norm_eps));
      if (c.untied_head) {
        lm_head_ = register_module("lm_head", nn::Linear(nn::LinearOptions(c.n_embd, vocab_rows).bias(false)));
        slices_["lm_head.weight"] = vocab_slice;
      }
    }
    for (const auto& m : named_modules("", /*include_self=*/false))
      if (auto* lin = m.value()->as<ParallelLinear>()) slices_[m.key() + ".weight"] = lin->weight_slice();
  }
  at::Tensor forward(const at::Tensor& input) override {
    at::Tensor x;                                                         // (B, T, C)
    if (!part_.has_embedding) x = input.to(compute_);                     // from the previous stage
    else
      x = (vocab_parallel_ ? vocab_parallel_embedding(input, embed_->weight, vocab_first_, tp_)
                           : embed_->forward(input)).to(compute_);
    const bool full = recompute_ == Recompute::kFull && at::GradMode::is_enabled();
    for (size_t i = 0; i < blocks_.size(); ++i) {
      LlamaBlock* b = blocks_[i].get();
      x = hooked_block(part_.first_block + static_cast<int64_t>(i), x, [&](const at::Tensor& in) {
        return full ? BlockRecompute<LlamaBlock>::apply(in, b) : b->forward(in);
      });
    }
    if (!part_.has_head) return x;
    x = norm_->forward(x);
    if (vocab_parallel_) x = tp_.f(x);
    return at::linear(x, as_compute(lm_head_ ? lm_head_->weight : embed_->weight, x));  // (B, T, V) or V/tp
  }
  at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& targets) override {
    if (!vocab_parallel_) return LanguageModel::cross_entropy(logits, targets);
    return vocab_parallel_cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}), vocab_first_, tp_);
  }
  bool supports_kv_cache() const override {
    return part_.has_embedding && part_.has_head && tp_.size() == 1 && block_hooks_ == nullptr;
  }
  at::Tensor forward_cached(const at::Tensor& idx, KvCache& cache) override {  // idx (B, T_new)
    if (!supports_kv_cache()) return LanguageModel::forward_cached(idx, cache);
    const int64_t pos = cache.length, T = idx.size(1);
    if (pos + T > seq_len_)
      throw RunError("KV cache: positions up to " + std::to_string(pos + T) + " exceed seq-len " + std::to_string(seq_len_));
    cache.k.resize(blocks_.size());
    cache.v.resize(blocks_.size());
    at::Tensor x = embed_->forward(idx).to(compute_);                    // (B, T, C)
    for (size_t i = 0; i < blocks_.size(); ++i) x = blocks_[i]->forward_cached(x, cache.k[i], cache.v[i], pos);
    cache.length = pos + T;
    x = norm_->forward(x);
    return at::linear(x, as_compute(lm_head_ ? lm_head_->weight : embed_->weight, x));  // (B, T, V)
  }
  bool predicts_every_position() const override { return true; }
  bool calls_block_hooks() const override { return true; }  // model.layers.N: ZeRO-3's per-block gather
  bool has_head() const override { return part_.has_head; }
  bool holds_tied_copy() const override { return tied_copy_; }
  Slice slice_of(const std::string& name) const override {
    auto it = slices_.find(name);
    return it == slices_.end() ? Slice{} : it->second;
  }
  bool counts_in_norm(const std::string& name) const override {
    if (tied_copy_ && is_tied_embedding(name)) return false;
    return !slice_of(name).whole() || tp_.rank() == 0;  // norms replicated over tp: counted on rank 0
  }

 private:
  ModelPart part_;
  TpGroup tp_;  // before the blocks: they keep a pointer to it
  at::ScalarType compute_;
  Recompute recompute_;
  int64_t seq_len_;
  bool vocab_parallel_ = false;
  int64_t vocab_first_ = 0;
  bool tied_copy_ = false;
  Rope rope_;
  at::Tensor mask_;
  nn::Embedding embed_{nullptr};
  std::vector<std::shared_ptr<LlamaBlock>> blocks_;
  std::shared_ptr<RmsNorm> norm_;
  nn::Linear lm_head_{nullptr};
  std::map<std::string, Slice> slices_;
};

// Bengio-style MLP language model: the window's embeddings, concatenated, predict the
// next token.
class MlpModel : public LanguageModel {
 public:
  explicit MlpModel(const Config& c) {
    wte_ = register_module("wte", nn::Embedding(c.vocab_size, c.n_embd));
    fc_ = register_module("fc", nn::Linear(c.seq_len * c.n_embd, c.hidden));
    proj_ = register_module("proj", nn::Linear(c.hidden, c.vocab_size));
  }
  at::Tensor forward(const at::Tensor& idx) override {              // idx (B, T)
    auto x = wte_->forward(idx).flatten(1);                          // (B, T*C)
    return proj_->forward(at::gelu(fc_->forward(x)));                // (B, V)
  }
  bool predicts_every_position() const override { return false; }

 private:
  nn::Embedding wte_{nullptr};
  nn::Linear fc_{nullptr}, proj_{nullptr};
};

// ZeRO-3: identity in forward; its backward tells the hooks that block `index`'s backward
// is about to start (its parameters must be gathered again).
struct BeforeBlockBackward : torch::autograd::Function<BeforeBlockBackward> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, BlockHooks* hooks, int64_t index) {
    ctx->saved_data["hooks"] = ptr_as_int(hooks);
    ctx->saved_data["index"] = index;
    return x.view_as(x);  // a new tensor for the graph, same storage
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    int_as_ptr<BlockHooks>(ctx->saved_data["hooks"])->before_backward(ctx->saved_data["index"].toInt());
    return {grads[0], at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor LanguageModel::hooked_block(int64_t index, const at::Tensor& x,
                                       const std::function<at::Tensor(const at::Tensor&)>& fn) {
  if (!block_hooks_) return fn(x);
  block_hooks_->before_forward(index);
  at::Tensor y = fn(x);
  block_hooks_->after_forward(index);
  return at::GradMode::is_enabled() ? BeforeBlockBackward::apply(y, block_hooks_, index) : y;
}

at::Tensor LanguageModel::forward_cached(const at::Tensor& /*idx*/, KvCache& /*cache*/) {
  throw RunError("this model has no KV cache (forward_cached): recompute the window instead");
}

at::Tensor LanguageModel::loss(const at::Tensor& input, const at::Tensor& targets) {
  if (!has_head()) throw RunError("loss() needs the model part with the head (the last pipeline stage)");
  return cross_entropy(forward(input), targets);
}

at::Tensor LanguageModel::cross_entropy(const at::Tensor& logits, const at::Tensor& targets) {
  at::Tensor l = logits.to(at::kFloat);  // the loss in fp32 (bf16 logits under --precision bf16)
  return at::cross_entropy_loss(l.reshape({-1, l.size(-1)}), targets.reshape({-1}));
}

std::shared_ptr<LanguageModel> make_model(const Config& cfg, const ModelPart& part) {
  const int tp = part.tp_group ? part.tp_group->size() : 1;
  const bool whole = part.first_block == 0 && (part.end_block == -1 || part.end_block == cfg.n_layer) &&
                     part.has_embedding && part.has_head;
  std::shared_ptr<LanguageModel> m;
  if (cfg.model == "gpt" || cfg.model == "llama") {
    check_tp_heads(cfg, tp);
    if (cfg.n_head % tp != 0)
      throw RunError("tensor parallel: tp=" + std::to_string(tp) + " does not divide n-head=" +
                     std::to_string(cfg.n_head) + " (each rank holds whole attention heads)");
    ModelPart p = part;
    if (p.end_block == -1) p.end_block = cfg.n_layer;
    if (p.first_block < 0 || p.first_block > p.end_block || p.end_block > cfg.n_layer)
      throw RunError("model part: blocks [" + std::to_string(p.first_block) + ", " + std::to_string(p.end_block) +
                     ") are not within the " + std::to_string(cfg.n_layer) + " " + cfg.model + " blocks");
    if (cfg.model == "gpt") m = std::make_shared<Gpt>(cfg, p);
    else m = std::make_shared<Llama>(cfg, p);
  } else {
    if (!whole || tp > 1)
      throw RunError("the mlp model cannot be split: pipeline and tensor parallel need --model gpt or llama");
    m = std::make_shared<MlpModel>(cfg);
  }
  initialise(cfg, *m);
  torch::manual_seed(cfg.seed);  // the global generator in the same state on every part
  return m;
}

bool is_tied_embedding(const std::string& name) { return name == "wte.weight" || name == "model.embed_tokens.weight"; }

std::vector<std::pair<std::string, at::Tensor>> sorted_parameters(const torch::nn::Module& m) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& p : m.named_parameters()) out.emplace_back(p.key(), p.value());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

}  // namespace scaleguard::run
