// `scaleguard report --budgets`: per budget, what is used, committed by running jobs and held
// by pending ones, the forecast to the period's end at the current burn rate, and what the
// budget refused (jobs and GPU-hours kept out) from job_submit/scaleguard's decision log.
// Plain data: the CLI fills the lines from the budget ledger (budget/); the decision log is
// read here. docs/report.md, "Budgets", has the fields.
#pragma once
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

namespace scaleguard::report {

struct BudgetLine {
  std::string name, scope;      // "ml-month", "account ml"
  bool usd = false;             // in dollars, else GPU-hours
  bool shadow = false;          // mode shadow: judged and logged only
  std::string period;           // "month", "range", ...
  std::int64_t start = 0, end = 0;   // the period, unix seconds
  bool counted = false;         // the ledger counted this budget (else its numbers are 0)
  double total = 0;             // limit + carry-in
  double used = 0, committed = 0, held = 0;
  int running = 0, pending = 0;
  double forecast = 0;          // used at the period's end at the burn rate so far
  // From the decision log, decisions inside the period:
  int refused = 0, moved = 0, warned = 0, unchecked = 0;
  int would_refuse = 0;         // refusals of a shadow budget (not acted on)
  double kept_out_gpu_hours = 0;   // GPU-hours of the jobs it refused (every array element)
};

struct BudgetReport {
  std::int64_t snapshot = 0;    // when the ledger was counted
  std::string ledger;           // its path
  std::vector<BudgetLine> lines;
  std::vector<std::string> notes;
};

// Adds the budget findings of each decision-log line (its "budgets" array, written by
// job_submit/scaleguard) to the lines whose name it names, when the decision's time lies in
// that line's period. Lines that are not JSON decisions are counted in *skipped.
void add_budget_decisions(std::istream& log, BudgetReport* report, int* skipped);

std::string render_budgets_text(const BudgetReport& report);
std::string render_budgets_csv(const BudgetReport& report);
std::string render_budgets_json(const BudgetReport& report);
std::string render_budgets_html(const BudgetReport& report);   // self-contained, inline SVG

}  // namespace scaleguard::report
