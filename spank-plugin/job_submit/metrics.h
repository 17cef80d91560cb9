// Prometheus metrics of job_submit/scaleguard (issue 40; docs/admin-guide.md, "Metrics"): the
// judging threads only count (metrics/'s DecisionMetrics: one short mutex, two atomics); a
// thread of this plugin renders the counters and the budgets' standing and replaces the
// settings' `metrics_file` every `metrics_interval` seconds for the node exporter's textfile
// collector. Off (nothing counted, no thread) without `metrics_file`.
#pragma once
#include <cstdint>

#include "audit.h"
#include "settings.h"

namespace sg_slurm {

// After the policy and budgets are loaded (init); stop before the budgets go (fini).
void start_metrics(const Settings& settings);
void stop_metrics();

// A final decision (record_decision calls it for every decision it records).
void count_decision(const scaleguard::Policy& policy, const AuditEntry& entry);
// A policy reload that succeeded or failed (policy.cpp).
void count_policy_reload(bool ok);

// Times one job_submit (update = false) or job_modify call: construct first, destroyed last.
class TimedCall {
 public:
  explicit TimedCall(bool update);
  ~TimedCall();
  TimedCall(const TimedCall&) = delete;
  TimedCall& operator=(const TimedCall&) = delete;

 private:
  bool update_;
  std::uint64_t start_ns_ = 0;   // 0: metrics off
};

}  // namespace sg_slurm
