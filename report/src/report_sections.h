// The HTML sections each report page is made of, shared by the single-section pages
// (render_html, render_decisions_html, render_budgets_html) and the one-page report
// (render_page_html). Internal to the report library.
#pragma once
#include <string>

#include "scaleguard/report.h"
#include "scaleguard/report_budgets.h"
#include "scaleguard/report_decisions.h"

namespace scaleguard::report {

// Cards, charts, tables and notes of the accounting report; extra_cards go into its row of cards.
std::string usage_html_body(const Report& r, const std::string& extra_cards);
std::string usage_window(const Report& r);   // "2026-12-01T00:00:00 .. 2026-12-03T00:00:00"
// The decisions' cards, chart, tables and notes; `h` is the tag of their headings ("h2", "h3").
std::string decisions_html_body(const DecisionReport& r, const char* h);
// The budgets' cards, chart, table and notes.
std::string budgets_html_body(const BudgetReport& r, const char* h);

}  // namespace scaleguard::report
