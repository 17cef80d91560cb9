// Models built from named layers. Parameter names are stable and hierarchical
// ("wte.weight", "blocks.0.attn.qkv.weight", ...): checkpoints and future tensor/pipeline
// layouts key on them, so renaming a layer is a format change.
#pragma once
#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config.h"

namespace scaleguard::run {

class LanguageModel : public torch::nn::Module {
 public:
  // idx (B, T) int64 -> logits: (B, T, V) for a model that predicts every position,
  // (B, V) for one that predicts the token after the window.
  virtual at::Tensor forward(const at::Tensor& idx) = 0;
  // Mean cross-entropy. targets: (B, T) or (B) matching forward().
  at::Tensor loss(const at::Tensor& idx, const at::Tensor& targets);
  // True: targets are the inputs shifted by one (GPT); false: the next token only (MLP).
  virtual bool predicts_every_position() const = 0;
};

// Deterministic: the same config and seed give bit-identical parameters on every rank.
std::shared_ptr<LanguageModel> make_model(const Config& cfg);

// Parameters sorted by full name: the order checksums, dumps and checkpoints use.
std::vector<std::pair<std::string, at::Tensor>> sorted_parameters(const torch::nn::Module& m);

}  // namespace scaleguard::run
