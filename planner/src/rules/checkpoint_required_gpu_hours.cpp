// checkpoint_required_gpu_hours: a job of this many GPU-hours, and every job on a spot
// partition, must checkpoint ("never run distributed training without sharded checkpoints",
// seed 004). Rewrite: --requeue and --signal=B:USR1@signal_before_s.
#include "judge.h"
#include "scaleguard/text.h"

namespace scaleguard::rules {

namespace {
void require_checkpoints(Judge& j, const std::string& detail) {
  if (j.fire(RuleId::checkpoint_required_gpu_hours, detail))
    j.d.rewrite.requeue = true, j.d.rewrite.signal_before_s = j.policy.signal_before_s;
}
}  // namespace

// Without intent: GPUs x time limit as asked (spare nodes included).
void checkpoint_required_gpu_hours_request(Judge& j) {
  const double gpu_hours = j.held_gpus(j.gpus) * j.hours;
  const double min = j.threshold(RuleId::checkpoint_required_gpu_hours);
  if (!j.on(RuleId::checkpoint_required_gpu_hours) || !(j.spot || gpu_hours >= min)) return;
  require_checkpoints(j, j.spot ? "spot partition: the job must checkpoint and requeue"
                                : text::format("%s GPU-hours >= %s: the job must checkpoint and requeue",
                                               text::num(gpu_hours, 0).c_str(), text::num(min).c_str()));
}

// The plan's predicted GPU-hours (and its spare nodes' for as long); the detail says how often it
// checkpoints.
void checkpoint_required_gpu_hours_plan(Judge& j) {
  const double min = j.threshold(RuleId::checkpoint_required_gpu_hours);
  const Plan& plan = j.chosen;
  if (!j.have_plan) return;
  const double gpu_hours = plan.gpu_hours + j.spare_gpu_hours(plan);
  if (!j.on(RuleId::checkpoint_required_gpu_hours) || !(j.spot || gpu_hours >= min)) return;
  const std::string why = j.spot ? "spot partition" : text::num(gpu_hours, 0) + " GPU-hours >= " + text::num(min);
  require_checkpoints(j, why + ": checkpoint every " + text::num(plan.ckpt_interval_s / 60, 0) +
                             " min and requeue on failure" +
                             (j.job.ckpt_dir.empty() ? " (set --train-ckpt-dir)" : ""));
}

}  // namespace scaleguard::rules
