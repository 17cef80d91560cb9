// AdamW on flat buckets, the learning-rate schedule and global-norm clipping.
#pragma once
#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "config.h"
#include "data_parallel.h"

namespace scaleguard::run {

// Linear warm-up over `warmup` steps to `lr`, then cosine decay to lr * min_lr_ratio at
// the last step.
double lr_at(const Config& cfg, int64_t step);

// Scales the gradients so their global L2 norm is at most max_norm (when > 0); returns
// the norm before clipping. Data parallel: every rank holds the full, summed gradients.
double clip_grad_norm(FlatLayout& layout, double max_norm);

struct OptimTensor {
  std::string param;  // parameter name
  std::string kind;   // "exp_avg" | "exp_avg_sq"
  at::Tensor tensor;  // view into the flat state
};

// PyTorch's AdamW (decoupled weight decay, bias correction), with decay on matrices and
// embeddings only (nanoGPT). State lives in flat buffers shaped like the buckets.
class AdamW {
 public:
  AdamW(FlatLayout& layout, const Config& cfg);
  void step(double lr);
  int64_t steps_taken() const { return step_; }  // the per-parameter "step" of every tensor
  void set_steps_taken(int64_t s) { step_ = s; }
  // exp_avg and exp_avg_sq of every parameter, in parameter-name order: what a
  // checkpoint saves and loads (in place).
  std::vector<OptimTensor> named_state() const;

 private:
  FlatLayout& layout_;
  double beta1_, beta2_, eps_, weight_decay_;
  int64_t step_ = 0;
  std::vector<at::Tensor> exp_avg_, exp_avg_sq_, scratch_;  // per bucket
};

}  // namespace scaleguard::run
