// `scaleguard report --budgets`: the decision log's budget findings, and text, CSV, JSON and
// HTML renderings of a BudgetReport (the HTML shares the accounting report's style).
#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "report_format.h"
#include "report_sections.h"
#include "scaleguard/report_budgets.h"
#include "scaleguard/report_decisions.h"

namespace scaleguard::report {
namespace {

using namespace fmt;
using nlohmann::json;

constexpr std::size_t kMaxLine = 64 * 1024;

std::string amount(const BudgetLine& b, double v) { return b.usd ? "$" + fixed(v, 2) : hours(v); }
std::string unit(const BudgetLine& b) { return b.usd ? "dollars" : "GPU-hours"; }
double left_of(const BudgetLine& b) { return b.total - b.used - b.committed - b.held; }

std::string period_text(const BudgetLine& b) {
  return b.period + " " + format_utc_time(b.start) + " .. " + format_utc_time(b.end);
}

// The refusals column: "3 (1 moved)", or for a shadow budget "would refuse 2".
std::string refusals(const BudgetLine& b) {
  if (b.shadow) return "would have refused " + std::to_string(b.would_refuse);
  std::string s = std::to_string(b.refused);
  if (b.moved) s += " (" + std::to_string(b.moved) + " moved)";
  return s;
}

}  // namespace

void add_budget_decisions(std::istream& log, BudgetReport* report, int* skipped) {
  std::string line;
  while (std::getline(log, line)) {
    if (line.empty()) continue;
    if (line.size() > kMaxLine) {
      ++*skipped;
      continue;
    }
    const json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("ts") || !j["ts"].is_string()) {
      ++*skipped;
      continue;
    }
    auto ts = parse_utc_time(j["ts"].get<std::string>());
    if (!ts) {
      ++*skipped;
      continue;
    }
    if (!j.contains("budgets") || !j["budgets"].is_array()) continue;
    for (const auto& f : j["budgets"]) {
      if (!f.is_object() || !f.contains("name") || !f["name"].is_string() || !f.contains("outcome") ||
          !f["outcome"].is_string())
        continue;
      const std::string name = f["name"].get<std::string>(), outcome = f["outcome"].get<std::string>();
      const bool shadow = f.contains("shadow") && f["shadow"].is_boolean() && f["shadow"].get<bool>();
      const bool unchecked = f.contains("unchecked") && f["unchecked"].is_boolean() && f["unchecked"].get<bool>();
      double gpu_hours = 0;
      if (f.contains("gpu_hours") && f["gpu_hours"].is_number()) gpu_hours = f["gpu_hours"].get<double>();
      if (!(gpu_hours >= 0 && gpu_hours < 1e12)) gpu_hours = 0;
      for (auto& b : report->lines) {
        if (b.name != name || *ts < b.start || *ts >= b.end) continue;
        if (unchecked) ++b.unchecked;
        if (outcome == "warn") ++b.warned;
        else if (outcome == "move") ++b.moved, ++b.refused;
        else if (outcome == "reject" && shadow) ++b.would_refuse;
        else if (outcome == "reject") ++b.refused, b.kept_out_gpu_hours += gpu_hours;
      }
    }
  }
}

std::string render_budgets_text(const BudgetReport& r) {
  std::string out = "budgets, ledger " + r.ledger + " counted " + format_utc_time(r.snapshot) + "\n";
  for (const auto& b : r.lines) {
    out += "\n" + b.name + " (" + b.scope + (b.shadow ? ", shadow" : "") + "): " + amount(b, b.total) +
           (b.usd ? "" : " GPU-hours") + ", " + period_text(b) + "\n";
    if (!b.counted) {
      out += "  not counted by this ledger (a new or changed budget: run scaleguard budget sync)\n";
      continue;
    }
    out += "  used " + amount(b, b.used) + " (" + percent(b.used, b.total) + "), committed " + amount(b, b.committed) +
           " by " + std::to_string(b.running) + " running job(s), held " + amount(b, b.held) + " by " +
           std::to_string(b.pending) + " pending job(s), left " + amount(b, left_of(b)) + "\n";
    out += "  forecast at the period's end " + amount(b, b.forecast) + " (" + percent(b.forecast, b.total) +
           ") at the burn rate so far\n";
    out += std::string("  ") + (b.shadow ? "" : "refused ") + refusals(b) + ", kept out " + hours(b.kept_out_gpu_hours) + " GPU-hours, warned " +
           std::to_string(b.warned) + (b.unchecked ? ", unchecked " + std::to_string(b.unchecked) : "") + "\n";
  }
  for (const auto& n : r.notes) out += "\nnote: " + n + "\n";
  return out;
}

