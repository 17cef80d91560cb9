// Flat parameter/gradient buckets and data-parallel gradient synchronisation.
//
// FlatLayout moves every parameter into a few flat buffers ("buckets") and makes both
// the parameter and its .grad views into them: autograd accumulates straight into the
// bucket (no copy before the all-reduce) and the optimizer runs on whole buckets.
// Buckets follow the reverse registration order, roughly the order backward produces
// gradients in, so early buckets are ready early.
//
// DataParallel sums the buckets over the data-parallel group. The trainer pre-divides
// the loss by (micro-batches x dp ranks), so the sum is the average of the global
// batch: the same arithmetic as one rank accumulating the same micro-batches.
//
// ZeRO stage 1: a layout sharded over the data-parallel group pads each bucket to a
// multiple of the group size and gives rank r block r of it (its shard). DataParallel then
// reduce-scatters each bucket (rank r receives the summed gradients of its shard only), the
// optimizer keeps state for the shard only and all-gathers the updated parameters.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <vector>

#include "comm.h"
#include "model.h"
#include "tensor_parallel.h"

namespace torch::autograd { struct Node; }

namespace scaleguard::run {

struct FlatParam {
  std::string name;       // full (global) name, e.g. "blocks.0.attn.qkv.weight"
  at::Tensor param;       // view into Bucket::params: this rank's (local) piece
  size_t bucket = 0;
  int64_t offset = 0;     // element offset inside the bucket
  int64_t numel = 0;      // local elements
  bool decay = false;     // weight decay applies (matrices and embeddings)
  std::vector<int64_t> global_shape;  // the whole parameter over all tensor-parallel ranks
  Slice slice;            // which piece of it `param` is (take_slice(global, slice) == param)
  bool in_norm = true;    // counted by this rank in the global gradient norm (see LanguageModel)
};

struct Bucket {
  at::Tensor params;  // (n) float, n a multiple of the shard count (zero padding at the end)
  at::Tensor grads;   // (n) float; one all-reduce (or reduce-scatter) message
  int64_t shard_offset = 0, shard_numel = 0;  // this rank's shard [offset, offset + numel)
  // (shard_numel) summed gradients of the shard: a view of `grads` when not sharded,
  // the reduce-scatter's output otherwise.
  at::Tensor grad_shard;
  at::Tensor param_shard() const { return params.narrow(0, shard_offset, shard_numel); }
};

// The part of parameter `param` (index into params()) inside its bucket's shard.
struct ShardPiece {
  size_t param = 0;
  int64_t param_offset = 0;  // element offset in the flattened parameter
  int64_t shard_offset = 0;  // element offset in the shard
  int64_t numel = 0;
};

class FlatLayout {
 public:
  // bucket_bytes 0: one bucket per parameter (unbucketed). shard_group: ZeRO-1 shards over
  // it (the data-parallel group); nullptr = every rank updates everything.
  FlatLayout(LanguageModel& model, int64_t bucket_bytes, Communicator* shard_group = nullptr);
  void zero_grad();  // the optimizer's zero_grad cannot touch views: zero the buckets
  const std::vector<Bucket>& buckets() const { return buckets_; }
  // Sorted by name.
  const std::vector<FlatParam>& params() const { return params_; }
  // Index into params() of every parameter in bucket b.
  const std::vector<size_t>& members(size_t b) const { return members_[b]; }
  Communicator* shard_group() const { return shard_group_; }
  // Parameters (or parts of them) in this rank's shards, in params() (name) order; every
  // parameter whole when not sharded.
  const std::vector<ShardPiece>& shard_pieces() const { return pieces_; }

 private:
  std::vector<Bucket> buckets_;
  std::vector<FlatParam> params_;
  std::vector<std::vector<size_t>> members_;
  Communicator* shard_group_;
  std::vector<ShardPiece> pieces_;
};

class DataParallel {
 public:
  // overlap: all-reduce each bucket but the last from an autograd hook as soon as its last
  // gradient is accumulated (non-blocking), the last one in finish(); otherwise all buckets
  // in finish(). finish() uses the blocking all-reduce (Communicator::all_reduce_now).
  DataParallel(FlatLayout& layout, Communicator& group, bool overlap);
  ~DataParallel();
  // Call before each backward; sync = this backward completes the step's gradients.
  void begin_backward(bool sync);
  // Launches what is left and waits for every bucket; grads (sharded: each bucket's
  // grad_shard) are then globally summed.
  void finish();
  // Identical parameters on every rank (rank 0's), before the first step.
  void broadcast_parameters();

 private:
  struct ReadyHook;
  void on_ready(size_t param_index);
  size_t first_blocking() const;  // buckets from this index on: blocking all-reduce in finish()
  void launch_ready_prefix();
  void launch(size_t b);

  FlatLayout& layout_;
  Communicator& group_;
  bool overlap_;
  bool sync_ = false;
  std::vector<int> pending_;            // per bucket: gradients not yet accumulated
  std::vector<size_t> bucket_of_;       // per param
  size_t next_launch_ = 0;              // buckets launch in index order on every rank
  std::vector<std::unique_ptr<Work>> work_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;  // keep hooks alive
  // Communication time (launch, progress, wait) goes to step_timer() as Timed::kComm.
  // SCALEGUARD_DP_BARRIER_BEFORE_COMM=1: a barrier (not timed) starts finish(), so comm_ms
  // leaves out waiting for the slowest rank's backward (rank skew); a benchmark diagnostic.
  bool barrier_before_comm_ = false;
};

}  // namespace scaleguard::run
