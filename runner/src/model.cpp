// MLP and GPT-style decoder, nanoGPT-shaped. B batch, T context, C width, H heads,
// D = C / H head width, V vocabulary.
#include "model.h"

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
// 1/sqrt(2 * n_layer); biases 0, layer norms 1 (weight) and 0 (bias).
at::Tensor initial_value(const Config& c, const std::string& name, at::IntArrayRef shape) {
  auto ends_with = [&name](const std::string& tail) {
    return name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  if (shape.size() < 2) {
    bool norm_weight = name.find("ln") != std::string::npos && ends_with(".weight");
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

class CausalSelfAttention;

// Selective recompute (Megatron's): the attention core -- scores, mask, softmax, weighted
// sum -- keeps only q, k, v (which the qkv projection's backward needs anyway) and redoes
// the (B, H, T, T) scores and probabilities in backward. The same ops on the same inputs:
// gradients bit-identical to keeping them.
struct AttentionCoreRecompute : torch::autograd::Function<AttentionCoreRecompute> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            CausalSelfAttention* attn);
  static variable_list backward(AutogradContext* ctx, variable_list grads);
};

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
    auto y = selective_ && at::GradMode::is_enabled() ? AttentionCoreRecompute::apply(q, k, v, this)
                                                      : core(q, k, v);  // (B, H, T, D)
    y = y.transpose(1, 2).contiguous().view({B, T, C});                 // (B, T, C)
    return proj->forward(y);                                            // (B, T, C) global C
  }
  // softmax(q k^T / sqrt(D) + causal mask) v: (B, H, T, D) each -> (B, H, T, D).
  at::Tensor core(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) const {
    const int64_t T = q.size(2), D = q.size(3);
#if defined(TORCH_VERSION_MAJOR) && TORCH_VERSION_MAJOR >= 2
    // LibTorch >= 2.0: the fused kernel (flash / memory-efficient on GPUs) never holds the
    // (B, H, T, T) scores. Causal masking by is_causal equals the triu mask below.
    (void)T, (void)D;
    return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0, /*is_causal=*/true);
#else
    // LibTorch 1.13: no fused attention; the scores are materialised (selective recompute
    // keeps them out of the saved activations).
    auto att = at::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(D)));  // (B, H, T, T)
    att = att.masked_fill(mask_.slice(0, 0, T).slice(1, 0, T), -INFINITY).softmax(-1);
    return at::matmul(att, v);                                          // (B, H, T, D)
#endif
  }
  std::shared_ptr<ParallelLinear> qkv, proj;

 private:
  int64_t n_head_;
  bool selective_;
  at::Tensor mask_;
};

at::Tensor AttentionCoreRecompute::forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                                           const at::Tensor& v, CausalSelfAttention* attn) {
  ctx->saved_data["attn"] = ptr_as_int(attn);
  ctx->save_for_backward({q, k, v});
  return attn->core(q, k, v);  // grad mode is off inside a custom Function's forward
}

variable_list AttentionCoreRecompute::backward(AutogradContext* ctx, variable_list grads) {
  auto* attn = int_as_ptr<CausalSelfAttention>(ctx->saved_data["attn"]);
  variable_list saved = ctx->get_saved_variables();
  variable_list in;
  for (const auto& t : saved) in.push_back(t.detach().requires_grad_(true));  // same strides as in forward
  at::Tensor y;
  {
    at::AutoGradMode grad(true);
    y = attn->core(in[0], in[1], in[2]);
  }
  variable_list g = torch::autograd::grad({y}, in, {grads[0]});
  return {g[0], g[1], g[2], at::Tensor()};
}

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
// the data-parallel hooks as usual). The model has no dropout, so the rerun is the same
// computation and the gradients are bit-identical to keeping every activation.
struct BlockRecompute : torch::autograd::Function<BlockRecompute> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Block* block) {
    ctx->saved_data["block"] = ptr_as_int(block);
    ctx->save_for_backward({x});
    return block->forward(x);  // no graph: grad mode is off here
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* block = int_as_ptr<Block>(ctx->saved_data["block"]);
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
                       [&](const at::Tensor& in) { return full ? BlockRecompute::apply(in, b) : b->forward(in); });
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
    if (tied_copy_ && name == "wte.weight") return false;
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
  if (cfg.model == "gpt") {
    if (cfg.n_head % tp != 0)
      throw RunError("tensor parallel: tp=" + std::to_string(tp) + " does not divide n-head=" +
                     std::to_string(cfg.n_head) + " (each rank holds whole attention heads)");
    ModelPart p = part;
    if (p.end_block == -1) p.end_block = cfg.n_layer;
    if (p.first_block < 0 || p.first_block > p.end_block || p.end_block > cfg.n_layer)
      throw RunError("model part: blocks [" + std::to_string(p.first_block) + ", " + std::to_string(p.end_block) +
                     ") are not within the " + std::to_string(cfg.n_layer) + " GPT blocks");
    m = std::make_shared<Gpt>(cfg, p);
  } else {
    if (!whole || tp > 1)
      throw RunError("the mlp model cannot be split: pipeline and tensor parallel need --model gpt");
    m = std::make_shared<MlpModel>(cfg);
  }
  initialise(cfg, *m);
  torch::manual_seed(cfg.seed);  // the global generator in the same state on every part
  return m;
}

std::vector<std::pair<std::string, at::Tensor>> sorted_parameters(const torch::nn::Module& m) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& p : m.named_parameters()) out.emplace_back(p.key(), p.value());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

}  // namespace scaleguard::run