std::string render_budgets_csv(const BudgetReport& r) {
  std::string out = "budget,scope,mode,unit,period,start,end,total,used,committed,held,left,forecast,running,pending,"
                    "refused,moved,would_refuse,warned,unchecked,kept_out_gpu_hours\n";
  for (const auto& b : r.lines)
    out += csv(b.name) + "," + csv(b.scope) + "," + (b.shadow ? "shadow" : "enforce") + "," + unit(b) + "," +
           csv(b.period) + "," + format_utc_time(b.start) + "," + format_utc_time(b.end) + "," + fixed(b.total, 4) + "," +
           fixed(b.used, 4) + "," + fixed(b.committed, 4) + "," + fixed(b.held, 4) + "," + fixed(left_of(b), 4) + "," +
           fixed(b.forecast, 4) + "," + std::to_string(b.running) + "," + std::to_string(b.pending) + "," +
           std::to_string(b.refused) + "," + std::to_string(b.moved) + "," + std::to_string(b.would_refuse) + "," +
           std::to_string(b.warned) + "," + std::to_string(b.unchecked) + "," + fixed(b.kept_out_gpu_hours, 4) + "\n";
  return out;
}

std::string render_budgets_json(const BudgetReport& r) {
  json lines = json::array();
  for (const auto& b : r.lines)
    lines.push_back({{"budget", b.name},         {"scope", b.scope},         {"mode", b.shadow ? "shadow" : "enforce"},
                     {"unit", unit(b)},          {"period", b.period},       {"start", format_utc_time(b.start)},
                     {"end", format_utc_time(b.end)}, {"counted", b.counted}, {"total", b.total},
                     {"used", b.used},           {"committed", b.committed}, {"held", b.held},
                     {"left", left_of(b)},       {"forecast", b.forecast},   {"running", b.running},
                     {"pending", b.pending},     {"refused", b.refused},     {"moved", b.moved},
                     {"would_refuse", b.would_refuse}, {"warned", b.warned}, {"unchecked", b.unchecked},
                     {"kept_out_gpu_hours", b.kept_out_gpu_hours}});
  json j = {{"ledger", r.ledger}, {"snapshot", format_utc_time(r.snapshot)}, {"budgets", lines}, {"notes", r.notes}};
  return j.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string budgets_html_body(const BudgetReport& r, const char* tag) {
  const std::string o = std::string("<") + tag + ">", c = std::string("</") + tag + ">";
  std::string h;
  int refused = 0;
  double kept = 0;
  for (const auto& b : r.lines) refused += b.refused, kept += b.kept_out_gpu_hours;
  h += "<div class=\"cards\"><div class=\"card\">budgets<b>" + std::to_string(r.lines.size()) +
       "</b></div><div class=\"card bad\">refused jobs<b>" + std::to_string(refused) +
       "</b></div><div class=\"card\">GPU-hours kept out<b>" + hours(kept) + "</b></div></div>\n";
  // One bar per budget, in % of its budget: used, committed, held stacked; a line at 100 %
  // and a tick at the forecast.
  const double W = 900, left = 170, right = 70, row = 34;
  double top = 100;
  for (const auto& b : r.lines)
    if (b.total > 0) top = std::max({top, 100 * (b.used + b.committed + b.held) / b.total, 100 * b.forecast / b.total});
  top = std::min(top * 1.05, 300.0);
  const double plot = W - left - right, H = 40 + row * std::max<std::size_t>(1, r.lines.size());
  auto x_of = [&](double pct) { return left + plot * std::min(pct, top) / top; };
  std::string svg = svg_open(W, H, "budget use");
  double y = 10;
  for (const auto& b : r.lines) {
    svg += text(left - 8, y + 17, b.name.size() > 22 ? b.name.substr(0, 21) + "~" : b.name, "end", "axis");
    if (b.total > 0 && b.counted) {
      double x = left;
      const struct {
        double v;
        const char* colour;
        const char* what;
      } parts[] = {{b.used, kUseful, "used"}, {b.committed, kWasteColours[1], "committed"}, {b.held, kWasteColours[3], "held"}};
      for (const auto& p : parts) {
        const double w = x_of(100 * p.v / b.total) - left;
        svg += rect(x, y, w, 24, p.colour, b.name + " " + p.what + ": " + amount(b, p.v));
        x += w;
      }
      const double fx = x_of(100 * b.forecast / b.total);
      svg += "<line x1=\"" + fixed(fx, 1) + "\" x2=\"" + fixed(fx, 1) + "\" y1=\"" + fixed(y - 3, 1) + "\" y2=\"" +
             fixed(y + 27, 1) + "\" stroke=\"#222\" stroke-dasharray=\"3,2\"><title>forecast " + esc(amount(b, b.forecast)) +
             "</title></line>";
      svg += text(W - right + 6, y + 17, percent(b.used + b.committed + b.held, b.total), "start", "axis");
    } else {
      svg += text(left + 6, y + 17, "not counted yet", "start", "muted");
    }
    y += row;
  }
  const double x100 = x_of(100);
  svg += "<line class=\"axisline\" x1=\"" + fixed(x100, 1) + "\" x2=\"" + fixed(x100, 1) + "\" y1=\"4\" y2=\"" +
         fixed(y, 1) + "\"/>" + text(x100, y + 14, "100% of the budget", "middle", "axis");
  svg += rect(left, y + 20, 12, 12, kUseful, "used") + text(left + 16, y + 30, "used", "start", "axis");
  svg += rect(left + 70, y + 20, 12, 12, kWasteColours[1], "committed") + text(left + 86, y + 30, "committed", "start", "axis");
  svg += rect(left + 170, y + 20, 12, 12, kWasteColours[3], "held") + text(left + 186, y + 30, "held by pending jobs", "start", "axis");
  h += o + "Use of each budget" + c + svg + "</svg>\n";
  h += o + "Budgets" + c + "<table><tr><th>budget</th><th class=\"l\">scope</th><th class=\"l\">period</th><th>budget</th>"
       "<th>used</th><th>committed</th><th>held</th><th>left</th><th>forecast</th><th>refused</th>"
       "<th>kept out GPU-h</th><th>warned</th></tr>";
  for (const auto& b : r.lines)
    h += "<tr><td>" + esc(b.name) + (b.shadow ? " (shadow)" : "") + "</td><td class=\"l\">" + esc(b.scope) +
         "</td><td class=\"l\">" + esc(period_text(b)) + "</td><td>" + esc(amount(b, b.total)) + "</td><td>" +
         esc(amount(b, b.used)) + "</td><td>" + esc(amount(b, b.committed)) + "</td><td>" + esc(amount(b, b.held)) +
         "</td><td>" + esc(amount(b, left_of(b))) + "</td><td>" + esc(amount(b, b.forecast)) + "</td><td>" +
         esc(refusals(b)) + "</td><td>" + hours(b.kept_out_gpu_hours) + "</td><td>" + std::to_string(b.warned) +
         "</td></tr>";
  h += "</table>\n";
  for (const auto& n : r.notes) h += "<p class=\"muted\">note: " + esc(n) + "</p>";
  h += "<p class=\"muted\">used: accounting (sacct) inside the period; committed: what running jobs' time limits "
       "still allow; held: the most pending jobs may take; forecast: used at the period's end at the burn rate so "
       "far. See docs/report.md.</p>\n";
  return h;
}

std::string render_budgets_html(const BudgetReport& r) {
  return html_head("scaleguard budgets " + format_utc_time(r.snapshot)) + "<h1>scaleguard budgets</h1>" +
         "<div class=\"muted\">ledger " + esc(r.ledger) + ", counted " + esc(format_utc_time(r.snapshot)) + "</div>" +
         budgets_html_body(r, "h2") + "</body></html>\n";
}

}  // namespace scaleguard::report
