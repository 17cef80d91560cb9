#include "compress.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "step_timer.h"

namespace scaleguard::run {

double parse_compress(const std::string& spec) {
  if (spec == "none" || spec.empty()) return 0;
  const std::string prefix = "topk:";
  if (spec.compare(0, prefix.size(), prefix) == 0) {
    const std::string num = spec.substr(prefix.size());
    char* end = nullptr;
    double r = std::strtod(num.c_str(), &end);
    if (!num.empty() && end && *end == '\0' && r > 0 && r <= 1) return r;
    throw RunError("compress: '" + spec + "': the density after topk: must be a number in (0, 1], e.g. topk:0.01");
  }
  throw RunError("compress must be none or topk:RATIO (e.g. topk:0.01 sends 1% of the gradient), not '" + spec + "'");
}

int64_t dense_allreduce_bytes(int64_t n, int p) {
  if (p <= 1) return 0;
  return 2 * (p - 1) * n * 4 / p;
}

int64_t topk_allgather_bytes(int64_t k, int p) {
  if (p <= 1) return 0;
  return static_cast<int64_t>(p - 1) * k * (4 + 4);
}

TopKCompressor::TopKCompressor(FlatLayout& layout, Communicator& group, const Config& cfg)
    : layout_(layout), group_(group), ratio_(parse_compress(cfg.compress)), momentum_(cfg.compress_momentum),
      clip_(cfg.grad_clip > 0 ? cfg.grad_clip / std::sqrt(static_cast<double>(group.size())) : 0),
      warmup_(cfg.compress_warmup >= 0 ? cfg.compress_warmup : cfg.warmup) {
  if (ratio_ <= 0) throw RunError("TopKCompressor without --compress topk:RATIO");
  if (layout_.shard_group()) throw RunError("--compress topk does not combine with ZeRO-1 (--zero 1)");
  for (const auto& b : layout_.buckets()) {
    residual_.push_back(at::zeros_like(b.grads));
    velocity_.push_back(momentum_ > 0 ? at::zeros_like(b.grads) : at::Tensor());
  }
  for (const auto& p : layout_.params()) numel_ += p.numel;
  dense_bytes_ = dense_allreduce_bytes(numel_, group_.size());
  // Diagnostic (tests, bench): the naive top-k of the seed article, which drops what it does
  // not send, to show what the residual is for. Never for training.
  const char* drop = std::getenv("SCALEGUARD_TOPK_DROP_RESIDUAL");
  drop_residual_ = drop && std::string(drop) == "1";
}

double TopKCompressor::density_at(int64_t step) const {
  if (warmup_ <= 0 || step >= warmup_) return ratio_;
  return std::pow(ratio_, static_cast<double>(step + 1) / static_cast<double>(warmup_));
}

void TopKCompressor::exchange(int64_t step) {
  at::NoGradGuard no_grad;
  const auto& buckets = layout_.buckets();
  const auto& params = layout_.params();
  const int p = group_.size();

  // Local gradient clipping (DGC 3.3): this rank's gradient to grad_clip / sqrt(dp), per
  // parameter norms summed in double (bucketing-independent), no host read-back.
  if (clip_ > 0) {
    std::vector<at::Tensor> norms;
    for (const auto& fp : params) norms.push_back(buckets[fp.bucket].grads.narrow(0, fp.offset, fp.numel).norm());
    at::Tensor norm = at::stack(norms).to(at::kDouble).square().sum().sqrt();
    at::Tensor scale = (clip_ / (norm + 1e-6)).clamp_max(1.0).to(buckets.front().grads.scalar_type());
    for (const auto& b : buckets) b.grads.mul_(scale);
  }
  // Momentum correction: accumulate the velocity, and the velocity into the residual.
  for (size_t b = 0; b < buckets.size(); ++b) {
    if (momentum_ > 0) {
      velocity_[b].mul_(momentum_).add_(buckets[b].grads);  // u = m u + g
      residual_[b].add_(velocity_[b]);                     // v = v + u
    } else {
      residual_[b].add_(buckets[b].grads);                 // v = v + g
    }
  }
  // Selection: per parameter the k entries of largest magnitude of v (k the same on every
  // rank, so the all-gather has a fixed size).
  const double density = density_at(step);
  std::vector<int64_t> ks(params.size());
  int64_t K = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    ks[i] = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(density * static_cast<double>(params[i].numel))), 1,
                                params[i].numel);
    K += ks[i];
  }
  const at::TensorOptions opts = buckets.front().grads.options();
  if (!send_.defined() || send_.numel() != 2 * K) {
    send_ = at::empty({2 * K}, opts);
    recv_ = at::empty({2 * K * p}, opts);
  }
  int64_t off = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const FlatParam& fp = params[i];
    const int64_t k = ks[i];
    at::Tensor v = residual_[fp.bucket].narrow(0, fp.offset, fp.numel);
    at::Tensor idx = std::get<1>(v.abs().topk(k, 0, /*largest=*/true, /*sorted=*/false));  // (k) int64
    send_.narrow(0, off, k).copy_(v.index_select(0, idx));
    send_.narrow(0, K + off, k).view(at::kInt).copy_(idx);  // int32 bits in float slots: moved, never added
    if (drop_residual_) v.zero_();                          // diagnostic: the naive top-k
    else v.index_fill_(0, idx, 0);                          // sent: out of the residual
    if (momentum_ > 0) velocity_[fp.bucket].narrow(0, fp.offset, fp.numel).index_fill_(0, idx, 0);  // factor masking
    off += k;
  }
  // Exchange: every rank's pairs to every rank.
  {
    TimedInterval timed(Timed::kComm);  // comm_ms (step_timer.h: CUDA events on a GPU)
    group_.all_gather(send_, recv_)->wait();
  }
  // Aggregate: the sum of every rank's sparse gradient, in rank order.
  for (const auto& b : buckets) b.grads.zero_();
  for (int r = 0; r < p; ++r) {
    at::Tensor block = recv_.narrow(0, r * 2 * K, 2 * K);
    at::Tensor idx_all = block.narrow(0, K, K).view(at::kInt).to(at::kLong);
    int64_t o = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      const FlatParam& fp = params[i];
      buckets[fp.bucket].grads.narrow(0, fp.offset, fp.numel)
          .index_add_(0, idx_all.narrow(0, o, ks[i]), block.narrow(0, o, ks[i]));
      o += ks[i];
    }
  }
  last_k_ = K;
  last_bytes_ = topk_allgather_bytes(K, p);
}

at::Tensor TopKCompressor::flat_state(const std::string& kind) const {
  const bool residual = kind == "residual";
  if (!residual && !(kind == "velocity" && momentum_ > 0)) return {};
  const auto& state = residual ? residual_ : velocity_;
  std::vector<at::Tensor> parts;
  for (const auto& fp : layout_.params()) parts.push_back(state[fp.bucket].narrow(0, fp.offset, fp.numel));
  return at::cat(parts).cpu();
}

void TopKCompressor::set_flat_state(const std::string& kind, const at::Tensor& flat) {
  const bool residual = kind == "residual";
  if (!residual && !(kind == "velocity" && momentum_ > 0)) return;
  if (flat.numel() != numel_)
    throw RunError("top-k " + kind + " of " + std::to_string(flat.numel()) + " elements, but the model has " +
                   std::to_string(numel_));
  auto& state = residual ? residual_ : velocity_;
  at::NoGradGuard no_grad;
  int64_t off = 0;
  for (const auto& fp : layout_.params()) {
    state[fp.bucket].narrow(0, fp.offset, fp.numel).copy_(flat.narrow(0, off, fp.numel));
    off += fp.numel;
  }
}

}  // namespace scaleguard::run
