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
//
// ZeRO stage 2: as stage 1, and each bucket's full gradient storage is freed once its
// reduce-scatter finished (allocated again, zeroed, at the next step's zero_grad): only the
// shard's summed gradient (grad_shard) outlives the backward.
// ZeRO stage 3: the parameters are sharded too. Buckets are one per GPT block ("blocks.N.":
// FSDP's flat parameter per block) plus the others (embeddings, final norm, head) bucketed
// by size. Each rank keeps only `shard_params` of every bucket; the full bucket's storage
// exists only while gathered (ZeroThree: a block's bucket around its forward and again
// around its backward, the other buckets for the whole step). The parameter and .grad
// views keep pointing into the bucket's storage, whose memory is released (nbytes 0) and
// allocated again in place, so autograd, the hooks and the model never see the difference.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "models/model.h"
#include "models/tensor_parallel.h"

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
  // (n) float, n a multiple of the shard count (zero padding at the end). ZeRO-3: its
  // storage is allocated only while gathered (FlatLayout::gathered).
  at::Tensor params;
  at::Tensor grads;   // (n) float; one all-reduce (or reduce-scatter) message
  int64_t shard_offset = 0, shard_numel = 0;  // this rank's shard [offset, offset + numel)
  // (shard_numel) summed gradients of the shard: a view of `grads` when not sharded,
  // the reduce-scatter's output otherwise.
  at::Tensor grad_shard;
  int64_t block = -1;       // ZeRO-3: the GPT block whose parameters this bucket holds, -1 other
  at::Tensor shard_params;  // ZeRO-3: this rank's shard of the parameters (the only persistent copy)
  // The parameters of this rank's shard: what the optimizer updates.
  at::Tensor param_shard() const { return shard_params.defined() ? shard_params : params.narrow(0, shard_offset, shard_numel); }
};

// A 1-D view of this rank's part of parameter `param` (index into FlatLayout::params()):
// elements [offset, offset + tensor.numel()) of the flattened (local) parameter.
struct ParamShard {
  size_t param = 0;
  at::Tensor tensor;
  int64_t offset = 0;
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
  // bucket_bytes 0: one bucket per parameter (unbucketed). shard_group: ZeRO shards over
  // it (the data-parallel group); nullptr = every rank updates everything. stage: the ZeRO
  // stage (1, 2, 3) when shard_group is set.
  FlatLayout(LanguageModel& model, int64_t bucket_bytes, Communicator* shard_group = nullptr, int stage = 1);
  // The optimizer's zero_grad cannot touch views: zero the buckets. ZeRO-2/3: allocates the
  // freed gradient buckets again, zeroed (ZeRO-3: not the blocks', ZeroThree does those).
  void zero_grad();
  int stage() const { return stage_; }
  // Stage >= 2 (resp. 3) over more than one rank: full gradients (parameters) freed after use.
  bool grads_sharded() const { return stage_ >= 2 && sharding(); }
  bool params_sharded() const { return stage_ >= 3 && sharding(); }
  // Storage of a bucket's full gradients / parameters: present or not, allocate, free.
  bool grads_present(size_t b) const;
  void ensure_grads(size_t b);  // allocated and zeroed if it was freed
  void release_grads(size_t b);
  bool gathered(size_t b) const;
  // ZeRO-3: allocates the bucket's full parameters and all-gathers the shards into them.
  std::unique_ptr<Work> gather(size_t b);
  void release_params(size_t b);
  // Bytes held now: full parameter and gradient buckets (as allocated) plus the shards.
  int64_t param_bytes() const;
  int64_t grad_bytes() const;
  // ZeRO-3: every parameter piece of this rank's shards (what checkpoints save and load).
  std::vector<ParamShard> param_shards() const;
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
  int stage_ = 0;
  std::vector<ShardPiece> pieces_;
  bool sharding() const { return shard_group_ && shard_group_->size() > 1; }
};

// ZeRO-3's gathers and frees around the model's blocks (BlockHooks) and the step. Forward:
// block i is gathered (or its prefetch awaited), block i+1's all-gather is issued
// (non-blocking) before block i computes, and block i is freed after it. Backward: the same
// in reverse (block i-1 prefetched); block i's parameters are freed by DataParallel once
// all its gradients accumulated, its full gradients once their reduce-scatter finished.
// The other buckets are gathered in begin_step() and freed in end_step() (after the
// optimizer). Collectives go over the layout's shard group in the same order on every rank.
class ZeroThree : public BlockHooks {
 public:
  explicit ZeroThree(FlatLayout& layout);
  ~ZeroThree() override;
  void begin_step();  // after zero_grad: the non-block buckets gathered, their gradients allocated
  void end_step();    // after the optimizer: every gathered bucket freed
  void gather_all();  // every bucket gathered (checksums, dumps); end_step() frees them
  void gather_unblocked();  // a forward without backward (evaluation): begin_step's gathers, no gradients
  void before_forward(int64_t block) override;
  void after_forward(int64_t block) override;
  void before_backward(int64_t block) override;

 private:
  void ready(size_t b);         // gathered and finished
  void prefetch(int64_t block);  // issue the block's all-gather if it exists and is not gathered
  FlatLayout& layout_;
  std::vector<int64_t> bucket_of_block_;  // by block - first_block_; -1 none
  int64_t first_block_ = 0;
  std::vector<std::unique_ptr<Work>> inflight_;  // per bucket
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
  std::vector<int> bw_pending_;         // ZeRO-3, per bucket: this backward's gradients not yet accumulated
  void finished(size_t b);              // bucket b's collective finished: ZeRO-2/3 free its full gradients
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
