// single_gpu_max_hours: a model that fits one GPU and trains within this many hours stays
// single ("fits on one GPU and trains in under 24 hours", seed 000). Rewrite: one GPU.
#include "judge.h"
#include "scaleguard/text.h"

namespace scaleguard::rules {

void single_gpu_max_hours(Judge& j) {
  if (!may_stay_single(j) || !j.on(RuleId::single_gpu_max_hours)) return;
  const Plan& one = j.plan->single.value();
  const double max = j.threshold(RuleId::single_gpu_max_hours);
  if (!(one.wall_hours <= max)) return;
  stay_single(j, j.fire(RuleId::single_gpu_max_hours, "fits one GPU and finishes in " + text::num(one.wall_hours, 1) +
                                                          " h <= " + text::num(max) + " h: stay single"));
}

}  // namespace scaleguard::rules
