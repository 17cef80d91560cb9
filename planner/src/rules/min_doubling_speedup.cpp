// min_doubling_speedup: half the GPUs must be at least this much slower, or scaling out does
// not pay ("If the speedup is less than 1.5x, don't scale further", seed 000). Rewrite: half
// the GPUs. Within the model's error band of the threshold: warned. (A probe's measured
// speedup is judged by `measured`, before.)
#include "judge.h"
#include "scaleguard/text.h"

namespace scaleguard::rules {

void min_doubling_speedup(Judge& j) {
  if (!model_judges_scaling(j)) return;
  const Planning& p = *j.plan;
  const double u = p.hw.assume.model_uncertainty;
  if (!j.on(RuleId::min_doubling_speedup)) return;
  j.d.model_band = u;
  if (j.chosen.gpus % 2 != 0) return;
  auto half = best_plan_at(p.w, p.hw, j.chosen.gpus / 2, p.pins, p.goals);
  if (!half) return;
  const Plan& h = half.value();
  const int from = j.chosen.gpus / 2, to = j.chosen.gpus;
  const double speedup = h.wall_hours / j.chosen.wall_hours;
  const double min = j.threshold(RuleId::min_doubling_speedup);
  if (!(speedup < min)) return;
  if (speedup * (1 + u) >= min) {
    j.warn_within_band(RuleId::min_doubling_speedup,
                       text::format("going from %d to %d GPUs speeds up %.2fx (%.2f-%.2fx within %s), within "
                                    "the model's error of %s: warned, not rewritten",
                                    from, to, speedup, speedup / (1 + u), speedup * (1 + u), band_note(u).c_str(),
                                    text::num(min).c_str()));
    return;
  }
  if (j.fire(RuleId::min_doubling_speedup,
             text::format("going from %d to %d GPUs speeds up only %.2fx < %s", from, to, speedup,
                          text::num(min).c_str()) +
                 (u > 0 ? text::format(" (%.2f-%.2fx within %s)", speedup / (1 + u), speedup * (1 + u),
                                       band_note(u).c_str())
                        : std::string()) +
                 "; " + plan_line(h)))
    j.new_gpus = h.gpus, j.new_nodes = h.nodes, j.chosen = h;
  j.ask(h.gpus, ask_minutes(h.wall_hours, j.part), &h);
}

}  // namespace scaleguard::rules
