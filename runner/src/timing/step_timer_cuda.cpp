// The CUDA step timer (step_timer.h): cudaEvent_t pairs on the training stream, resolved
// once per step with one host synchronisation. Uses only the CUDA runtime (and c10_cuda's
// current stream with a CUDA LibTorch), so it compile-checks against a CPU LibTorch like
// comm_nccl.cpp (target scaleguard_comm_nccl_check). NOT RUN ON A GPU YET.
#include <cuda_runtime.h>

#include <mutex>
#include <string>
#include <vector>

#include "config/config.h"
#include "timing/cuda_training_stream.h"
#include "timing/step_timer.h"

namespace scaleguard::run {
namespace {

class CudaStepTimer final : public StepTimer {
 public:
  explicit CudaStepTimer(int device) : device_(device) {
    if (cudaSetDevice(device_) != cudaSuccess) throw RunError("CUDA step timer: cudaSetDevice failed");
  }
  ~CudaStepTimer() override {
    for (cudaEvent_t e : pool_) cudaEventDestroy(e);
  }
  const char* clock() const override { return "cuda-events"; }

  Mark begin() override {
    std::lock_guard<std::mutex> lock(mu_);
    Mark m;
    m.event = record();
    m.generation = generation_;
    return m;
  }

  void end(const Mark& m, Timed what) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    if (m.generation != generation_ || m.event == kNone) return;  // began before the last resolve()
    const size_t stop = record();
    if (stop != kNone) pending_.push_back({m.event, stop, what});
  }

  StepTimes resolve() override {
    std::lock_guard<std::mutex> lock(mu_);
    StepTimes out;
    if (!error_.empty()) {
      std::string e = error_;
      error_.clear();
      throw RunError("CUDA step timer: " + e);
    }
    if (!pending_.empty()) {
      // The step's one synchronisation: the newest event. Every event went onto a training
      // stream in host order, so with the usual single stream all are complete after it.
      check(cudaEventSynchronize(pool_[used_ - 1]), "cudaEventSynchronize");
      for (const Interval& iv : pending_) {
        float ms = 0;
        cudaError_t r = cudaEventElapsedTime(&ms, pool_[iv.start], pool_[iv.stop]);
        if (r == cudaErrorNotReady) {  // recorded on another stream (a thread that set its own)
          check(cudaEventSynchronize(pool_[iv.stop]), "cudaEventSynchronize");
          r = cudaEventElapsedTime(&ms, pool_[iv.start], pool_[iv.stop]);
        }
        check(r, "cudaEventElapsedTime");
        out.seconds[static_cast<int>(iv.what)] += static_cast<double>(ms) * 1e-3;
      }
    }
    pending_.clear();
    used_ = 0;  // every event is complete: re-record them next step
    ++generation_;
    return out;
  }

 private:
  static constexpr size_t kNone = static_cast<size_t>(-1);
  struct Interval {
    size_t start, stop;
    Timed what;
  };

  static void check(cudaError_t r, const char* what) {
    if (r != cudaSuccess) throw RunError(std::string("CUDA step timer: ") + what + ": " + cudaGetErrorString(r));
  }

  // Records the next pooled event on the calling thread's training stream (mu_ held).
  size_t record() noexcept {
    if (used_ == pool_.size()) {
      cudaEvent_t e = nullptr;
      int current = -1;
      cudaGetDevice(&current);
      if (current != device_) cudaSetDevice(device_);  // events belong to the device they are created on
      cudaError_t r = cudaEventCreate(&e);             // default flags: timing enabled
      if (r != cudaSuccess) {
        note(r, "cudaEventCreate");
        return kNone;
      }
      pool_.push_back(e);
    }
    cudaError_t r = cudaEventRecord(pool_[used_], cuda_training_stream(device_));
    if (r != cudaSuccess) {
      note(r, "cudaEventRecord");
      return kNone;
    }
    return used_++;
  }
  void note(cudaError_t r, const char* what) noexcept {
    if (error_.empty()) error_ = std::string(what) + ": " + cudaGetErrorString(r);
  }

  int device_;
  std::mutex mu_;
  std::vector<cudaEvent_t> pool_;  // grows to the most intervals of one step, then reused
  size_t used_ = 0;
  uint64_t generation_ = 0;
  std::vector<Interval> pending_;
  std::string error_;
};

}  // namespace

std::unique_ptr<StepTimer> make_cuda_timer(int device) { return std::make_unique<CudaStepTimer>(device); }

}  // namespace scaleguard::run
