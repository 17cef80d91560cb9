// Per-section time limits for the hang watchdog (issue 38 item 4), learned from the run's own
// times. Pure C++ (no MPI, no Torch): tests/runner/health_test.cpp compiles it alone.
//
//   limit(section) = max(floor(section), k x p99 of the section's recent times)
//
// The step section uses the steps' wall times; a section without enough samples yet (fewer
// than min_samples) has its start-up limit instead: the first steps warm caches and
// allocators, and the start-up limit is the one meant for "nothing known yet".
#pragma once
#include <cstddef>
#include <deque>
#include <string>

namespace scaleguard::run {

enum class Section : int {
  kStartup = 0,  // MPI, data, model, resume; the first steps until min_samples are known
  kStep,         // forward, backward, gradient exchange, optimizer, the step's all-reduce
  kCheckpoint,   // the after-step hook (a save, or its hand-over to the writer)
  kEval,         // --eval-every's forward pass
  kFinish,       // after the last step: the checksum gather, the final save
  kCount
};
const char* section_name(Section s);

struct LimitSettings {
  double startup_s = 600;     // start-up (and the first steps)
  double step_floor_s = 120;  // the step limit never goes below this
  double ckpt_floor_s = 600;  // nor the checkpoint limit below this
  double eval_floor_s = 600;  // nor the evaluation limit below this
  double k = 5;               // times the p99 of recent times
  size_t window = 100;        // recent times kept per section
  size_t min_samples = 5;     // fewer: the start-up limit applies
};

class SectionLimits {
 public:
  explicit SectionLimits(const LimitSettings& s) : s_(s) {}
  // One completed interval of `section` that took `seconds`.
  void record(Section section, double seconds);
  // Seconds a section may last before the rank counts as hung.
  double limit(Section section) const;
  // How limit() came about, for the log: "max(floor 120 s, 5 x p99 0.8 s)" or "start-up limit".
  std::string explain(Section section) const;
  // The p99 of the recent times of `section` (0 when none).
  double p99(Section section) const;
  size_t samples(Section section) const { return times_[static_cast<int>(section)].size(); }

 private:
  double floor_of(Section section) const;
  LimitSettings s_;
  std::deque<double> times_[static_cast<int>(Section::kCount)];
};

}  // namespace scaleguard::run
