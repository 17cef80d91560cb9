#include "timing/step_timer.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "config/config.h"

namespace scaleguard::run {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

class HostTimer final : public StepTimer {
 public:
  const char* clock() const override { return "host"; }
  Mark begin() override {
    Mark m;
    m.host_s = now_s();
    return m;
  }
  void end(const Mark& m, Timed what) noexcept override {
    const double s = now_s() - m.host_s;
    std::lock_guard<std::mutex> lock(mu_);
    sums_.seconds[static_cast<int>(what)] += s;
  }
  StepTimes resolve() override {
    std::lock_guard<std::mutex> lock(mu_);
    StepTimes out = sums_;
    sums_ = StepTimes{};
    return out;
  }

 private:
  std::mutex mu_;
  StepTimes sums_;
};

std::mutex g_mu;
std::shared_ptr<StepTimer>& current() {
  static std::shared_ptr<StepTimer> t = make_host_timer();
  return t;
}

std::shared_ptr<StepTimer> current_shared() {
  std::lock_guard<std::mutex> lock(g_mu);
  return current();
}

}  // namespace

std::unique_ptr<StepTimer> make_host_timer() { return std::make_unique<HostTimer>(); }

std::unique_ptr<StepTimer> make_step_timer(bool cuda, int device_index) {
  // SCALEGUARD_STEP_TIMER=host: host clocks even on a GPU, only to compare with the events
  // (scripts/gpu-check.sh); such times are enqueue times and must not feed calibration.
  const char* force = std::getenv("SCALEGUARD_STEP_TIMER");
  if (!cuda || (force && std::strcmp(force, "host") == 0)) return make_host_timer();
#ifdef SCALEGUARD_WITH_NCCL
  return make_cuda_timer(device_index);
#else
  (void)device_index;
  throw RunError("training on a CUDA device needs the CUDA step timer, which this build lacks "
                 "(runner/README.md: building for GPUs)");
#endif
}

StepTimer& step_timer() {
  std::lock_guard<std::mutex> lock(g_mu);
  return *current();
}

void set_step_timer(std::shared_ptr<StepTimer> timer) {
  std::lock_guard<std::mutex> lock(g_mu);
  current() = timer ? std::move(timer) : make_host_timer();
}

TimedInterval::TimedInterval(Timed what) : timer_(current_shared()), mark_(timer_->begin()), what_(what) {}

TimedInterval::~TimedInterval() { timer_->end(mark_, what_); }

}  // namespace scaleguard::run
