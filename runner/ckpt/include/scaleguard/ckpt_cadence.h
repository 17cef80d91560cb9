// When to checkpoint: every N steps, every M minutes, or `auto` = Daly's optimum from the cost
// of a save as the run pays it and the job's MTBF. Pure (no MPI, LibTorch or clock of its own:
// the caller passes the times), so the cadence can be simulated and counted in unit tests
// (tests/runner/cadence_test.cpp). The formula is the planner's (scaleguard::daly_interval):
// one implementation for the planner's cost estimate and the runner's interval.
#pragma once
#include <cstdint>
#include <deque>
#include <string>

#include "scaleguard/result.h"

namespace scaleguard::ckpt {

struct IntervalSpec {
  enum class Kind { steps, minutes, automatic } kind = Kind::steps;
  int64_t steps = 0;
  double minutes = 0;
};
// "500" (steps), "500steps", "10min", "auto".
Result<IntervalSpec> parse_interval(const std::string& text);

// Daly (2006) higher-order optimum compute time between checkpoints, in seconds:
// sqrt(2*C*M) * (1 + sqrt(C/2M)/3 + (C/2M)/9) - C for C < 2M, else M; Young's sqrt(2*C*M)
// is its first term; 0 when C <= 0. scaleguard::daly_interval (scaleguard/plan.h) computes it.
// M is the job's MTBF (one node's MTBF divided by the nodes the job spans).
double daly_interval_seconds(double save_seconds, double mtbf_seconds);

// What one save cost the training thread. Sync: the save itself (stall = its duration).
// Async: the time the training thread spent in checkpoint work (handing the snapshot over,
// polling the commit, waiting for a previous save) plus the I/O contention: how much longer
// the steps that ran beside the background write took than the steps that did not.
struct SaveCost {
  double stall = 0;        // seconds the training thread spent in checkpoint work
  double contention = 0;   // seconds the overlapped steps took beyond the baseline step
  int overlapped_steps = 0;
  bool async = false;
  double total() const { return stall + contention; }
};

// Measures SaveCost for async saves, one save at a time: step() for every training step
// (its time without the checkpoint work after it), stall() for checkpoint work, take() when
// the save has committed. The baseline step is the median of the last 15 steps that ran
// with no save in flight; before any such step, the fastest step of this save (contention
// is then a lower bound).
class SaveCostMeter {
 public:
  void step(double seconds, bool save_in_flight);
  void stall(double seconds) { cost_.stall += seconds; }
  // The cost of the save that has just committed; starts measuring the next one.
  SaveCost take();
  // Median of the recent steps without a save in flight; before the first, the last step
  // measured (0 before any).
  double baseline_step() const;

 private:
  std::deque<double> clean_;        // recent step times with no save in flight
  std::deque<double> overlapped_;   // step times of the save being measured
  double last_ = 0;                 // the last step measured
  SaveCost cost_{0, 0, 0, true};
};

// Why the interval is what it is, for the log line (IntervalClock::explain).
struct IntervalChoice {
  double interval = 0;     // seconds from one save's start to the next one's
  double daly = 0;         // Daly's compute time between saves for cost C and MTBF M
  double cost = 0;         // C: what the last save cost the training thread
  double wall = 0;         // the last save's start to its commit
  bool floored = false;    // the interval is `wall`: a save never starts before the last commits
};

class IntervalClock {
 public:
  // mtbf_hours (the job's) is used by `auto` only.
  IntervalClock(IntervalSpec spec, double mtbf_hours, double now_seconds);
  // This rank's view; for time-based kinds combine with agree_due() (clocks differ).
  // steps: step % N == 0, whatever else happens (obeyed to the step).
  // minutes: N minutes after the last save started (or after the start of the run).
  // auto: due at the first check, to measure the cost; never while a save is in flight;
  //   then interval_seconds() after the last save started.
  bool due(int64_t step, double now_seconds) const;
  // A save starts (sync: begins; async: handed to the writer).
  void started(double now_seconds);
  // The save started last has committed at now_seconds and cost the training thread
  // cost_seconds (SaveCost::total()).
  void committed(double now_seconds, double cost_seconds);
  // A synchronous save of save_seconds ended at now_seconds: started(now - s), committed(now, s).
  void saved(double now_seconds, double save_seconds);
  // Seconds from one save's start to the next one's for minutes/auto (auto: 0 until a save
  // was measured; then max(Daly(C, M) + C, the last save's start-to-commit time)).
  double interval_seconds() const { return choice().interval; }
  IntervalChoice choice() const;
  bool in_flight() const { return in_flight_; }
  bool time_based() const { return spec_.kind != IntervalSpec::Kind::steps; }
  // The log line for `auto` after a commit: the interval chosen and why. cost says what C is
  // made of; step_seconds (> 0) adds the interval in steps.
  std::string explain(const SaveCost& cost, double step_seconds) const;

 private:
  IntervalSpec spec_;
  double mtbf_seconds_;
  double last_start_ = 0;      // the last save's start (the run's start before the first)
  bool in_flight_ = false;
  double cost_ = -1;           // C of the last committed save, <0 before the first
  double wall_ = 0;            // its start to commit
};

}  // namespace scaleguard::ckpt
