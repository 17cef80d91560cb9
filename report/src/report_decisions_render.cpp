// Text, CSV, HTML and JSON renderings of a DecisionReport (`scaleguard report --decisions`).
// The HTML page shares the accounting report's style and SVG helpers (report_format.h).
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "report_format.h"
#include "report_sections.h"
#include "scaleguard/report_decisions.h"

namespace scaleguard::report {
namespace {

using namespace fmt;

std::string window_of(const DecisionReport& r) {
  return (r.since >= 0 ? format_utc_time(r.since) : "?") + " .. " +
         (r.until >= 0 ? format_utc_time(r.until) : "?");
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

// "7 decisions: 3 accepted, 1 warned, 1 rewritten, 2 refused; 1536.00 GPU-hours avoided of
// 1700.00 judged" or, in shadow mode, "... would have refused 2, ...".
std::string summary_line(const DecisionCounts& c, bool shadow, bool priced) {
  const std::string usd = priced ? " ($" + fixed(c.avoided_usd, 2) + ")" : "";
  std::string s = std::to_string(c.decisions) + (c.decisions == 1 ? " decision: " : " decisions: ");
  if (shadow)
    s += std::to_string(c.accepted) + " accepted; would have refused " + std::to_string(c.refused) +
         ", rewritten " + std::to_string(c.rewritten) + ", warned " + std::to_string(c.warned) +
         "; would have avoided " + hours(c.avoided_gpu_hours) + " GPU-hours" + usd + " of " +
         hours(c.judged_gpu_hours) + " judged";
  else
    s += std::to_string(c.accepted) + " accepted, " + std::to_string(c.warned) + " warned, " +
         std::to_string(c.rewritten) + " rewritten, " + std::to_string(c.refused) + " refused; " +
         hours(c.avoided_gpu_hours) + " GPU-hours" + usd + " avoided of " + hours(c.judged_gpu_hours) + " judged";
  return s;
}

std::string skipped_note(const DecisionReport& r) {
  if (r.skipped == 0) return "";
  std::string s = "skipped " + std::to_string(r.skipped) +
                  (r.skipped == 1 ? " line that is not a decision: " : " lines that are not decisions: ");
  std::vector<std::string> parts;
  for (const auto& k : r.first_skipped) parts.push_back("line " + std::to_string(k.line) + ": " + k.reason);
  s += join(parts, "; ");
  if (r.skipped > static_cast<int>(r.first_skipped.size())) s += "; ...";
  return s;
}

std::vector<std::string> notes(const DecisionReport& r) {
  std::vector<std::string> out;
  if (r.skipped > 0) out.push_back(skipped_note(r));
  if (r.outside_window > 0)
    out.push_back(std::to_string(r.outside_window) +
                  (r.outside_window == 1 ? " decision" : " decisions") + " outside the window left out");
  if (!r.enforced.by_rule.empty() || !r.shadow.by_rule.empty())
    out.push_back("a decision that fired several rules counts under each of them in the rule tables");
  if (!r.unpriced.empty())
    out.push_back("no price for partition " + join(r.unpriced, ", ") + ": GPU-hours avoided there count $0");
  return out;
}

void text_table(std::string& out, const std::string& title, const std::map<std::string, DecisionCounts>& rows,
                bool priced) {
  if (rows.empty()) return;
  std::size_t w = title.size();
  for (const auto& [k, c] : rows) w = std::max(w, cell(k, 32).size());
  out += "\n" + pad(title, w, false) + "  " + pad("REFUSED", 7, true) + " " + pad("REWRITTEN", 9, true) +
         " " + pad("WARNED", 6, true) + " " + pad("AVOIDED GPU-H", 13, true) +
         (priced ? " " + pad("AVOIDED $", 11, true) : "") + "\n";
  for (const auto& [k, c] : rows)
    out += pad(cell(k, 32), w, false) + "  " + pad(std::to_string(c.refused), 7, true) + " " +
           pad(std::to_string(c.rewritten), 9, true) + " " + pad(std::to_string(c.warned), 6, true) +
           " " + pad(hours(c.avoided_gpu_hours), 13, true) +
           (priced ? " " + pad(fixed(c.avoided_usd, 2), 11, true) : "") + "\n";
}

void text_groups(std::string& out, const DecisionGroups& g, bool shadow, bool priced) {
  const std::string suffix = shadow ? " (SHADOW: WOULD HAVE)" : "";
  text_table(out, "RULE" + suffix, g.by_rule, priced);
  text_table(out, "USER" + suffix, g.by_user, priced);
  text_table(out, "PARTITION" + suffix, g.by_partition, priced);
}

std::string verb(const AuditRecord& r) {
  const std::string v = r.action == "reject"    ? "refused"
                        : r.action == "rewrite" ? "rewritten"
                        : r.action == "warn"    ? "warned"
                                                : "accepted";
  return r.shadow ? "would have " + v : v;
}

std::string who(const AuditRecord& r) {
  if (!r.user.empty()) return r.user;
  return r.uid >= 0 ? "uid " + std::to_string(r.uid) : "(unknown)";
}

nlohmann::json counts_json(const DecisionCounts& c) {
  return {{"decisions", c.decisions},          {"accepted", c.accepted},
          {"warned", c.warned},                {"rewritten", c.rewritten},
          {"refused", c.refused},              {"judged_gpu_hours", c.judged_gpu_hours},
          {"avoided_gpu_hours", c.avoided_gpu_hours}, {"avoided_usd", c.avoided_usd}};
}

nlohmann::json groups_json(const DecisionGroups& g) {
  nlohmann::json out;
  out["total"] = counts_json(g.total);
  for (const auto& [name, rows] : {std::pair<const char*, const std::map<std::string, DecisionCounts>*>{"by_rule", &g.by_rule},
                                   {"by_user", &g.by_user}, {"by_partition", &g.by_partition}}) {
    nlohmann::json m = nlohmann::json::object();
    for (const auto& [k, c] : *rows) m[k] = counts_json(c);
    out[name] = m;
  }
  return out;
}

// Avoided GPU-hours per rule: enforced and shadow ("would have") stacked.
std::string rule_chart(const DecisionReport& r) {
  std::map<std::string, std::pair<double, double>> rows;   // rule -> {enforced, shadow}
  for (const auto& [k, c] : r.enforced.by_rule) rows[k].first = c.avoided_gpu_hours;
  for (const auto& [k, c] : r.shadow.by_rule) rows[k].second = c.avoided_gpu_hours;
  const double W = 1040, left = 200, right = 130, row = 30;
  const double H = 44 + row * std::max<std::size_t>(1, rows.size());
  std::string svg = svg_open(W, H, "GPU-hours avoided by rule");
  double max = 0;
  for (const auto& [k, v] : rows) max = std::max(max, v.first + v.second);
  if (max <= 0) return svg + text(W / 2, 30, "no GPU-hours avoided in this window", "middle", "muted") + "</svg>";
  const double plot_w = W - left - right;
  const char* shadow_colour = kWasteColours[4];
  double y = 10;
  for (const auto& [k, v] : rows) {
    const double we = plot_w * v.first / max, ws = plot_w * v.second / max;
    svg += text(left - 8, y + 15, k.size() > 30 ? cut_utf8(k, 29) + "~" : k, "end", "axis");
    svg += rect(left, y, we, 20, kWasteColours[0], k + ": " + hours(v.first) + " GPU-h avoided");
    svg += rect(left + we, y, ws, 20, shadow_colour, k + ": " + hours(v.second) + " GPU-h would have been avoided (shadow)");
    svg += text(left + we + ws + 6, y + 15, hours(v.first + v.second) + " GPU-h", "start", "axis");
    y += row;
  }
  y += 8;
  svg += rect(left, y, 12, 12, kWasteColours[0], "enforced") + text(left + 18, y + 10, "avoided (enforced)", "start", "axis");
  svg += rect(left + 160, y, 12, 12, shadow_colour, "shadow") +
         text(left + 178, y + 10, "would have been avoided (shadow mode)", "start", "axis");
  return svg + "</svg>";
}

std::string html_table(const std::string& title, const std::map<std::string, DecisionCounts>& rows, bool priced) {
  if (rows.empty()) return "";
  std::string h = "<h3>" + esc(title) + "</h3><table><tr><th>" + esc(title) +
                  "</th><th>refused</th><th>rewritten</th><th>warned</th><th>GPU-h judged</th>"
                  "<th>GPU-h avoided</th>" + (priced ? "<th>$ avoided</th>" : "") + "</tr>";
  for (const auto& [k, c] : rows)
    h += "<tr><td>" + esc(k) + "</td><td>" + std::to_string(c.refused) + "</td><td>" +
         std::to_string(c.rewritten) + "</td><td>" + std::to_string(c.warned) + "</td><td>" +
         hours(c.judged_gpu_hours) + "</td><td>" + hours(c.avoided_gpu_hours) + "</td>" +
         (priced ? "<td>" + fixed(c.avoided_usd, 2) + "</td>" : "") + "</tr>";
  return h + "</table>";
}

std::string html_cards(const DecisionCounts& c, bool shadow, bool priced) {
  const std::string would = shadow ? "would have " : "";
  return "<div class=\"cards\"><div class=\"card\">decisions<b>" + std::to_string(c.decisions) + "</b>" +
         std::to_string(c.accepted) + " accepted</div><div class=\"card bad\">" + would + "refused<b>" +
         std::to_string(c.refused) + "</b></div><div class=\"card\">" + would + "rewritten<b>" +
         std::to_string(c.rewritten) + "</b></div><div class=\"card\">" + would + "warned<b>" +
         std::to_string(c.warned) + "</b></div><div class=\"card bad\">GPU-hours " + would + "avoided<b>" +
         hours(c.avoided_gpu_hours) + "</b>" + percent(c.avoided_gpu_hours, c.judged_gpu_hours) +
         " of " + hours(c.judged_gpu_hours) + " judged</div>" +
         (priced ? "<div class=\"card bad\">dollars " + would + "avoided<b>$" + fixed(c.avoided_usd, 2) + "</b></div>" : "") +
         "</div>\n";
}

}  // namespace

std::string render_decisions_text(const DecisionReport& r) {
  std::string out = "scaleguard decisions: " + window_of(r) + "\n";
  out += "enforced: " + summary_line(r.enforced.total, false, r.priced) + "\n";
  if (r.shadow.total.decisions > 0)
    out += "shadow mode (logged, not enforced): " + summary_line(r.shadow.total, true, r.priced) + "\n";
  text_groups(out, r.enforced, false, r.priced);
  text_groups(out, r.shadow, true, r.priced);
  if (!r.largest.empty()) {
    out += "\nLARGEST\n";
    for (const auto& d : r.largest) {
      out += format_utc_time(d.ts) + "  " + cell(d.id.empty() ? "-" : d.id, 28) + "  " + verb(d) + "  " +
             cell(who(d), 16) + "  " + cell(d.partition.empty() ? "(none)" : d.partition, 16) + "  " +
             hours(d.avoided_gpu_hours) + " of " + hours(d.judged_gpu_hours) + " GPU-h avoided";
      if (!d.rules.empty()) out += "  [" + cell(join(d.rules, ","), 60) + "]";
      if (!d.job.empty()) out += "  job " + cell(d.job, 20);
      out += "\n";
      if (!d.changes.empty()) out += "    changes: " + cell(d.changes, 200) + "\n";
    }
  }
  const auto n = notes(r);
  for (const auto& s : n) out += "\nnote: " + cell(s, 2000);
  if (!n.empty()) out += "\n";
  return out;
}

std::string render_decisions_csv(const DecisionReport& r) {
  std::string out =
      "mode,by,key,decisions,accepted,warned,rewritten,refused,judged_gpu_hours,avoided_gpu_hours\n";
  const std::string window = (r.since >= 0 ? format_utc_time(r.since) : "") + ".." +
                             (r.until >= 0 ? format_utc_time(r.until) : "");
  auto row = [&](const char* mode, const char* by, const std::string& key, const DecisionCounts& c) {
    out += std::string(mode) + "," + by + "," + csv(key) + "," + std::to_string(c.decisions) + "," +
           std::to_string(c.accepted) + "," + std::to_string(c.warned) + "," +
           std::to_string(c.rewritten) + "," + std::to_string(c.refused) + "," +
           fixed(c.judged_gpu_hours, 4) + "," + fixed(c.avoided_gpu_hours, 4) + "\n";
  };
  for (const auto& [mode, g] : {std::pair<const char*, const DecisionGroups*>{"enforce", &r.enforced},
                                {"shadow", &r.shadow}}) {
    row(mode, "total", window, g->total);
    for (const auto& [k, c] : g->by_rule) row(mode, "rule", k, c);
    for (const auto& [k, c] : g->by_user) row(mode, "user", k, c);
    for (const auto& [k, c] : g->by_partition) row(mode, "partition", k, c);
  }
  return out;
}

std::string render_decisions_json(const DecisionReport& r) {
  nlohmann::json j;
  j["since"] = r.since >= 0 ? format_utc_time(r.since) : "";
  j["until"] = r.until >= 0 ? format_utc_time(r.until) : "";
  j["lines"] = r.lines;
  j["outside_window"] = r.outside_window;
  j["skipped"] = r.skipped;
  j["first_skipped"] = nlohmann::json::array();
  for (const auto& k : r.first_skipped) j["first_skipped"].push_back({{"line", k.line}, {"reason", k.reason}});
  j["enforced"] = groups_json(r.enforced);
  j["shadow"] = groups_json(r.shadow);
  j["largest"] = nlohmann::json::array();
  for (const auto& d : r.largest)
    j["largest"].push_back({{"line", d.line}, {"ts", format_utc_time(d.ts)}, {"id", d.id},
                            {"event", d.event}, {"job", d.job}, {"uid", d.uid}, {"user", d.user},
                            {"partition", d.partition}, {"mode", d.shadow ? "shadow" : "enforce"},
                            {"action", d.action}, {"rules", d.rules},
                            {"judged_gpu_hours", d.judged_gpu_hours},
                            {"granted_gpu_hours", d.granted_gpu_hours},
                            {"avoided_gpu_hours", d.avoided_gpu_hours}, {"changes", d.changes},
                            {"message", d.message}});
  // Strings come from parsed JSON (valid UTF-8) or are cut at character boundaries; replace
  // rather than throw should anything slip through.
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string decisions_html_body(const DecisionReport& r, const char* tag) {
  const std::string o = std::string("<") + tag + ">", c = std::string("</") + tag + ">";
  std::string h = o + "Enforced" + c + html_cards(r.enforced.total, false, r.priced);
  if (r.shadow.total.decisions > 0)
    h += o + "Shadow mode (logged, not enforced)" + c + html_cards(r.shadow.total, true, r.priced);
  h += o + "GPU-hours avoided by rule" + c + rule_chart(r) + "\n";
  h += o + "Refused, rewritten and warned" + c;
  h += html_table("rule", r.enforced.by_rule, r.priced);
  h += html_table("user", r.enforced.by_user, r.priced);
  h += html_table("partition", r.enforced.by_partition, r.priced);
  if (r.shadow.total.decisions > r.shadow.total.accepted) {
    h += o + "Shadow mode: would have refused, rewritten and warned" + c;
    h += html_table("rule (would have)", r.shadow.by_rule, r.priced);
    h += html_table("user (would have)", r.shadow.by_user, r.priced);
    h += html_table("partition (would have)", r.shadow.by_partition, r.priced);
  }
  if (!r.largest.empty()) {
    h += "\n" + o + "Largest" + c + "<table class=\"decisions\"><tr><th>time (UTC)</th><th class=\"l\">decision</th>"
         "<th class=\"l\">action</th><th class=\"l\">user</th><th class=\"l\">partition</th>"
         "<th class=\"l\">job</th><th>GPU-h judged</th><th>GPU-h avoided</th><th class=\"l\">rules</th>"
         "<th class=\"l\">changes / message</th></tr>";
    for (const auto& d : r.largest) {
      const std::string detail = d.changes.empty() ? cut_utf8(d.message, 400) : d.changes;
      h += "<tr><td>" + esc(format_utc_time(d.ts)) + "</td><td class=\"l\">" + esc(d.id) +
           "</td><td class=\"l\">" + esc(verb(d)) + "</td><td class=\"l\">" + esc(who(d)) +
           "</td><td class=\"l\">" + esc(d.partition) + "</td><td class=\"l\">" + esc(d.job) +
           "</td><td>" + hours(d.judged_gpu_hours) + "</td><td>" + hours(d.avoided_gpu_hours) +
           "</td><td class=\"l\">" + esc(join(d.rules, ", ")) + "</td><td class=\"l\"><div class=\"flag\">" +
           esc(detail) + "</div></td></tr>";
    }
    h += "</table>\n";
  }
  for (const auto& n : notes(r)) h += "<p class=\"muted\">note: " + esc(n) + "</p>";
  h += "<p class=\"muted\">GPU-hours judged = the envelope Slurm may grant (GPUs x time limit x "
       "array tasks); avoided = judged minus granted (all of it for a refusal, the cut for a "
       "rewrite); dollars at the partition's price in the policy. Shadow-mode decisions were only "
       "logged. See docs/report.md.</p>\n";
  return h;
}

std::string render_decisions_html(const DecisionReport& r) {
  const std::string window = window_of(r);
  return html_head("scaleguard decisions " + window) + "<h1>scaleguard decisions</h1><div class=\"muted\">" +
         esc(window) + " (UTC) &mdash; what job_submit/scaleguard refused, rewrote and warned about</div>" +
         decisions_html_body(r, "h2") + "</body></html>\n";
}

}  // namespace scaleguard::report
