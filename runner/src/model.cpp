// MLP and GPT-style decoder, nanoGPT-shaped. B batch, T context, C width, H heads,
// D = C / H head width, V vocabulary.
#include "model.h"

#include <torch/nn/init.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>

namespace scaleguard::run {
namespace {

namespace nn = torch::nn;

class CausalSelfAttention : public nn::Module {
 public:
  CausalSelfAttention(int64_t C, int64_t H, int64_t T) : n_head_(H) {
    qkv_ = register_module("qkv", nn::Linear(C, 3 * C));
    proj_ = register_module("proj", nn::Linear(C, C));
    // (T, T) true above the diagonal: positions a token may not attend to.
    mask_ = register_buffer("mask", at::ones({T, T}, at::kBool).triu(1));
  }
  at::Tensor forward(const at::Tensor& x) {  // x (B, T, C)
    int64_t B = x.size(0), T = x.size(1), C = x.size(2), D = C / n_head_;
    auto qkv = qkv_->forward(x).chunk(3, /*dim=*/2);                   // 3 x (B, T, C)
    auto q = qkv[0].view({B, T, n_head_, D}).transpose(1, 2);           // (B, H, T, D)
    auto k = qkv[1].view({B, T, n_head_, D}).transpose(1, 2);
    auto v = qkv[2].view({B, T, n_head_, D}).transpose(1, 2);
    auto att = at::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(D)));  // (B, H, T, T)
    att = att.masked_fill(mask_.slice(0, 0, T).slice(1, 0, T), -INFINITY).softmax(-1);
    auto y = at::matmul(att, v);                                       // (B, H, T, D)
    y = y.transpose(1, 2).contiguous().view({B, T, C});                // (B, T, C)
    return proj_->forward(y);
  }
  nn::Linear proj_{nullptr};

 private:
  int64_t n_head_;
  nn::Linear qkv_{nullptr};
  at::Tensor mask_;
};

class Mlp : public nn::Module {
 public:
  explicit Mlp(int64_t C) {
    fc_ = register_module("fc", nn::Linear(C, 4 * C));
    proj_ = register_module("proj", nn::Linear(4 * C, C));
  }
  at::Tensor forward(const at::Tensor& x) { return proj_->forward(at::gelu(fc_->forward(x))); }  // (B, T, C)
  nn::Linear proj_{nullptr};

 private:
  nn::Linear fc_{nullptr};
};

class Block : public nn::Module {
 public:
  Block(int64_t C, int64_t H, int64_t T) {
    ln1_ = register_module("ln1", nn::LayerNorm(nn::LayerNormOptions({C})));
    attn = register_module("attn", std::make_shared<CausalSelfAttention>(C, H, T));
    ln2_ = register_module("ln2", nn::LayerNorm(nn::LayerNormOptions({C})));
    mlp = register_module("mlp", std::make_shared<Mlp>(C));
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
  explicit Gpt(const Config& c) {
    wte_ = register_module("wte", nn::Embedding(c.vocab_size, c.n_embd));
    wpe_ = register_module("wpe", nn::Embedding(c.seq_len, c.n_embd));
    blocks_ = register_module("blocks", nn::ModuleList());
    for (int64_t i = 0; i < c.n_layer; ++i) blocks_->push_back(std::make_shared<Block>(c.n_embd, c.n_head, c.seq_len));
    ln_f_ = register_module("ln_f", nn::LayerNorm(nn::LayerNormOptions({c.n_embd})));
    if (c.untied_head) head_ = register_module("head", nn::Linear(nn::LinearOptions(c.n_embd, c.vocab_size).bias(false)));
    // nanoGPT's init: N(0, 0.02), residual projections scaled by 1/sqrt(2 * n_layer).
    torch::NoGradGuard no_grad;
    for (auto& p : named_parameters()) {
      const std::string& name = p.key();
      if (p.value().dim() < 2) continue;  // biases stay 0, layer norms 1/0
      double std = 0.02;
      if (name.size() > 12 && name.compare(name.size() - 12, 12, ".proj.weight") == 0)
        std /= std::sqrt(2.0 * static_cast<double>(c.n_layer));
      nn::init::normal_(p.value(), 0.0, std);
    }
    for (auto& p : named_parameters())
      if (p.value().dim() == 1 && p.key().find("ln") == std::string::npos) nn::init::zeros_(p.value());
  }
  at::Tensor forward(const at::Tensor& idx) override {  // idx (B, T)
    int64_t T = idx.size(1);
    auto pos = at::arange(T, idx.options());                          // (T)
    auto x = wte_->forward(idx) + wpe_->forward(pos);                  // (B, T, C)
    for (const auto& m : *blocks_) x = m->as<Block>()->forward(x);
    x = ln_f_->forward(x);
    return head_ ? head_->forward(x) : at::linear(x, wte_->weight);   // (B, T, V)
  }
  bool predicts_every_position() const override { return true; }

 private:
  nn::Embedding wte_{nullptr}, wpe_{nullptr};
  nn::ModuleList blocks_{nullptr};
  nn::LayerNorm ln_f_{nullptr};
  nn::Linear head_{nullptr};
};

// Bengio-style MLP language model: the window's embeddings, concatenated, predict the
// next token.
class MlpModel : public LanguageModel {
 public:
  explicit MlpModel(const Config& c) {
    wte_ = register_module("wte", nn::Embedding(c.vocab_size, c.n_embd));
    fc_ = register_module("fc", nn::Linear(c.seq_len * c.n_embd, c.hidden));
    proj_ = register_module("proj", nn::Linear(c.hidden, c.vocab_size));
    torch::NoGradGuard no_grad;
    for (auto& p : named_parameters()) {
      if (p.value().dim() < 2) nn::init::zeros_(p.value());
      else nn::init::normal_(p.value(), 0.0, 0.02);
    }
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

at::Tensor LanguageModel::loss(const at::Tensor& idx, const at::Tensor& targets) {
  auto logits = forward(idx);
  return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
}

std::shared_ptr<LanguageModel> make_model(const Config& cfg) {
  torch::manual_seed(cfg.seed);
  if (cfg.model == "gpt") return std::make_shared<Gpt>(cfg);
  return std::make_shared<MlpModel>(cfg);
}

std::vector<std::pair<std::string, at::Tensor>> sorted_parameters(const torch::nn::Module& m) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& p : m.named_parameters()) out.emplace_back(p.key(), p.value());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

}  // namespace scaleguard::run
