#include "train/optim.h"

#include <ATen/ATen.h>

#include <cmath>
#include <memory>

#include "timing/step_timer.h"

namespace scaleguard::run {
namespace {

// The elements of `shard_tensor` (a bucket shard) that belong to piece `pc`.
at::Tensor piece_of(const at::Tensor& shard_tensor, const ShardPiece& pc) {
  return shard_tensor.narrow(0, pc.shard_offset, pc.numel);
}

}  // namespace

double clip_grad_norm(FlatLayout& layout, double max_norm, const std::vector<Communicator*>& sum_over) {
  // Per parameter (piece), not per bucket: the norm (and so the clipped gradients) must
  // not depend on how parameters are grouped into buckets. Everything stays on the
  // training device: the pieces' norms are stacked and squared into one sum there, that
  // one tensor is all-reduced over each group, and the host reads it back once (issue 15:
  // no host scalar handed to NCCL, no .item() per parameter).
  const at::Tensor& any = layout.buckets().front().grad_shard;
  std::vector<at::Tensor> norms;
  for (const ShardPiece& pc : layout.shard_pieces()) {
    const FlatParam& p = layout.params()[pc.param];
    if (!p.in_norm) continue;
    norms.push_back(piece_of(layout.buckets()[p.bucket].grad_shard, pc).norm());
  }
  // Squares summed in double like the host loop before, on the device.
  at::Tensor sq = norms.empty() ? at::zeros({1}, any.options().dtype(at::kDouble))
                                : at::stack(norms).to(at::kDouble).square().sum().reshape({1});
  std::vector<Communicator*> groups;
  for (Communicator* g : sum_over)
    if (g && g->size() > 1) groups.push_back(g);
  if (layout.shard_group() && layout.shard_group()->size() > 1) groups.push_back(layout.shard_group());
  if (!groups.empty()) {
    // Between ranks in the gradients' dtype: the dtype every communicator takes.
    at::Tensor t = sq.to(any.scalar_type());
    for (Communicator* g : groups) g->all_reduce(t, ReduceOp::kSum)->wait();
    sq = t;
  }
  double norm = std::sqrt(sq.item<double>());  // the one read-back
  if (max_norm > 0 && norm > max_norm) {
    double scale = max_norm / (norm + 1e-6);
    for (const auto& b : layout.buckets()) b.grad_shard.mul_(scale);
  }
  return norm;
}

AdamW::AdamW(FlatLayout& layout, const Config& cfg)
    : layout_(layout), beta1_(cfg.beta1), beta2_(cfg.beta2), eps_(cfg.eps), weight_decay_(cfg.weight_decay) {
  for (const auto& b : layout_.buckets()) {
    exp_avg_.push_back(at::zeros_like(b.grad_shard));
    exp_avg_sq_.push_back(at::zeros_like(b.grad_shard));
    scratch_.push_back(at::empty_like(b.grad_shard));
  }
}

void AdamW::step(double lr, const BeforeWrite& before_write) {
  ++step_;
  at::NoGradGuard no_grad;
  double bc1 = 1.0 - std::pow(beta1_, static_cast<double>(step_));
  double bc2 = 1.0 - std::pow(beta2_, static_cast<double>(step_));
  const auto& buckets = layout_.buckets();
  for (size_t b = 0; b < buckets.size(); ++b) {
    if (before_write) {
      // Whole bucket: ZeRO-1's all-gather writes all of it; ZeRO-3 changes only the shard.
      before_write(layout_.params_sharded() ? buckets[b].shard_params : buckets[b].params);
      before_write(exp_avg_[b]);
      before_write(exp_avg_sq_[b]);
    }
    if (weight_decay_ > 0)
      for (const ShardPiece& pc : layout_.shard_pieces()) {
        const FlatParam& p = layout_.params()[pc.param];
        if (p.bucket == b && p.decay) piece_of(buckets[b].param_shard(), pc).mul_(1.0 - lr * weight_decay_);  // decoupled, first
      }
    const at::Tensor& g = buckets[b].grad_shard;
    at::Tensor p = buckets[b].param_shard();
    exp_avg_[b].mul_(beta1_).add_(g, 1.0 - beta1_);                 // m = b1 m + (1-b1) g
    exp_avg_sq_[b].mul_(beta2_).addcmul_(g, g, 1.0 - beta2_);        // v = b2 v + (1-b2) g^2
    at::sqrt_out(scratch_[b], exp_avg_sq_[b]);
    scratch_[b].div_(std::sqrt(bc2)).add_(eps_);                     // sqrt(v / bc2) + eps
    p.addcdiv_(exp_avg_[b], scratch_[b], -lr / bc1);                 // p -= lr m / bc1 / denom
  }
  Communicator* group = layout_.shard_group();
  // ZeRO-3: the shards are the parameters; the next forward gathers them block by block.
  if (!group || group->size() == 1 || layout_.params_sharded()) return;
  // ZeRO-1: every rank updated its shard; gather the whole buckets. The send buffer may not
  // alias the receive buffer, so the shard goes through the (now free) scratch.
  TimedInterval timed(Timed::kComm);
  std::vector<std::unique_ptr<Work>> work;
  for (size_t b = 0; b < buckets.size(); ++b) {
    scratch_[b].copy_(buckets[b].param_shard());
    work.push_back(group->all_gather(scratch_[b], buckets[b].params));
  }
  for (auto& w : work) w->wait();
}

std::vector<OptimTensor> AdamW::named_state() const {
  std::vector<OptimTensor> out;
  const bool sharded = layout_.shard_group() != nullptr;
  for (const ShardPiece& pc : layout_.shard_pieces()) {
    const FlatParam& p = layout_.params()[pc.param];
    at::Tensor m = piece_of(exp_avg_[p.bucket], pc), v = piece_of(exp_avg_sq_[p.bucket], pc);
    if (!sharded) m = m.view(p.param.sizes()), v = v.view(p.param.sizes());
    out.push_back({p.name, "exp_avg", m, pc.param_offset});
    out.push_back({p.name, "exp_avg_sq", v, pc.param_offset});
  }
  return out;
}

int64_t AdamW::state_bytes() const {
  int64_t n = 0;
  for (size_t b = 0; b < exp_avg_.size(); ++b)
    n += (exp_avg_[b].numel() + exp_avg_sq_[b].numel()) * static_cast<int64_t>(exp_avg_[b].element_size());
  return n;
}

}  // namespace scaleguard::run
