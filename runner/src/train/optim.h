// AdamW on flat buckets (or, under ZeRO-1, on this rank's shard of each bucket) and
// global-norm clipping (the learning-rate schedule: lr_schedule.h).
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "config/config.h"
#include "parallel/data_parallel.h"
#include "train/lr_schedule.h"

namespace scaleguard::run {

// Scales the gradients so their global L2 norm is at most max_norm (when > 0); returns
// the norm before clipping. Sums each parameter's squared norm where FlatParam::in_norm
// (every gradient once), over this rank's shards, then over the layout's shard group and
// the groups in `sum_over` (tensor- and pipeline-parallel). Data parallel without ZeRO:
// every rank holds the full, summed gradients.
double clip_grad_norm(FlatLayout& layout, double max_norm, const std::vector<Communicator*>& sum_over = {});

struct OptimTensor {
  std::string param;   // parameter name
  std::string kind;    // "exp_avg" | "exp_avg_sq"
  at::Tensor tensor;   // view into the flat state: shaped like the (local) parameter, or
                       // under ZeRO-1 the 1-D part of it in this rank's shard
  int64_t offset = 0;  // element offset of `tensor` in the flattened local parameter
};

// PyTorch's AdamW (decoupled weight decay, bias correction), with decay on matrices and
// embeddings only (nanoGPT). State lives in flat buffers shaped like the buckets' shards
// (whole buckets without ZeRO). With a sharded layout, step() updates the shard from the
// reduce-scattered gradients and all-gathers the parameters over the shard group.
// Called with each tensor step() is about to change (a bucket's parameters, its moments),
// before changing it: an asynchronous checkpoint's per-tensor fence.
using BeforeWrite = std::function<void(const at::Tensor&)>;

class AdamW {
 public:
  AdamW(FlatLayout& layout, const Config& cfg);
  // Bucket by bucket: before_write on the bucket's tensors, then decay and the update.
  void step(double lr, const BeforeWrite& before_write = {});
  int64_t steps_taken() const { return step_; }  // the per-parameter "step" of every tensor
  void set_steps_taken(int64_t s) { step_ = s; }
  // Top-k compression with momentum correction keeps the momentum before selection
  // (compress.h): the exchanged gradient is already a velocity, so beta1 becomes 0.
  void set_beta1(double b) { beta1_ = b; }
  // exp_avg and exp_avg_sq of every parameter (piece) this rank holds, in parameter-name
  // order: what a checkpoint saves and loads (in place).
  std::vector<OptimTensor> named_state() const;
  // Bytes of optimizer state on this rank (exp_avg + exp_avg_sq): 1/dp of the whole under ZeRO-1.
  int64_t state_bytes() const;

 private:
  FlatLayout& layout_;
  double beta1_, beta2_, eps_, weight_decay_;
  int64_t step_ = 0;
  std::vector<at::Tensor> exp_avg_, exp_avg_sq_, scratch_;  // per bucket shard
  // ZeRO-1's parameter all-gather is timed on step_timer() as Timed::kComm.
};

}  // namespace scaleguard::run
