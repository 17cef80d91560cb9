// GPU checkpoints (issue 15 item 6): pinned host mirrors of the device buffers an
// asynchronous snapshot saves, copied per buffer on a side stream.
//
// At start-up (Checkpointing::reserve, --ckpt-async on a GPU) every flat parameter bucket
// and every optimizer-state buffer (the storages the snapshot's tensors are views of) gets
// a pinned host mirror (cudaHostAlloc), kept and reused by every later save. A save then:
//   1. records an event on the training stream after the step (start());
//   2. the copy stream waits for it and copies buffer after buffer with cudaMemcpyAsync into
//      its mirror, recording one event per buffer;
//   3. the snapshot holds CPU views of the mirrors (host_view(): same offsets and strides),
//      so nothing is copied on the training thread (before: a pageable .to(kCPU) per tensor
//      that stalled it);
//   4. the writer thread waits on each buffer's event (wait_all()) before writing;
//   5. the optimizer's next update of a buffer first makes the training stream wait for that
//      buffer's copy event (fence(), from TrainHooks::before_update): no host stall.
// The mirrors are not touched again until the save is finished (the next save starts only
// after Saver::finish()), so a pending write always reads one consistent step.
//
// DeviceStaging is the raw, pointer-level part: device_staging_cuda.cpp (cudart only, so
// it compile-checks against a CPU LibTorch; NOT RUN ON A GPU YET) and, for tests on the
// CPU, a host stand-in (SCALEGUARD_TEST_STAGING=host: "device" buffers are the CPU
// tensors, a thread memcpys them, fence() waits on the host) that runs this whole path,
// including the fences, in CPU CI. The CPU checkpoint path (Snapshot's non-temporal copies
// and per-chunk fences) is unchanged and used whenever staging is off.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace scaleguard::run {

class DeviceStaging {
 public:
  virtual ~DeviceStaging() = default;
  virtual const char* kind() const = 0;  // "pinned, CUDA side stream" / "host test stand-in"
  // Start-up: registers a device buffer and allocates its host mirror now; returns its index.
  virtual size_t add(const void* device, size_t bytes) = 0;
  virtual void* host(size_t i) const = 0;
  // Enqueues the copy of every buffer into its mirror after the work queued so far on the
  // training stream; returns without waiting. `step` only feeds test hooks.
  virtual void start(int64_t step) = 0;
  // Before something changes buffer i: the training stream waits for its copy (no host wait
  // on a GPU). Free when no copy of it is in flight.
  virtual void fence(size_t i) = 0;
  // The calling (writer) thread waits until buffer i's copy is in its mirror.
  virtual void wait(size_t i) = 0;
};

#ifdef SCALEGUARD_WITH_NCCL
// Pinned mirrors and a non-blocking copy stream on cuda:`device` (device_staging_cuda.cpp).
std::unique_ptr<DeviceStaging> make_cuda_staging(int device);
#endif
std::unique_ptr<DeviceStaging> make_host_staging();
// The staging for snapshots of tensors on `device`: CUDA staging on a GPU, the host
// stand-in under SCALEGUARD_TEST_STAGING=host, else none (nullptr: the CPU path; also on a
// GPU under SCALEGUARD_TEST_STAGING=off, the old per-tensor copy, to compare). A GPU in a
// build without the CUDA staging is an error.
std::unique_ptr<DeviceStaging> make_device_staging(const at::Device& device);

// The tensor-level side: which buffer a tensor lives in and its view of the mirror.
class StagedBuffers {
 public:
  explicit StagedBuffers(std::unique_ptr<DeviceStaging> raw) : raw_(std::move(raw)) {}
  const char* kind() const { return raw_->kind(); }
  // Start-up: mirrors the whole storage `t` is a view of (once per storage).
  void add_storage_of(const at::Tensor& t);
  uint64_t bytes() const { return bytes_; }
  void start(int64_t step) { raw_->start(step); }
  // A CPU tensor with `device_view`'s shape and strides over the mirror. Its bytes are the
  // snapshot's once wait_all() returned; a view that is not contiguous waits for its
  // buffer's copy here (Snapshot::add copies such a view at once). Throws for a tensor in
  // no registered buffer.
  at::Tensor host_view(const at::Tensor& device_view);
  // TrainHooks::before_update: the update of `live` waits for its buffer's copy.
  void fence(const at::Tensor& live);
  void wait_all();

 private:
  struct Buffer {
    const char* device;
    size_t bytes;
  };
  // Index of the buffer holding [p, p + bytes), or -1.
  long find(const void* p, size_t bytes) const;

  std::unique_ptr<DeviceStaging> raw_;
  std::vector<Buffer> buffers_;
  uint64_t bytes_ = 0;
};

}  // namespace scaleguard::run
