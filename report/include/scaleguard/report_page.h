// `scaleguard report`: one page with the window's usage and waste (accounting), what
// job_submit/scaleguard refused, rewrote and warned about in it and what that avoided (its
// decision log), and every budget's standing (the budget ledger). A section whose source is
// absent says so ("no decision log at PATH") instead of vanishing. docs/report.md.
#pragma once
#include <optional>
#include <string>

#include "scaleguard/report.h"
#include "scaleguard/report_budgets.h"
#include "scaleguard/report_decisions.h"
#include "scaleguard/report_goodput.h"

namespace scaleguard::report {

struct Page {
  Report usage;
  std::string decision_log;                 // the log read, for the heading
  std::optional<DecisionReport> decisions;  // absent: decisions_missing says why
  std::string decisions_missing;            // "no decision log at /var/log/... "
  std::optional<BudgetReport> budgets;      // absent: budgets_missing says why
  std::string budgets_missing;
  std::optional<GoodputReport> goodput;     // training jobs' goodput (--goodput-root); absent: goodput_missing
  std::string goodput_missing;
};

std::string render_page_text(const Page& page);
std::string render_page_html(const Page& page);   // self-contained, like render_html
// render_json's object with "decisions" and "budgets" added (null when absent) and
// "decisions_missing" / "budgets_missing".
std::string render_page_json(const Page& page);

}  // namespace scaleguard::report
