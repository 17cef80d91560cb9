// Pinned host mirrors and a side copy stream for GPU checkpoints (device_staging.h). Uses
// only the CUDA runtime (and c10_cuda's current stream with a CUDA LibTorch), so it
// compile-checks against a CPU LibTorch like comm_nccl.cpp (target
// scaleguard_comm_nccl_check). NOT RUN ON A GPU YET.
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "config/config.h"
#include "timing/cuda_training_stream.h"
#include "checkpoint/device_staging.h"

namespace scaleguard::run {
namespace {

void check(cudaError_t r, const char* what) {
  if (r != cudaSuccess) throw RunError(std::string("checkpoint staging: CUDA: ") + what + ": " + cudaGetErrorString(r));
}

class CudaStaging final : public DeviceStaging {
 public:
  explicit CudaStaging(int device) : device_(device) {
    check(cudaSetDevice(device_), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    check(cudaEventCreateWithFlags(&after_step_, cudaEventDisableTiming), "cudaEventCreate");
  }
  ~CudaStaging() override {
    cudaSetDevice(device_);
    if (stream_) cudaStreamSynchronize(stream_);  // no copy may land in freed memory
    for (Buffer& b : buffers_) {
      if (b.copied) cudaEventDestroy(b.copied);
      if (b.host) cudaFreeHost(b.host);
    }
    if (after_step_) cudaEventDestroy(after_step_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  const char* kind() const override { return "pinned (cudaHostAlloc), copied per buffer on a CUDA side stream"; }

  size_t add(const void* device, size_t bytes) override {
    check(cudaSetDevice(device_), "cudaSetDevice");
    Buffer b;
    b.device = device;
    b.bytes = bytes;
    // Portable: the writer thread reads it whatever its current device; page-locked at
    // start-up, so no save pays for pinning or page faults.
    check(cudaHostAlloc(&b.host, bytes, cudaHostAllocPortable), "cudaHostAlloc of the checkpoint mirror");
    check(cudaEventCreateWithFlags(&b.copied, cudaEventDisableTiming), "cudaEventCreate");
    buffers_.push_back(b);
    return buffers_.size() - 1;
  }
  void* host(size_t i) const override { return buffers_[i].host; }

  void start(int64_t /*step*/) override {
    check(cudaSetDevice(device_), "cudaSetDevice");
    // The step's kernels (the optimizer update last) come before the copies.
    check(cudaEventRecord(after_step_, cuda_training_stream(device_)), "cudaEventRecord");
    check(cudaStreamWaitEvent(stream_, after_step_, 0), "cudaStreamWaitEvent");
    for (Buffer& b : buffers_) {
      check(cudaMemcpyAsync(b.host, b.device, b.bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync");
      check(cudaEventRecord(b.copied, stream_), "cudaEventRecord");
      b.in_flight = true;
    }
  }
  void fence(size_t i) override {
    Buffer& b = buffers_[i];
    if (!b.in_flight) return;
    // The update of this buffer (on the training stream) starts after its copy; the host
    // goes on at once.
    check(cudaStreamWaitEvent(cuda_training_stream(device_), b.copied, 0), "cudaStreamWaitEvent");
    b.in_flight = false;
  }
  void wait(size_t i) override {
    check(cudaSetDevice(device_), "cudaSetDevice");  // the writer thread's device
    check(cudaEventSynchronize(buffers_[i].copied), "cudaEventSynchronize");
  }

 private:
  struct Buffer {
    const void* device = nullptr;
    size_t bytes = 0;
    void* host = nullptr;
    cudaEvent_t copied = nullptr;  // recorded on stream_ after this buffer's copy
    bool in_flight = false;        // a copy the training stream has not fenced yet
  };
  int device_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t after_step_ = nullptr;
  std::vector<Buffer> buffers_;
};

}  // namespace

std::unique_ptr<DeviceStaging> make_cuda_staging(int device) { return std::make_unique<CudaStaging>(device); }

}  // namespace scaleguard::run
