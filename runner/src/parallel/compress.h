// Top-k gradient compression for data parallel (--compress topk:RATIO): Deep Gradient
// Compression (Lin et al., ICLR 2018), not the naive "send the k largest and drop the rest".
//
// Per rank and step, after backward (g: this rank's gradient, pre-divided by A x dp):
//   local clipping   g *= min(1, grad_clip / sqrt(dp) / |g|)     (DGC 3.3; no global clip after)
//   momentum corr.   u = m u + g;  v = v + u                        (m = --compress-momentum;
//                    m = 0: v = v + g, plain residual accumulation / error feedback)
//   selection        per parameter, the k = ceil(density x numel) entries of largest |v|
//   exchange         each rank's K = sum k (value, index) pairs in one fixed-size all-gather
//   residual         v[sent] = 0, u[sent] = 0 (momentum factor masking); the rest of v stays
//                    and is added to next step's: nothing is ever dropped
//   aggregate        grads = 0; grads[idx] += value for every rank in rank order (the same
//                    sum on every rank, bit for bit)
// With momentum correction the momentum lives here, so AdamW runs with beta1 = 0 (its first
// moment is the exchanged velocity; its second moment and the update are unchanged).
// Warm-up: density(step) = ratio^((step + 1) / W) for step < W, then ratio: it decays
// exponentially from nearly dense to the ratio over the first W = --compress-warmup steps.
//
// Bytes on the wire (what `comm_bytes` reports; ring algorithms, per rank and step):
//   dense all-reduce   2 (p-1)/p x N x 4
//   top-k all-gather   (p-1) x K x (4 value + 4 index)
#pragma once
#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

#include "comm/comm.h"
#include "config/config.h"
#include "parallel/data_parallel.h"

namespace scaleguard::run {

// "none" -> 0; "topk:0.01" -> 0.01. Throws RunError for anything else.
double parse_compress(const std::string& spec);

// Bytes one rank sends per step for the data-parallel gradient exchange of n elements over
// p ranks: the dense ring all-reduce, and a top-k all-gather of k pairs per rank.
int64_t dense_allreduce_bytes(int64_t n, int p);
int64_t topk_allgather_bytes(int64_t k, int p);

class TopKCompressor {
 public:
  TopKCompressor(FlatLayout& layout, Communicator& group, const Config& cfg);
  double density_at(int64_t step) const;
  // After the step's last backward: the buckets hold this rank's gradients; on return they
  // hold the aggregated sparse gradient (the same on every rank).
  void exchange(int64_t step);
  int64_t last_bytes() const { return last_bytes_; }              // top-k all-gather, this rank
  int64_t dense_bytes() const { return dense_bytes_; }            // the dense all-reduce it replaces
  int64_t last_k() const { return last_k_; }
  bool momentum_correction() const { return momentum_ > 0; }
  // Per-rank state in parameter-name order, concatenated (layout-independent): the residual
  // v and, with momentum correction, the velocity u. What a checkpoint saves.
  at::Tensor flat_state(const std::string& kind) const;           // "residual" | "velocity"
  void set_flat_state(const std::string& kind, const at::Tensor& flat);
  int64_t numel() const { return numel_; }

 private:
  FlatLayout& layout_;
  Communicator& group_;
  double ratio_, momentum_, clip_;
  int64_t warmup_;
  int64_t numel_ = 0;
  std::vector<at::Tensor> residual_, velocity_;  // per bucket, shaped like Bucket::grads
  std::vector<std::vector<size_t>> by_bucket_;   // per bucket, its parameters (indices into params())
  at::Tensor send_, recv_;                        // packed (2K) floats: K values, K int32 indices
  bool drop_residual_ = false;  // SCALEGUARD_TOPK_DROP_RESIDUAL=1 (diagnostic)
  int64_t last_bytes_ = 0, dense_bytes_ = 0, last_k_ = 0;
};

}  // namespace scaleguard::run
