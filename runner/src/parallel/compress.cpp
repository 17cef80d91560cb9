#include "parallel/compress.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "timing/step_timer.h"

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
  by_bucket_.resize(layout_.buckets().size());
  for (size_t i = 0; i < layout_.params().size(); ++i) {
    const FlatParam& p = layout_.params()[i];
    numel_ += p.numel;
    by_bucket_[p.bucket].push_back(i);
  }
  // Indices travel as int32 and are relative to their bucket.
  for (const auto& b : layout_.buckets())
    if (b.grads.numel() > std::numeric_limits<int32_t>::max())
      throw RunError("--compress topk: a gradient bucket of " + std::to_string(b.grads.numel()) +
                     " elements does not fit int32 indices; use smaller buckets (--bucket-mb)");
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
  // rank, so the all-gather has a fixed size). Slots go bucket by bucket (by_bucket_), so
  // each bucket takes its values out, clears them and later receives every rank's in one
  // indexed op per bucket instead of one per parameter (the small ops were most of top-k's
  // cost on a fast link). The per-element arithmetic is unchanged: each sent element is
  // added once per rank, in rank order.
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
  std::vector<at::Tensor> picked;  // per parameter, in slot order: bucket-relative int64 indices
  picked.reserve(params.size());
  std::vector<int64_t> first_slot(buckets.size() + 1, 0);  // bucket b owns slots [first_slot[b], first_slot[b + 1])
  for (size_t b = 0; b < buckets.size(); ++b) {
    first_slot[b + 1] = first_slot[b];
    for (size_t i : by_bucket_[b]) {
      const FlatParam& fp = params[i];
      at::Tensor v = residual_[b].narrow(0, fp.offset, fp.numel);
      at::Tensor idx = std::get<1>(v.abs().topk(ks[i], 0, /*largest=*/true, /*sorted=*/false));  // (k) int64
      picked.push_back(idx.add_(fp.offset));
      first_slot[b + 1] += ks[i];
    }
  }
  const at::Tensor slots = at::cat(picked);  // (K) int64
  send_.narrow(0, K, K).view(at::kInt).copy_(slots);  // int32 bits in float slots: moved, never added
  for (size_t b = 0; b < buckets.size(); ++b) {
    const int64_t n = first_slot[b + 1] - first_slot[b];
    if (n == 0) continue;
    const at::Tensor idx = slots.narrow(0, first_slot[b], n);
    at::Tensor values = send_.narrow(0, first_slot[b], n);
    at::index_select_out(values, residual_[b], 0, idx);
    if (drop_residual_)  // diagnostic: the naive top-k (what was not sent is lost)
      for (size_t i : by_bucket_[b]) residual_[b].narrow(0, params[i].offset, params[i].numel).zero_();
    else
      residual_[b].index_fill_(0, idx, 0);  // sent: out of the residual
    if (momentum_ > 0) velocity_[b].index_fill_(0, idx, 0);    // factor masking
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
    for (size_t b = 0; b < buckets.size(); ++b) {
      const int64_t n = first_slot[b + 1] - first_slot[b];
      if (n > 0) buckets[b].grads.index_add_(0, idx_all.narrow(0, first_slot[b], n), block.narrow(0, first_slot[b], n));
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
