// Step timings (issue 15 item 5): comm_ms, the pipeline phase and its bubble, and step_ms.
//
// Code that spends time the metrics report wraps it in a TimedInterval (or begin()/end())
// on the process-wide step timer; the trainer reads the sums once per step (resolve()).
//
//  * host timer (CPU training, and the default): std::chrono::steady_clock at begin and
//    end, summed at once; resolve() never waits. Exactly the host times the runner always
//    measured.
//  * CUDA timer (step_timer_cuda.cpp, GPU builds): begin and end record a cudaEvent_t on
//    the training stream (Torch's current stream) of the calling thread. No interval waits
//    for the GPU; resolve() synchronises once, on the newest event (every event is on the
//    training stream in host order, so the older ones are complete with it), then reads
//    cudaEventElapsedTime for every interval and recycles the events. An interval thus
//    measures what the training stream spent between the two points: around a collective
//    and its wait() (the training stream waits on the NCCL stream's completion event) that
//    is the exposed communication time, the same meaning comm_ms has on the CPU; around
//    the launch of an overlapped bucket it is ~0 (nothing waits there on a GPU). Host
//    enqueue times, which is what steady_clock would give on a GPU, are never reported.
//    NOT RUN ON A GPU YET (compile-checked: runner/README.md, "Verified on a GPU vs only
//    by construction").
//
// Thread safety: begin/end may run on autograd's device threads (DDP's bucket hooks, the
// tensor-parallel operators' backward); both implementations lock.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

namespace scaleguard::run {

// What an interval counts as in the step's metrics.
enum class Timed : int {
  kComm = 0,      // communication the step waits for (comm_ms)
  kPipelineBusy,  // a pipeline stage computing forward / backward
  kPipeline,      // the whole pipeline schedule on this stage
  kStep,          // the whole step (step_ms)
  kCount
};

struct StepTimes {
  double seconds[static_cast<int>(Timed::kCount)] = {};
  double operator[](Timed t) const { return seconds[static_cast<int>(t)]; }
};

class StepTimer {
 public:
  // An interval's start: a host time or an event, depending on the timer.
  struct Mark {
    double host_s = 0;
    size_t event = static_cast<size_t>(-1);
    uint64_t generation = 0;  // an interval spanning resolve() is dropped, not misread
  };
  virtual ~StepTimer() = default;
  virtual const char* clock() const = 0;  // "host" or "cuda-events"
  virtual Mark begin() = 0;
  // Never throws (it runs in destructors); a CUDA error surfaces at the next resolve().
  virtual void end(const Mark& m, Timed what) noexcept = 0;
  // Sums by category of the intervals ended since the last call. CUDA: the one host
  // synchronisation of the step.
  virtual StepTimes resolve() = 0;
};

std::unique_ptr<StepTimer> make_host_timer();
#ifdef SCALEGUARD_WITH_NCCL
// CUDA events on `device`'s training stream (step_timer_cuda.cpp; only cudart).
std::unique_ptr<StepTimer> make_cuda_timer(int device);
#endif
// The timer for training on cuda:device_index (cuda) or the CPU. A CUDA device in a build
// without the CUDA timer is an error (never host times passed off as GPU times).
// SCALEGUARD_STEP_TIMER=host forces host clocks (a diagnostic for comparing on a GPU).
std::unique_ptr<StepTimer> make_step_timer(bool cuda, int device_index);

// The process-wide timer the runner's components record into (the host timer until the
// trainer installs its own).
StepTimer& step_timer();
void set_step_timer(std::shared_ptr<StepTimer> timer);

// Times its scope as `what` on the process-wide timer.
class TimedInterval {
 public:
  explicit TimedInterval(Timed what);
  ~TimedInterval();
  TimedInterval(const TimedInterval&) = delete;
  TimedInterval& operator=(const TimedInterval&) = delete;

 private:
  std::shared_ptr<StepTimer> timer_;
  StepTimer::Mark mark_;
  Timed what_;
};

}  // namespace scaleguard::run
