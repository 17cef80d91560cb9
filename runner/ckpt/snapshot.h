// What one rank saves at one step: named tensor slices, rank-local state (RNG bytes) and
// scalars (step, epoch, sampler position, LR schedule, Adam's step...). Taken on the main
// thread at a step boundary; for an asynchronous save it owns host copies of the tensors,
// so training may change the originals while a background thread writes.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace scaleguard::ckpt {

struct SnapshotTensor {
  std::string name;                   // "params/blocks.0.attn.qkv.weight", '/' separates groups
  at::Tensor data;                    // contiguous, on the CPU
  bool rank_scoped = false;           // true: this rank's own state, no global meaning
  std::vector<int64_t> global_shape;
  std::vector<int64_t> offset;        // where data sits in the global tensor
  bool owned = false;                 // data is this snapshot's own copy
};

// An HDF5 attribute: group "state" key "epoch", or group "optim/w" key "step".
struct SnapshotScalar {
  std::string group;
  std::string key;
  std::variant<int64_t, double> value;
};

class Snapshot {
 public:
  // copy=true takes host copies now; false keeps references, valid only while the caller
  // leaves the tensors alone (a synchronous save, or an async save until
  // Saver::wait_snapshot() returns).
  Snapshot(int64_t step, bool copy) : step_(step), copy_(copy) {}

  // A box of a global tensor: data is the slice at `offset` of a tensor of `global_shape`.
  void add_slice(const std::string& name, const at::Tensor& data, std::vector<int64_t> global_shape,
                 std::vector<int64_t> offset);
  // This rank holds the whole tensor.
  void add_whole(const std::string& name, const at::Tensor& data);
  // This rank's own state, e.g. "state/rng/cpu" = the generator's state bytes.
  void add_rank_state(const std::string& name, const at::Tensor& data);
  void set_scalar(const std::string& group, const std::string& key, int64_t value);
  void set_scalar(const std::string& group, const std::string& key, double value);

  // Host copies of the referenced tensors, for an asynchronous save, in three parts.
  // plan_copies() (one thread, first) picks a host buffer per tensor, reusing buffers of
  // the previous snapshot with the same shape and dtype (no fresh memory to page-fault at
  // every save). copy() may run on several threads at once: each copies the 4 MiB chunks no
  // other thread has claimed, then waits for the others' chunks, so the training thread that
  // waits for the snapshot helps the writer thread instead of idling. copy_overlapping()
  // does the same for the chunks whose source overlaps [begin, begin + bytes): the fence
  // before an optimizer changes one tensor. adopt_copies() (one thread, after copy()
  // returned there) makes the snapshot use its copies.
  void plan_copies(std::vector<at::Tensor>& reuse);
  void copy();
  void copy_overlapping(const void* begin, size_t bytes);
  void adopt_copies();
  // Hands the host copies over for reuse by the next snapshot (none from a staged one).
  std::vector<at::Tensor> release_copies();
  // A staged snapshot (GPU checkpoints, runner/src/checkpoint/device_staging.h): its tensors are views
  // of host buffers that nothing changes until the save is done (pinned mirrors filled by
  // asynchronous device copies), whose bytes are complete once `wait_ready` returned. It
  // takes no host copies of its own; the saver's writer thread calls wait_ready() first.
  void set_staged(std::function<void()> wait_ready);
  void wait_ready() const {
    if (wait_ready_) wait_ready_();
  }
  bool owns_copies() const { return copy_; }

  int64_t step() const { return step_; }
  const std::vector<SnapshotTensor>& tensors() const { return tensors_; }
  const std::vector<SnapshotScalar>& scalars() const { return scalars_; }
  // Bytes of tensor data; for copy=true also the host memory this snapshot holds.
  uint64_t bytes() const { return bytes_; }

 private:
  void add(SnapshotTensor t, const at::Tensor& data);

  int64_t step_;
  bool copy_;
  uint64_t bytes_ = 0;
  std::vector<SnapshotTensor> tensors_;
  std::vector<SnapshotScalar> scalars_;
  struct CopyWork;
  std::shared_ptr<CopyWork> copies_;   // set by plan_copies(); kept until the snapshot dies
  std::function<void()> wait_ready_;   // set for a staged snapshot
};

}  // namespace scaleguard::ckpt
