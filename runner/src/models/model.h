// Models built from named layers. Parameter names are stable and hierarchical
// ("wte.weight", "blocks.0.attn.qkv.weight", ...; Llama's are Hugging Face's:
// "model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight", ...): checkpoints
// and tensor/pipeline layouts key on them, so renaming a layer is a format change.
//
// A model may be a part of the whole: a range of GPT blocks (pipeline stage) and a slice of
// each block's matrices (tensor parallel). Names stay global ("blocks.3.mlp.fc.weight" on
// whichever stage holds block 3) and every value equals the corresponding value of the full
// single-process model for the same seed: each parameter is initialised from its own
// generator seeded by (seed, name), then sliced.
#pragma once
#include <torch/nn/module.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/comm.h"
#include "config/config.h"
#include "models/tensor_parallel.h"

namespace scaleguard::run {

// Which part of the GPT or Llama this rank builds.
struct ModelPart {
  int64_t first_block = 0, end_block = -1;  // blocks (layers) [first, end) on this rank; -1 = n_layer
  bool has_embedding = true;  // first pipeline stage: wte, wpe; forward takes idx (B,T) int64
  bool has_head = true;       // last stage: ln_f + head; forward returns logits (B,T,V)
  Communicator* tp_group = nullptr;  // tensor-parallel peers; nullptr = no tensor parallel
};

// ZeRO-3 (data_parallel.h, ZeroThree): called by a model around each of its blocks so the
// block's sharded parameters are gathered just before they are used and freed after. Block
// numbers are the global ones ("blocks.N."). before_backward runs when the gradient of the
// block's output arrives, before any of the block's backward (recomputed forward included).
class BlockHooks {
 public:
  virtual ~BlockHooks() = default;
  virtual void before_forward(int64_t block) = 0;
  virtual void after_forward(int64_t block) = 0;
  virtual void before_backward(int64_t block) = 0;
};

// Incremental decoding (`sample`): the keys and values of the positions already run, per
// block, as the attention holds them (before grouped-query attention repeats them).
struct KvCache {
  std::vector<at::Tensor> k, v;  // per block: (B, KV, length, D)
  int64_t length = 0;            // positions held
};

class LanguageModel : public torch::nn::Module {
 public:
  // ZeRO-3: a model that runs blocks calls these hooks around each (nullptr = none). A model
  // that does not (MLP, TorchScript) keeps every bucket gathered for the whole step.
  void set_block_hooks(BlockHooks* h) { block_hooks_ = h; }
  // True for a model whose forward runs its blocks through hooked_block(): only then may
  // ZeRO-3 keep a block's parameters ungathered outside its hooks.
  virtual bool calls_block_hooks() const { return false; }
  // Full model: idx (B, T) int64 -> logits, (B, T, V) for a model that predicts every
  // position, (B, V) for one that predicts the token after the window.
  // A GPT part takes idx on the first stage, activations (B, T, C) float otherwise, and
  // returns logits on the last stage, activations (B, T, C) otherwise. Under tensor
  // parallel (when tp divides the vocabulary) the GPT's logits are this rank's V/tp columns.
  virtual at::Tensor forward(const at::Tensor& input) = 0;
  // Mean cross-entropy of forward(input). targets: (B, T) or (B). Only on a part with the head.
  at::Tensor loss(const at::Tensor& input, const at::Tensor& targets);
  // Mean cross-entropy of forward()'s logits, in fp32. Under tensor parallel a GPT's logits
  // are sharded by vocabulary (vocab_parallel_cross_entropy): no rank holds all of them.
  virtual at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& targets);
  // True: targets are the inputs shifted by one (GPT); false: the next token only (MLP).
  virtual bool predicts_every_position() const = 0;
  // This part ends in ln_f + head (the last pipeline stage) and returns logits.
  virtual bool has_head() const { return true; }
  // Evaluation (--eval-every): a module with dropout or batch norm switches to its inference
  // behaviour (and batch norm keeps its running statistics). Ours have neither.
  virtual void set_evaluating(bool /*on*/) {}
  // Incremental decoding: true for a model with forward_cached() (the whole Llama in one
  // process). forward_cached(idx (B, T_new)) runs only the tokens after the cache's, at
  // positions [cache.length, cache.length + T_new) < seq-len, extends the cache and returns
  // their logits (B, T_new, V): what forward() of the whole sequence gives for those rows.
  virtual bool supports_kv_cache() const { return false; }
  virtual at::Tensor forward_cached(const at::Tensor& idx, KvCache& cache);

  // The last pipeline stage of a tied-head GPT holds its own copy of "wte.weight"; its
  // gradient must be summed with the first stage's (and it is not counted twice in the
  // global gradient norm).
  virtual bool holds_tied_copy() const { return false; }
  // Which piece of the global parameter `name` this rank holds (whole when not sliced).
  virtual Slice slice_of(const std::string& /*name*/) const { return {}; }
  // Whether this rank counts `name` in the global gradient norm summed over the tensor- and
  // pipeline-parallel groups: every gradient exactly once (replicated ones on tp rank 0,
  // the tied copy on the first stage only).
  virtual bool counts_in_norm(const std::string& /*name*/) const { return true; }

 protected:
  // Runs block `index` (fn) between the hooks; with grad mode on, the output carries a
  // node whose backward calls before_backward(index) first.
  at::Tensor hooked_block(int64_t index, const at::Tensor& x, const std::function<at::Tensor(const at::Tensor&)>& fn);
  BlockHooks* block_hooks_ = nullptr;
};

// Deterministic: the same config and seed give bit-identical parameters on every rank.
// Throws RunError for a part the model cannot be split into (MLP with pp/tp, tp not
// dividing n_head, a bad block range).
std::shared_ptr<LanguageModel> make_model(const Config& cfg, const ModelPart& part = {});

// The token embedding a tied head reuses: "wte.weight" (GPT), "model.embed_tokens.weight"
// (Llama). The last pipeline stage of a tied model holds a copy under this name.
bool is_tied_embedding(const std::string& name);

// Parameters sorted by full name: the order checksums, dumps and checkpoints use.
std::vector<std::pair<std::string, at::Tensor>> sorted_parameters(const torch::nn::Module& m);

}  // namespace scaleguard::run
