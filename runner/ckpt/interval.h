// When to save (every N steps, every M minutes, or `auto` = Daly's optimum from the measured
// save time and the MTBF) and what to do when a save fails.
#pragma once
#include <cstdint>
#include <string>

#include "ckpt/commit_comm.h"
#include "scaleguard/result.h"

namespace scaleguard::ckpt {

enum class OnSaveError { keep_training, stop };
// "continue" | "stop"
Result<OnSaveError> parse_on_save_error(const std::string& text);

struct IntervalSpec {
  enum class Kind { steps, minutes, automatic } kind = Kind::steps;
  int64_t steps = 0;
  double minutes = 0;
};
// "500" (steps), "500steps", "10min", "auto".
Result<IntervalSpec> parse_interval(const std::string& text);

// Daly (2006) higher-order optimum compute time between checkpoints, in seconds:
// sqrt(2*C*M) * (1 + sqrt(C/2M)/3 + (C/2M)/9) - C for C < 2M, else M; Young's sqrt(2*C*M)
// is its first term. Computed by the planner (scaleguard/plan.h) so the planner's cost
// estimate and the runner's interval agree; M is the job's MTBF (the caller turns a node
// MTBF into the job's, e.g. with the planner's young_daly_interval()).
double daly_interval_seconds(double save_seconds, double mtbf_seconds);

class IntervalClock {
 public:
  // mtbf_hours is used by `auto` only.
  IntervalClock(IntervalSpec spec, double mtbf_hours, double now_seconds);
  // This rank's view; for time-based kinds combine with agree_due() (clocks differ).
  // `auto` is due at the first check, to measure the save time.
  bool due(int64_t step, double now_seconds) const;
  void saved(double now_seconds, double save_seconds);
  // Seconds between saves for minutes/auto (auto: 0 until a save was measured).
  double interval_seconds() const;
  bool time_based() const { return spec_.kind != IntervalSpec::Kind::steps; }

 private:
  IntervalSpec spec_;
  double mtbf_seconds_;
  double last_save_ = 0;
  double save_seconds_ = -1;   // measured, <0 before the first save
};

// Collective: true on every rank when any rank says due.
bool agree_due(CommitComm& comm, bool due_here);

}  // namespace scaleguard::ckpt
