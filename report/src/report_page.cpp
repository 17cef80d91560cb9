// The one-page report (report_page.h): the accounting, decisions and budgets renderings put
// together, with a line saying where each section's data came from or why it is absent.
#include "scaleguard/report_page.h"

#include <nlohmann/json.hpp>

#include "report_format.h"
#include "report_sections.h"

namespace scaleguard::report {
namespace {

using namespace fmt;

const DecisionCounts* enforced(const Page& p) { return p.decisions ? &p.decisions->enforced.total : nullptr; }

}  // namespace

std::string render_page_text(const Page& p) {
  std::string out = render_text(p.usage);
  if (const DecisionCounts* c = enforced(p))
    out += "\nsaved: " + std::to_string(c->refused) + " refused, " + std::to_string(c->rewritten) +
           " rewritten, " + std::to_string(c->warned) + " warned; " + hours(c->avoided_gpu_hours) +
           " GPU-hours" + (p.decisions->priced ? " ($" + fixed(c->avoided_usd, 2) + ")" : "") + " avoided\n";
  out += "\n== DECISIONS";
  if (p.decisions)
    out += " (decision log " + p.decision_log + ", times UTC)\n" + render_decisions_text(*p.decisions);
  else
    out += ": " + p.decisions_missing + "\n";
  out += "\n== BUDGETS";
  if (p.budgets)
    out += " (ledger " + p.budgets->ledger + "; each budget's own period)\n" + render_budgets_text(*p.budgets);
  else
    out += ": " + p.budgets_missing + "\n";
  out += "\n== GOODPUT";
  if (p.goodput)
    out += " (productive step time / allocated time per training job; GPU-hours lost)\n" + render_goodput_text(*p.goodput);
  else
    out += ": " + p.goodput_missing + "\n";
  return out;
}

std::string render_page_html(const Page& p) {
  const std::string window = usage_window(p.usage);
  std::string cards;
  if (const DecisionCounts* c = enforced(p)) {
    cards = "<div class=\"card bad\">refused<b>" + std::to_string(c->refused) + "</b>" +
            std::to_string(c->rewritten) + " rewritten, " + std::to_string(c->warned) +
            " warned</div><div class=\"card\">GPU-hours avoided<b>" + hours(c->avoided_gpu_hours) + "</b>" +
            (p.decisions->priced ? "$" + fixed(c->avoided_usd, 2) + " avoided" : "") + "</div>";
  }
  std::string h = html_head("scaleguard report " + window);
  h += "<h1>scaleguard GPU report</h1><div class=\"muted\">" + esc(window) +
       " &mdash; <a href=\"#usage\">usage and waste</a> &middot; <a href=\"#decisions\">decisions</a> "
       "&middot; <a href=\"#budgets\">budgets</a> &middot; <a href=\"#goodput\">goodput</a></div>";
  h += "<section id=\"usage\">" + usage_html_body(p.usage, cards) + "</section>\n";
  h += "<section id=\"decisions\"><h2 class=\"section\">Decisions: refused, rewritten, warned</h2>";
  if (p.decisions)
    h += "<div class=\"muted\">decision log " + esc(p.decision_log) + ", " +
         esc((p.decisions->since >= 0 ? format_utc_time(p.decisions->since) : "?") + " .. " +
             (p.decisions->until >= 0 ? format_utc_time(p.decisions->until) : "?")) +
         " (UTC)</div>" + decisions_html_body(*p.decisions, "h3");
  else
    h += "<p class=\"missing\">" + esc(p.decisions_missing) + "</p>";
  h += "</section>\n<section id=\"budgets\"><h2 class=\"section\">Budgets</h2>";
  if (p.budgets)
    h += "<div class=\"muted\">ledger " + esc(p.budgets->ledger) + ", counted " +
         esc(format_utc_time(p.budgets->snapshot)) + "; each budget's own period</div>" +
         budgets_html_body(*p.budgets, "h3");
  else
    h += "<p class=\"missing\">" + esc(p.budgets_missing) + "</p>";
  h += "</section>\n<section id=\"goodput\"><h2 class=\"section\">Goodput of training jobs</h2>";
  if (p.goodput)
    h += "<div class=\"muted\">productive step time / allocated time; GPU-hours lost to failures (lost work, "
         "restarts) and stragglers (estimate)</div>" + render_goodput_html(*p.goodput);
  else
    h += "<p class=\"missing\">" + esc(p.goodput_missing) + "</p>";
  return h + "</section></body></html>\n";
}

std::string render_page_json(const Page& p) {
  using nlohmann::json;
  json j = json::parse(render_json(p.usage));
  j["decision_log"] = p.decision_log;
  j["decisions"] = p.decisions ? json::parse(render_decisions_json(*p.decisions)) : json();
  j["decisions_missing"] = p.decisions_missing;
  j["budgets"] = p.budgets ? json::parse(render_budgets_json(*p.budgets)) : json();
  j["budgets_missing"] = p.budgets_missing;
  j["goodput"] = p.goodput ? json::parse(render_goodput_json(*p.goodput))["goodput"] : json();
  j["goodput_missing"] = p.goodput_missing;
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace scaleguard::report
