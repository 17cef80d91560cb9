// must_fit_memory: the model must fit the GPUs asked for (any strategy). Rewrite: the fewest
// GPUs that fit. Off, the misfit is still recorded as a warning; when nothing fits at all the
// job is refused whatever the rule says (there is nothing to run).
#include "judge.h"

namespace scaleguard::rules {

void must_fit_memory(Judge& j) {
  const Planning& p = *j.plan;
  if (p.asked) return;
  // The request cannot hold the model: say how many GPUs it needs at least.
  auto rec = fewest_gpus_plan(p.w, p.hw, j.gpus * 2, p.pins, p.goals);
  std::string detail = p.asked.error().message;
  if (rec) detail += "; " + plan_line(rec.value());
  if (j.on(RuleId::must_fit_memory)) {
    if (j.fire(RuleId::must_fit_memory, detail) && rec)
      j.new_gpus = rec.value().gpus, j.new_nodes = rec.value().nodes, j.chosen = rec.value(), j.have_plan = true;
  } else {
    j.d.rules.push_back(RuleHit{"must_fit_memory", Action::warn, detail});
  }
  if (rec) j.ask(rec.value().gpus, ask_minutes(rec.value().wall_hours, j.part), &rec.value());
  if (!rec) j.max_action = Action::reject;  // nothing fits at all: nothing to run
}

}  // namespace scaleguard::rules
