// consider_distributed_hours: a one-GPU job that would run longer than this should distribute
// ("Will the total training time exceed 72 hours? If yes, consider distribution", seed 000).
// Rewrite: the GPU count the planner chooses.
#include "judge.h"
#include "scaleguard/text.h"

namespace scaleguard::rules {

void consider_distributed_hours(Judge& j) {
  const Planning& p = *j.plan;
  if (!j.have_plan || j.gpus != 1 || !p.single_fits || !j.on(RuleId::consider_distributed_hours)) return;
  const double max = j.threshold(RuleId::consider_distributed_hours);
  const Plan& one = p.single.value();
  if (!(one.wall_hours > max)) return;
  auto rec = choose_plan(p.w, p.hw, p.pins, p.goals);
  if (!rec || rec.value().gpus <= 1) return;
  const Plan& r = rec.value();
  if (j.fire(RuleId::consider_distributed_hours,
             "one GPU takes " + text::num(one.wall_hours, 0) + " h > " + text::num(max) + " h; " + plan_line(r)))
    j.new_gpus = r.gpus, j.new_nodes = r.nodes, j.new_time = ask_minutes(r.wall_hours, j.part), j.chosen = r;
  j.ask(r.gpus, ask_minutes(r.wall_hours, j.part), &r);
}

}  // namespace scaleguard::rules
