// The rules' shared state and helpers (judge.h).
#include "judge.h"

#include <algorithm>
#include <cmath>

#include "scaleguard/text.h"

namespace scaleguard::rules {

namespace {
int severity(Action a) { return static_cast<int>(a); }  // accept < warn < rewrite < reject
// decide() refuses spares that leave nothing to train on before a Judge exists.
int spares_of(const JobRequest& job) { return std::max(0, job.spare_nodes); }
}  // namespace

Judge::Judge(const JobRequest& jb, const Policy& p, const Partition& pt, const Envelope& e)
    : job(jb),
      policy(p),
      part(pt),
      env(e),
      spare_nodes(spares_of(jb)),
      spare_gpus(spare_nodes * e.gpus_per_node),
      gpn(pt.inst.gpus),
      gpus(e.gpus - spare_gpus),
      nodes(std::max(1, e.nodes - spare_nodes)),
      limit(e.time_limit_min),
      hours(e.time_limit_min / 60.0),
      how(e.how.empty() ? "" : " (judged as " + e.how + ")"),
      spot(pt.capacity == Capacity::spot),
      fast_fabric(pt.fabric == Fabric::efa || pt.fabric == Fabric::ib) {}

int Judge::spares_held(int train_gpus) const {
  if (spare_nodes <= 0) return 0;
  if (train_gpus == gpus) return spare_gpus;
  return spare_nodes * (job.gpus_per_node > 0 ? std::min(train_gpus, gpn) : spare_gpus / spare_nodes);
}

void Judge::ask(std::optional<int> gpus_, std::optional<int> minutes, const Plan* plan_) {
  if (gpus_ && !ask_gpus) {
    ask_gpus = gpus_;
    if (plan_) suggestion = *plan_, ask_nodes = plan_->nodes;
    if (minutes) ask_time = minutes;
  } else if (!gpus_ && minutes && !ask_time) {
    ask_time = minutes;
  }
}

std::string Judge::ask_text() const {
  std::string out;
  if (ask_gpus) out += text::format(" --gpus=%d", *ask_gpus);
  if (ask_nodes && *ask_nodes > 1) out += text::format(" --nodes=%d", *ask_nodes);
  if (ask_time) out += " --time=" + slurm_time(*ask_time);
  if (ask_partition) out += " --partition=" + *ask_partition;
  return out;
}

bool Judge::fire(RuleId id, std::string detail) {
  const Rule& r = rule(id);
  d.rules.push_back(RuleHit{to_string(id), r.action, std::move(detail)});
  if (severity(r.action) > severity(max_action)) max_action = r.action;
  return r.action == Action::rewrite;
}

void Judge::warn_within_band(RuleId id, std::string detail) {
  d.rules.push_back(RuleHit{to_string(id), Action::warn, std::move(detail)});
  if (severity(Action::warn) > severity(max_action)) max_action = Action::warn;
}

bool Judge::cuts(RuleId id) const {
  for (const auto& r : d.rules)
    if (r.id == to_string(id)) return r.action == Action::rewrite;
  return false;
}

void run(Table table, Judge& j) {
  for (int i = 0; i < table.count; ++i) table.units[i].judge(j);
}

std::string slurm_time(int minutes) {
  if (minutes < 0) return "INFINITE";
  const int d = minutes / 1440, h = minutes / 60 % 24, m = minutes % 60;
  return d > 0 ? text::format("%d-%02d:%02d:00", d, h, m) : text::format("%d:%02d:00", h, m);
}

int ask_minutes(double hours, const Partition& part) {
  // Clamped before the cast: an absurd plan (1.5T parameters, 1e18 tokens) must not overflow.
  int m = static_cast<int>(std::ceil(std::clamp(hours * 60 * 1.1, 10.0, 10.0 * 366 * 24 * 60)));
  if (part.max_time_min > 0) m = std::min(m, part.max_time_min);
  return m;
}

std::string gpus_str(int n) { return n == 1 ? "1 GPU" : std::to_string(n) + " GPUs"; }

std::string plan_line(const Plan& p) {
  return gpus_str(p.gpus) + " (" + to_string(p.strategy) + "): " + text::num(p.wall_hours, 2) + " h, " +
         text::num(p.gpu_hours, 1) + " GPU-hours, ~" + text::money(p.cost_on_demand) + " on-demand / " +
         (p.has_spot_price && std::isfinite(p.cost_spot) ? "~" : "") + spot_cost_text(p);
}

const Partition* fast_twin(const Policy& policy, const Partition& part) {
  for (const auto& p : policy.partitions)
    if (&p != &part && (p.fabric == Fabric::efa || p.fabric == Fabric::ib) && p.gpu.name == part.gpu.name &&
        p.capacity == part.capacity)
      return &p;
  return nullptr;
}

bool may_stay_single(const Judge& j) {
  return j.have_plan && j.gpus > 1 && j.plan->single_fits && !j.plan->deadline_needs_more;
}

void stay_single(Judge& j, bool rewrite) {
  const Plan& one = j.plan->single.value();
  const int one_time = ask_minutes(one.wall_hours, j.part);
  j.ask(1, one_time, &one);
  if (rewrite) j.new_gpus = 1, j.new_nodes = 1, j.new_time = one_time, j.chosen = one;
}

bool model_judges_scaling(const Judge& j) {
  return j.have_plan && j.chosen.gpus > 1 && !j.new_gpus && !j.vouched;
}

// Built only when a rule fires (decide() stays allocation-light on the accept path).
std::string band_note(double u) { return text::format("the model's +-%.0f%% band", 100 * u); }

}  // namespace scaleguard::rules
