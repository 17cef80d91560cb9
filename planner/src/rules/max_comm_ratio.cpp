// max_comm_ratio: exposed communication / compute of the plan above this means more GPUs
// mostly wait for the network ("If it's above 0.2, adding more nodes wastes money", seed 004).
// Rewrite: halve the GPUs until within. Within the model's error band of the threshold: warned.
// (A probe's measured ratio is judged by `measured`, before.)
#include "judge.h"
#include "scaleguard/text.h"

namespace scaleguard::rules {

void max_comm_ratio(Judge& j) {
  if (!model_judges_scaling(j)) return;
  const Planning& p = *j.plan;
  const double u = p.hw.assume.model_uncertainty;
  if (j.on(RuleId::max_comm_ratio)) j.d.model_band = u;
  const double max = j.threshold(RuleId::max_comm_ratio);
  const Plan& plan = j.chosen;
  if (!j.on(RuleId::max_comm_ratio) || !(plan.comm_ratio > max)) return;
  if (plan.comm_ratio / (1 + u) <= max) {
    j.warn_within_band(RuleId::max_comm_ratio,
                       "predicted comm ratio " + text::num(plan.comm_ratio, 3) + " (" +
                           text::num(plan.comm_ratio / (1 + u), 3) + "-" + text::num(plan.comm_ratio * (1 + u), 3) +
                           " within " + band_note(u) + ") on " + gpus_str(plan.gpus) +
                           " is within the model's error of " + text::num(max) + ": warned, not rewritten");
    return;
  }
  int n = plan.gpus;
  Result<Plan> cap = plan;
  while (n > 1 && cap && cap.value().comm_ratio > max) {
    n /= 2;
    cap = best_plan_at(p.w, p.hw, n, p.pins, p.goals);
  }
  std::string detail = "comm ratio " + text::num(plan.comm_ratio, 2) + " > " + text::num(max) + " on " +
                       gpus_str(plan.gpus) +
                       (u > 0 ? " (" + text::num(plan.comm_ratio / (1 + u), 2) + "-" +
                                    text::num(plan.comm_ratio * (1 + u), 2) + " within " + band_note(u) + ")"
                              : std::string()) +
                       ": more GPUs mostly wait for the network";
  if (cap) detail += "; " + plan_line(cap.value());
  if (j.fire(RuleId::max_comm_ratio, detail) && cap)
    j.new_gpus = n, j.new_nodes = cap.value().nodes, j.chosen = cap.value();
  if (cap) j.ask(n, ask_minutes(cap.value().wall_hours, j.part), &cap.value());
}

}  // namespace scaleguard::rules
