#include <algorithm>
#include <cstdlib>

#include "scaleguard/metrics_budgets.h"

namespace scaleguard::metrics {

void render_budgets(Text& out, const std::vector<BudgetGauge>& budgets, const LedgerGauge& ledger, std::int64_t now) {
  if (budgets.empty()) return;
  auto labels = [](const BudgetGauge& b) {
    return Labels{{"budget", b.name}, {"account", b.account}, {"user", b.user}, {"period", b.period},
                  {"mode", b.shadow ? "shadow" : "enforce"}};
  };
  struct Amount {
    const char* what;
    const char* help;
    double (*value)(const BudgetGauge&);
  };
  const Amount amounts[] = {
      {"limit", "The budget of the current period (limit plus carry-in).", [](const BudgetGauge& b) { return b.limit; }},
      {"used", "Used in the current period (sacct, at the ledger's snapshot).", [](const BudgetGauge& b) { return b.used; }},
      {"committed", "What running jobs may still use (GPUs x time left).",
       [](const BudgetGauge& b) { return b.committed; }},
      {"held", "What pending jobs may use (their envelopes).", [](const BudgetGauge& b) { return b.held; }},
      {"accepted", "Accepted by job_submit since the ledger's snapshot.",
       [](const BudgetGauge& b) { return b.accepted; }},
      {"left", "What is left for new jobs: limit - used - committed - held - accepted.",
       [](const BudgetGauge& b) { return b.left(); }},
  };
  for (const bool usd : {false, true}) {
    bool any = false;
    for (const auto& b : budgets) any = any || b.usd == usd;
    if (!any) continue;
    for (const auto& a : amounts) {
      const std::string name = std::string("scaleguard_budget_") + a.what + (usd ? "_dollars" : "_gpu_seconds");
      out.family(name, "gauge", std::string(a.help) + (usd ? " Dollar budgets, in dollars." : " GPU-hour budgets, in GPU-seconds."));
      for (const auto& b : budgets)
        if (b.usd == usd) out.sample(name, labels(b), a.value(b) * (usd ? 1 : 3600));
    }
  }
  out.family("scaleguard_budget_checked", "gauge",
             "1 when admission checks the budget with the ledger's numbers, 0 when the ledger cannot be used for it "
             "(on_stale_ledger applies).");
  for (const auto& b : budgets) out.sample("scaleguard_budget_checked", labels(b), b.checked ? 1 : 0);
  out.family("scaleguard_budget_period_start_timestamp_seconds", "gauge", "Start of the budget's current period.");
  for (const auto& b : budgets)
    out.sample("scaleguard_budget_period_start_timestamp_seconds", labels(b), static_cast<double>(b.start));
  out.family("scaleguard_budget_period_end_timestamp_seconds", "gauge", "End of the budget's current period.");
  for (const auto& b : budgets)
    out.sample("scaleguard_budget_period_end_timestamp_seconds", labels(b), static_cast<double>(b.end));

  out.family("scaleguard_budget_ledger_snapshot_timestamp_seconds", "gauge",
             "When the ledger in use was counted by `scaleguard budget sync` (0: none loaded).");
  out.sample("scaleguard_budget_ledger_snapshot_timestamp_seconds", {}, static_cast<double>(ledger.snapshot));
  out.family("scaleguard_budget_ledger_age_seconds", "gauge",
             "Age of the ledger in use when this file was written (-1: none loaded).");
  out.sample("scaleguard_budget_ledger_age_seconds", {},
             ledger.snapshot > 0 ? static_cast<double>(now - ledger.snapshot) : -1);
  out.family("scaleguard_budget_ledger_usable", "gauge",
             "1 when the ledger is fresh and readable, 0 when budgets fail open or closed (on_stale_ledger).");
  out.sample("scaleguard_budget_ledger_usable", {}, ledger.usable ? 1 : 0);
  out.family("scaleguard_budget_ledger_loads_total", "counter", "Ledger files read by the plugin.");
  out.sample("scaleguard_budget_ledger_loads_total", {}, static_cast<double>(ledger.loads));
  out.family("scaleguard_budget_ledger_load_failures_total", "counter",
             "Ledger files the plugin refused or could not read.");
  out.sample("scaleguard_budget_ledger_load_failures_total", {}, static_cast<double>(ledger.load_failures));
}

std::string render_sync(const SyncRun& r) {
  Text out;
  auto one = [&](const char* name, const char* type, const char* help, double v) {
    out.family(name, type, help);
    out.sample(name, {}, v);
  };
  one("scaleguard_budget_sync_last_run_timestamp_seconds", "gauge", "When the last `scaleguard budget sync` started.",
      static_cast<double>(r.started));
  one("scaleguard_budget_sync_last_success_timestamp_seconds", "gauge",
      "When the last successful sync started (0: none recorded).", static_cast<double>(r.last_success));
  one("scaleguard_budget_sync_success", "gauge", "1 when the last sync wrote the ledger, 0 when it failed.", r.ok ? 1 : 0);
  one("scaleguard_budget_sync_duration_seconds", "gauge", "How long the last sync took.", r.duration_s);
  one("scaleguard_budget_sync_runs_total", "counter", "Syncs run (recorded in this file).", r.runs_total);
  one("scaleguard_budget_sync_failures_total", "counter", "Syncs that failed and wrote no ledger.", r.failures_total);
  one("scaleguard_budget_sync_budgets", "gauge", "Budgets the last successful sync counted.", r.budgets);
  one("scaleguard_budget_sync_unusable_budgets", "gauge",
      "Budgets the last successful sync could not count whole (unusable until the next).", r.unusable);
  return out.str();
}

double read_sample(const std::string& text, const std::string& name, double fallback) {
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    if (text.compare(at, name.size() + 1, name + " ") == 0) {
      const std::string value = text.substr(at + name.size() + 1, end - at - name.size() - 1);
      char* stop = nullptr;
      const double v = std::strtod(value.c_str(), &stop);
      return stop != value.c_str() && v >= 0 && v < 1e15 ? v : fallback;
    }
    at = end + 1;
  }
  return fallback;
}

}  // namespace scaleguard::metrics
