// Budgets and their ledger as Prometheus gauges (job_submit/scaleguard's file: the Gate's view,
// which is what admission uses), and the health of `scaleguard budget sync` (its own file).
// GPU-hour budgets are exported in GPU-seconds (the base unit, like node_cpu_seconds_total),
// dollar budgets in dollars.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "scaleguard/metrics.h"

namespace scaleguard::metrics {

// One budget's standing, in its own unit (GPU-hours or dollars), as `scaleguard budget show`
// reports it plus what the plugin accepted since the ledger's snapshot.
struct BudgetGauge {
  std::string name, account, user, period;   // account/user "" = any; period: day|week|month|quarter|range
  bool usd = false, shadow = false;
  bool checked = false;    // the ledger counted it and can be used: admission checks it
  double limit = 0;        // this period's budget: limit + carry-in
  double used = 0, committed = 0, held = 0, accepted = 0;   // accepted: since the ledger's snapshot
  std::int64_t start = 0, end = 0;   // the period, unix seconds
  double left() const { return limit - used - committed - held - accepted; }
};

struct LedgerGauge {
  std::int64_t snapshot = 0;   // unix seconds; 0 = no ledger loaded
  bool usable = false;         // fresh and readable (else the fail mode applies)
  std::uint64_t loads = 0, load_failures = 0;   // ledger files read, and refused or unreadable
};

// The budget and ledger families (written only when budgets exist: `budgets` not empty).
void render_budgets(Text& out, const std::vector<BudgetGauge>& budgets, const LedgerGauge& ledger, std::int64_t now);

// One run of `scaleguard budget sync`. The counters carry on from the previous file.
struct SyncRun {
  std::int64_t started = 0;        // unix seconds
  double duration_s = 0;
  bool ok = false;
  std::int64_t last_success = 0;   // this run when ok, else the previous file's
  double runs_total = 0, failures_total = 0;   // including this run
  int budgets = 0, unusable = 0;   // counted; marked unusable (numbers may be short)
};
std::string render_sync(const SyncRun& run);
// The value of the unlabelled sample `name` in an exposition text (a previous file), or
// `fallback` when absent or unreadable.
double read_sample(const std::string& text, const std::string& name, double fallback);

}  // namespace scaleguard::metrics
