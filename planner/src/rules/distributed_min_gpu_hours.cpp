// distributed_min_gpu_hours: below this many GPU-hours one GPU is cheaper ("the breakeven
// point is roughly 100 GPU-hours", seed 004). Rewrite: one GPU, its time + 10%.
#include <cmath>

#include "judge.h"
#include "scaleguard/text.h"

namespace scaleguard::rules {

// Without intent: GPUs x time limit.
void distributed_min_gpu_hours_request(Judge& j) {
  const double gpu_hours = j.gpus * j.hours;
  const double min = j.threshold(RuleId::distributed_min_gpu_hours);
  if (j.gpus <= 1 || !j.on(RuleId::distributed_min_gpu_hours) || !(gpu_hours < min)) return;
  const int one = ask_minutes(gpu_hours, j.part);
  if (j.fire(RuleId::distributed_min_gpu_hours,
             text::format("%d GPUs x %s h = %s GPU-hours < %s: below this one GPU is cheaper", j.gpus,
                          text::num(j.hours).c_str(), text::num(gpu_hours, 1).c_str(), text::num(min).c_str())))
    j.new_gpus = 1, j.new_nodes = 1, j.new_time = one;
  j.ask(1, one);
}

// The one-GPU run of the plan, compared with the plan on the GPUs asked for.
void distributed_min_gpu_hours_plan(Judge& j) {
  if (!may_stay_single(j) || !j.on(RuleId::distributed_min_gpu_hours)) return;
  const Plan& one = j.plan->single.value();
  const double min = j.threshold(RuleId::distributed_min_gpu_hours);
  if (!(one.gpu_hours < min)) return;
  const Plan& asked = j.chosen;
  const std::string cmp = "single GPU " + text::num(one.wall_hours, 1) + " h for ~" +
                          (one.has_spot_price ? text::money(one.cost_spot) + " on spot (~" : std::string("(")) +
                          text::money(one.cost_on_demand) + " on-demand" +
                          (one.has_spot_price ? ")" : ", no spot price)") + " vs " + gpus_str(asked.gpus) + " " +
                          text::num(asked.wall_hours, 1) + " h for ~" + text::money(asked.cost_on_demand) +
                          " on-demand (" + (asked.has_spot_price && std::isfinite(asked.cost_spot) ? "~" : "") +
                          spot_cost_text(asked) + ")";
  const bool to_one = j.fire(RuleId::distributed_min_gpu_hours, "one GPU needs " + text::num(one.gpu_hours, 1) +
                                                                    " GPU-hours < " + text::num(min) + ": " + cmp +
                                                                    ": use 1 GPU");
  stay_single(j, to_one);
}

}  // namespace scaleguard::rules
