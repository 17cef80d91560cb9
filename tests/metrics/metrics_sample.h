// Every family scaleguard writes, filled with one of each kind of series (a refusal with its
// rules, a rewrite, latencies, a GPU-hour and a dollar budget, the ledger, a sync run): what
// the linter checks and what the dashboard's expressions must name.
#pragma once
#include <string>

#include "scaleguard/metrics.h"
#include "scaleguard/metrics_budgets.h"
#include "scaleguard/metrics_decisions.h"

inline std::string sample_exposition() {
  using namespace scaleguard;
  using namespace scaleguard::metrics;
  DecisionMetrics m;
  Decision d;
  d.action = Action::reject, d.governed = true, d.envelope.gpus = 8, d.envelope.time_limit_min = 660;
  d.rules.push_back({"distributed_min_gpu_hours", Action::reject, ""});
  d.rules.push_back({"budget:ml", Action::warn, ""});
  m.count(d, "gpu-od", Event::submit);
  d.action = Action::rewrite, d.shadow = true, d.granted_gpu_hours = 11;
  m.count(d, "gpu-spot", Event::update);
  m.observe_ns(Event::submit, 12000);
  m.observe_ns(Event::update, 3000);
  m.policy_loaded(1700000000, true);
  m.policy_reload_failed();
  Text t;
  m.render(t);
  std::vector<BudgetGauge> budgets(2);
  budgets[0].name = "ml", budgets[0].account = "ml", budgets[0].period = "month", budgets[0].limit = 100;
  budgets[0].used = 10, budgets[0].checked = true, budgets[0].start = 1700000000, budgets[0].end = 1702592000;
  budgets[1].name = "cv", budgets[1].user = "alice", budgets[1].period = "day", budgets[1].usd = true;
  budgets[1].shadow = true, budgets[1].limit = 20;
  render_budgets(t, budgets, LedgerGauge{1700000500, true, 3, 1}, 1700000560);
  SyncRun sync;
  sync.started = 1700000500, sync.duration_s = 1.5, sync.ok = true, sync.last_success = 1700000500;
  sync.runs_total = 4, sync.failures_total = 1, sync.budgets = 2;
  return t.str() + render_sync(sync);
}
