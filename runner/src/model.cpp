// MLP and GPT-style decoder, nanoGPT-shaped. B batch, T context, C width, H heads,
// D = C / H head width, V vocabulary.
#include "model.h"

#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/utils.h>
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

class CausalSelfAttention : public nn::Module {
 public:
  CausalSelfAttention(int64_t C, int64_t H, int64_t T, TpGroup* tp) : n_head_(H / tp->size()) {
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
    auto att = at::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(D)));  // (B, H, T, T)
    att = att.masked_fill(mask_.slice(0, 0, T).slice(1, 0, T), -INFINITY).softmax(-1);
    auto y = at::matmul(att, v);                                        // (B, H, T, D)
    y = y.transpose(1, 2).contiguous().view({B, T, C});                 // (B, T, C)
    return proj->forward(y);                                            // (B, T, C) global C
  }
  std::shared_ptr<ParallelLinear> qkv, proj;

 private:
  int64_t n_head_;
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
  Block(int64_t C, int64_t H, int64_t T, TpGroup* tp) {
    ln1_ = register_module("ln1", nn::LayerNorm(nn::LayerNormOptions({C})));
    attn = register_module("attn", std::make_shared<CausalSelfAttention>(C, H, T, tp));
    ln2_ = register_module("ln2", nn::LayerNorm(nn::LayerNormOptions({C})));
    mlp = register_module("mlp", std::make_shared<Mlp>(C, tp));
  }
  at::Tensor forward(at::Tensor x) {  // (B, T, C) -> (B, T, C), pre-norm residual
    x = x + attn->forward(ln1_->forward(x));
    return x + mlp->forward(ln2_->forward(x));
  }
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<Mlp> mlp;

 private:
  nn::LayerNorm ln1_{nullptr}, ln2_{nullptr};
};

class Gpt : public LanguageModel {
 public:
  Gpt(const Config& c, const ModelPart& part) : part_(part), tp_(part.tp_group) {
    tied_copy_ = part.has_head && !part.has_embedding && !c.untied_head;
    if (part.has_embedding || tied_copy_) wte_ = register_module("wte", nn::Embedding(c.vocab_size, c.n_embd));
    if (part.has_embedding) wpe_ = register_module("wpe", nn::Embedding(c.seq_len, c.n_embd));
    // A plain module, not a ModuleList: children are named by their global block number.
    auto blocks = register_module("blocks", std::make_shared<nn::Module>());
    for (int64_t i = part_.first_block; i < part_.end_block; ++i)
      blocks_.push_back(blocks->register_module(std::to_string(i), std::make_shared<Block>(c.n_embd, c.n_head, c.seq_len, &tp_)));
    if (part.has_head) {
      ln_f_ = register_module("ln_f", nn::LayerNorm(nn::LayerNormOptions({c.n_embd})));
      if (c.untied_head) head_ = register_module("head", nn::Linear(nn::LinearOptions(c.n_embd, c.vocab_size).bias(false)));
    }
    for (const auto& m : named_modules("", /*include_self=*/false))
      if (auto* lin = m.value()->as<ParallelLinear>()) {
        slices_[m.key() + ".weight"] = lin->weight_slice();
        slices_[m.key() + ".bias"] = lin->bias_slice();
      }
  }
  at::Tensor forward(const at::Tensor& input) override {
    at::Tensor x = input;                                                // (B, T, C) from the previous stage
    if (part_.has_embedding) {                                           // input: idx (B, T)
      auto pos = at::arange(input.size(1), input.options());             // (T)
      x = wte_->forward(input) + wpe_->forward(pos);                     // (B, T, C)
    }
    for (const auto& b : blocks_) x = b->forward(x);
    if (!part_.has_head) return x;
    x = ln_f_->forward(x);
    return head_ ? head_->forward(x) : at::linear(x, wte_->weight);     // (B, T, V)
  }
  bool predicts_every_position() const override { return true; }
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
  double take_comm_seconds() override { return tp_.take_comm_seconds(); }

 private:
  ModelPart part_;
  TpGroup tp_;  // before the blocks: they keep a pointer to it
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

}  // namespace

at::Tensor LanguageModel::loss(const at::Tensor& input, const at::Tensor& targets) {
  if (!has_head()) throw RunError("loss() needs the model part with the head (the last pipeline stage)");
  auto logits = forward(input);
  return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
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
