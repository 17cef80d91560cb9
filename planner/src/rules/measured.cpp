// measured: what a probe measured for this model on this instance type (issue 16; docs/
// policy.md, "Probes") judges max_comm_ratio and min_doubling_speedup instead of the model. A
// trusted record replaces the model's estimate (loosens or tightens), the user's own can only
// tighten. Crossed, the rewrite backs off to what the probe did not cross: one node (its GPUs)
// for a probe across nodes, one GPU for a probe inside a node.
#include <algorithm>

#include "judge.h"
#include "scaleguard/text.h"

namespace scaleguard::rules {

namespace {

// The newest usable record of each trust; which of them crosses a threshold, or vouches.
struct Records {
  const Measurement* tight = nullptr;
  const Measurement* vouched = nullptr;
};

Records records(const Judge& j) {
  Records out;
  if (!j.have_plan || j.chosen.gpus <= 1 || j.new_gpus || j.job.measurements.empty()) return out;
  const bool spans_nodes = j.nodes > 1 || j.chosen.nodes > 1;
  const std::string fp = model_fingerprint(j.plan->w.model);
  const Measurement *admin = nullptr, *own = nullptr;
  for (const auto& m : j.job.measurements) {
    // Measured on the partition's hardware only (issue 37): a CPU or another GPU's record never judges it.
    if (m.fingerprint != fp || m.instance != j.part.inst.name || !measurement_matches(m, j.part.gpu) || m.ranks < 2 ||
        !(m.speedup > 0) || !(m.comm_ratio >= 0) || (m.nodes > 1) != spans_nodes)
      continue;
    if (j.job.now > 0 && (m.time > j.job.now + 86400 || j.job.now - m.time > j.policy.probe_max_age_s)) continue;
    const Measurement*& newest = m.trust == Trust::admin ? admin : own;
    if (!newest || m.time > newest->time) newest = &m;
  }
  auto fails = [&](const Measurement* m) {
    return m && ((j.on(RuleId::max_comm_ratio) && m->comm_ratio > j.threshold(RuleId::max_comm_ratio)) ||
                 (j.on(RuleId::min_doubling_speedup) && m->speedup < j.threshold(RuleId::min_doubling_speedup)));
  };
  out.tight = fails(admin) ? admin : fails(own) ? own : nullptr;
  if (!out.tight && admin) out.vouched = admin;
  return out;
}

std::string measured_where(const Measurement& m) {
  return text::format("on %d GPUs%s on %s (probe job %s%s)", m.ranks,
                      m.nodes > 1 ? (" across " + std::to_string(m.nodes) + " nodes").c_str() : " in one node",
                      m.date.c_str(), m.job_id.empty() ? "outside Slurm" : m.job_id.c_str(),
                      m.trust == Trust::own ? ", your own probe" : "");
}

// The doubling the probe made does not pay: back off to what it did not cross.
void crossed(Judge& j, const Measurement& m) {
  const Planning& p = *j.plan;
  const int fallback = m.nodes > 1 ? std::min(j.chosen.gpus, j.gpn) : 1;
  Result<Plan> cap = fallback == j.chosen.gpus && j.chosen.nodes == 1
                         ? Result<Plan>(j.chosen)
                         : best_plan_at(p.w, p.hw, fallback, p.pins, p.goals);
  const std::string then = cap ? "; " + plan_line(cap.value()) : std::string();
  bool rewrite = false;
  const double max_comm = j.threshold(RuleId::max_comm_ratio), min_speedup = j.threshold(RuleId::min_doubling_speedup);
  if (j.on(RuleId::max_comm_ratio) && m.comm_ratio > max_comm)
    rewrite |= j.fire(RuleId::max_comm_ratio, "measured comm ratio " + text::num(m.comm_ratio, 2) + " > " +
                                                  text::num(max_comm) + " " + measured_where(m) +
                                                  ": more GPUs mostly wait for the network" + then);
  if (j.on(RuleId::min_doubling_speedup) && m.speedup < min_speedup)
    rewrite |= j.fire(RuleId::min_doubling_speedup, text::format("measured %.2fx ", m.speedup) + measured_where(m) +
                                                        " < " + text::num(min_speedup) +
                                                        "x: scaling out does not pay" + then);
  if (rewrite && cap)
    j.new_gpus = fallback, j.new_nodes = cap.value().nodes, j.chosen = cap.value(), j.measured_rewrite = true;
  if (cap) j.ask(fallback, ask_minutes(cap.value().wall_hours, j.part), &cap.value());
}

}  // namespace

void measured(Judge& j) {
  const Records r = records(j);
  if (r.tight) {
    crossed(j, *r.tight);
  } else if (r.vouched) {
    j.vouched = r.vouched;
    j.d.rules.push_back(RuleHit{"measured", Action::accept,
                                text::format("measured %.2fx, comm ratio %s ", r.vouched->speedup,
                                             text::num(r.vouched->comm_ratio, 2).c_str()) +
                                    measured_where(*r.vouched) +
                                    ": within max_comm_ratio and min_doubling_speedup; the model's estimate is not used"});
  }
}

}  // namespace scaleguard::rules
