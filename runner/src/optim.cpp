#include "optim.h"

#include <ATen/ATen.h>

#include <cmath>

namespace scaleguard::run {

double lr_at(const Config& cfg, int64_t step) {
  if (step < cfg.warmup) return cfg.lr * static_cast<double>(step + 1) / static_cast<double>(cfg.warmup);
  int64_t decay_steps = cfg.steps - cfg.warmup;
  double progress = decay_steps <= 1 ? 1.0 : static_cast<double>(step - cfg.warmup) / static_cast<double>(decay_steps - 1);
  double min_lr = cfg.lr * cfg.min_lr_ratio;
  return min_lr + 0.5 * (cfg.lr - min_lr) * (1.0 + std::cos(M_PI * std::min(1.0, progress)));
}

double clip_grad_norm(FlatLayout& layout, double max_norm) {
  // Per parameter, not per bucket: the norm (and so the clipped gradients) must not
  // depend on how parameters are grouped into buckets.
  double sq = 0;
  for (const auto& p : layout.params()) {
    double n = p.param.grad().norm().item<double>();
    sq += n * n;
  }
  double norm = std::sqrt(sq);
  if (max_norm > 0 && norm > max_norm) {
    double scale = max_norm / (norm + 1e-6);
    for (const auto& b : layout.buckets()) b.grads.mul_(scale);
  }
  return norm;
}

AdamW::AdamW(FlatLayout& layout, const Config& cfg)
    : layout_(layout), beta1_(cfg.beta1), beta2_(cfg.beta2), eps_(cfg.eps), weight_decay_(cfg.weight_decay) {
  for (const auto& b : layout_.buckets()) {
    exp_avg_.push_back(at::zeros_like(b.params));
    exp_avg_sq_.push_back(at::zeros_like(b.params));
    scratch_.push_back(at::empty_like(b.params));
  }
}

void AdamW::step(double lr) {
  ++step_;
  at::NoGradGuard no_grad;
  double bc1 = 1.0 - std::pow(beta1_, static_cast<double>(step_));
  double bc2 = 1.0 - std::pow(beta2_, static_cast<double>(step_));
  if (weight_decay_ > 0)
    for (const auto& p : layout_.params())
      if (p.decay) p.param.mul_(1.0 - lr * weight_decay_);  // decoupled decay, before the update
  const auto& buckets = layout_.buckets();
  for (size_t b = 0; b < buckets.size(); ++b) {
    const at::Tensor& g = buckets[b].grads;
    exp_avg_[b].mul_(beta1_).add_(g, 1.0 - beta1_);                 // m = b1 m + (1-b1) g
    exp_avg_sq_[b].mul_(beta2_).addcmul_(g, g, 1.0 - beta2_);        // v = b2 v + (1-b2) g^2
    at::sqrt_out(scratch_[b], exp_avg_sq_[b]);
    scratch_[b].div_(std::sqrt(bc2)).add_(eps_);                     // sqrt(v / bc2) + eps
    buckets[b].params.addcdiv_(exp_avg_[b], scratch_[b], -lr / bc1);  // p -= lr m / bc1 / denom
  }
}

std::vector<OptimTensor> AdamW::named_state() const {
  std::vector<OptimTensor> out;
  for (const auto& p : layout_.params()) {
    auto shape = p.param.sizes();
    out.push_back({p.name, "exp_avg", exp_avg_[p.bucket].narrow(0, p.offset, p.numel).view(shape)});
    out.push_back({p.name, "exp_avg_sq", exp_avg_sq_[p.bucket].narrow(0, p.offset, p.numel).view(shape)});
  }
  return out;
}

}  // namespace scaleguard::run
