// Self-contained HTML rendering: inline CSS and SVG, no script, no external resource, so the
// page opens from a mail attachment or a headless browser with no network.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "report_format.h"
#include "report_sections.h"
#include "scaleguard/report.h"
#include "scaleguard/report_axis.h"

namespace scaleguard::report {
namespace {

using namespace fmt;

// GPU-hours per day, useful and wasted stacked.
std::string day_chart(const Report& r) {
  const double W = 1040, H = 280, left = 64, right = 16, top = 16, bottom = 44;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fixed(W, 0) +
                    "\" height=\"" + fixed(H, 0) + "\" role=\"img\" aria-label=\"GPU-hours per day\">";
  double max = 0;
  for (const auto& [d, u] : r.by_day) max = std::max(max, u.gpu_hours);
  if (r.by_day.empty() || max <= 0)
    return svg + text(W / 2, H / 2, "no GPU time in this window", "middle", "muted") + "</svg>";
  // About five gridlines at round values, labelled so that no two read alike.
  const AxisTicks ticks = nice_ticks(max, 5);
  const double top_v = ticks.top(), plot_w = W - left - right, plot_h = H - top - bottom;
  for (int i = 0; i <= ticks.intervals; ++i) {
    const double y = top + plot_h - plot_h * i / ticks.intervals;
    svg += "<line x1=\"" + fixed(left, 1) + "\" x2=\"" + fixed(W - right, 1) + "\" y1=\"" +
           fixed(y, 1) + "\" y2=\"" + fixed(y, 1) + "\" class=\"grid\"/>";
    svg += text(left - 6, y + 4, ticks.labels[i], "end", "axis ytick");
  }
  svg += "<text x=\"0\" y=\"0\" transform=\"translate(16 " + fixed(top + plot_h / 2, 1) +
         ") rotate(-90)\" text-anchor=\"middle\" class=\"axis\">GPU-hours</text>";
  const std::size_t n = r.by_day.size();
  const double slot = plot_w / n, bar = std::max(1.0, slot * 0.7);
  const std::size_t label_every = (n + 30) / 31;
  std::size_t i = 0;
  for (const auto& [d, u] : r.by_day) {
    const double x = left + slot * i + (slot - bar) / 2;
    const double useful = std::max(0.0, u.gpu_hours - u.wasted_gpu_hours);
    const double hu = plot_h * useful / top_v, hw = plot_h * u.wasted_gpu_hours / top_v;
    const std::string day = format_day(d);
    svg += rect(x, top + plot_h - hu, bar, hu, kUseful, day + ": " + hours(useful) + " useful GPU-h");
    svg += rect(x, top + plot_h - hu - hw, bar, hw, kWasteColours[0],
                day + ": " + hours(u.wasted_gpu_hours) + " wasted GPU-h");
    if (i % label_every == 0) svg += text(x + bar / 2, H - bottom + 16, day.substr(5), "middle", "axis");
    ++i;
  }
  svg += "<line x1=\"" + fixed(left, 1) + "\" x2=\"" + fixed(W - right, 1) + "\" y1=\"" +
         fixed(top + plot_h, 1) + "\" y2=\"" + fixed(top + plot_h, 1) + "\" class=\"axisline\"/>";
  svg += rect(left, H - 18, 12, 12, kUseful, "useful") + text(left + 18, H - 8, "useful", "start", "axis");
  svg += rect(left + 90, H - 18, 12, 12, kWasteColours[0], "wasted") +
         text(left + 108, H - 8, "wasted", "start", "axis");
  return svg + "</svg>";
}

// Share of GPU-hours that were useful vs wasted, by the state that wasted them.
std::string waste_chart(const Report& r) {
  const double W = 500, bar_h = 36, left = 10, width = 480;
  struct Part { std::string label; double hours; const char* colour; };
  std::vector<Part> parts;
  const double total = r.total.gpu_hours;
  parts.push_back({"useful", std::max(0.0, total - r.total.wasted_gpu_hours), kUseful});
  std::size_t c = 0;
  for (const auto& [state, u] : r.by_state)
    if (u.wasted_gpu_hours > 0)
      parts.push_back({"wasted: " + state, u.wasted_gpu_hours,
                       kWasteColours[c++ % (sizeof kWasteColours / sizeof *kWasteColours)]});
  const double H = 60 + 22.0 * parts.size();
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fixed(W, 0) +
                    "\" height=\"" + fixed(H, 0) + "\" role=\"img\" aria-label=\"waste share\">";
  if (total <= 0)
    return svg + text(W / 2, 30, "no GPU time in this window", "middle", "muted") + "</svg>";
  double x = left;
  for (const auto& p : parts) {
    const double w = width * p.hours / total;
    svg += rect(x, 10, w, bar_h, p.colour, p.label + ": " + hours(p.hours) + " GPU-h");
    x += w;
  }
  double y = 10 + bar_h + 24;
  for (const auto& p : parts) {
    svg += rect(left, y - 11, 12, 12, p.colour, p.label);
    svg += text(left + 18, y, p.label + " " + hours(p.hours) + " GPU-h (" + percent(p.hours, total) + ")",
                "start", "axis");
    y += 22;
  }
  return svg + "</svg>";
}

// Cost by partition, useful and wasted dollars stacked.
std::string cost_chart(const Report& r) {
  const double W = 500, left = 110, right = 110, row = 34;
  const double H = 20 + row * std::max<std::size_t>(1, r.by_partition.size());
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fixed(W, 0) +
                    "\" height=\"" + fixed(H, 0) + "\" role=\"img\" aria-label=\"cost by partition\">";
  double max = 0;
  for (const auto& [p, u] : r.by_partition) max = std::max(max, u.cost_usd);
  if (max <= 0) return svg + text(W / 2, 30, "no priced GPU time in this window", "middle", "muted") + "</svg>";
  const double plot_w = W - left - right;
  double y = 10;
  for (const auto& [p, u] : r.by_partition) {
    const double wu = plot_w * (u.cost_usd - u.wasted_usd) / max, ww = plot_w * u.wasted_usd / max;
    svg += text(left - 8, y + 17, p.size() > 14 ? p.substr(0, 13) + "~" : p, "end", "axis");
    svg += rect(left, y, wu, 24, kUseful, p + ": $" + fixed(u.cost_usd - u.wasted_usd, 2) + " useful");
    svg += rect(left + wu, y, ww, 24, kWasteColours[0], p + ": $" + fixed(u.wasted_usd, 2) + " wasted");
    svg += text(left + wu + ww + 6, y + 17, "$" + fixed(u.cost_usd, 2), "start", "axis");
    y += row;
  }
  return svg + "</svg>";
}

template <class Map, class KeyFn>
std::string usage_table(const char* title, const Map& rows, KeyFn key_of) {
  std::string h = "<h3>" + std::string(title) +
                  "</h3><table><tr><th>" + title + "</th><th>jobs</th><th>runs</th><th>GPU-h</th>"
                  "<th>wasted GPU-h</th><th>waste</th><th>cost $</th><th>wasted $</th></tr>";
  for (const auto& [k, u] : rows)
    h += "<tr><td>" + esc(key_of(k)) + "</td><td>" + std::to_string(u.jobs) + "</td><td>" +
         std::to_string(u.runs) + "</td><td>" + hours(u.gpu_hours) + "</td><td>" +
         hours(u.wasted_gpu_hours) + "</td><td>" + percent(u.wasted_gpu_hours, u.gpu_hours) +
         "</td><td>" + fixed(u.cost_usd, 2) + "</td><td>" + fixed(u.wasted_usd, 2) + "</td></tr>";
  return h + "</table>";
}

}  // namespace

std::string usage_html_body(const Report& r, const std::string& extra_cards) {
  const Usage& t = r.total;
  std::string h = "<div class=\"cards\"><div class=\"card\">jobs<b>" + std::to_string(t.jobs) + "</b>" +
       std::to_string(t.runs) + " runs</div><div class=\"card\">GPU-hours<b>" +
       hours(t.gpu_hours) + "</b></div><div class=\"card bad\">wasted GPU-hours<b>" +
       hours(t.wasted_gpu_hours) + "</b>" + percent(t.wasted_gpu_hours, t.gpu_hours) +
       " of all</div><div class=\"card\">cost<b>$" + fixed(t.cost_usd, 2) +
       "</b></div><div class=\"card bad\">wasted cost<b>$" + fixed(t.wasted_usd, 2) + "</b></div>" +
       extra_cards + "</div>\n";
  h += "<h2>GPU-hours per day</h2>" + day_chart(r) + "\n";
  h += "<div class=\"row\"><div><h2>Waste share</h2>" + waste_chart(r) +
       "</div><div><h2>Cost by partition</h2>" + cost_chart(r) + "</div></div>\n";
  h += "<h2>Usage</h2>";
  h += usage_table("partition", r.by_partition, same);
  h += usage_table("user", r.by_user, same);
  h += usage_table("account", r.by_account, same);
  h += usage_table("state", r.by_state, same);
  h += "\n<h2>Jobs</h2><table><tr><th>job</th><th class=\"l\">user</th>"
       "<th class=\"l\">partition</th><th class=\"l\">state</th><th>runs</th><th>GPUs</th><th>GPU-h</th><th>wasted GPU-h</th><th>cost $</th>"
       "<th>GPU util</th><th class=\"l\">flags</th></tr>";
  for (const auto& j : r.jobs) {
    std::string flags;
    for (const auto& f : j.flags) flags += "<div class=\"flag\">" + esc(f) + "</div>";
    const std::string util = j.gpu_util < 0 ? "-"
                             : fixed(j.gpu_util, 0) + "%" +
                                   (j.gpu_util_source == "accounting" ? "" : " (plan estimate)");
    h += "<tr><td>" + esc(j.job_id) + "</td><td class=\"l\">" +
         esc(j.user) + "</td><td class=\"l\">" + esc(j.partition) + "</td><td class=\"l\">" +
         esc(j.state) + "</td><td>" + std::to_string(j.runs) + "</td><td>" + std::to_string(j.gpus) +
         "</td><td>" + hours(j.gpu_hours) + "</td><td>" + hours(j.wasted_gpu_hours) +
         "</td><td>" + fixed(j.cost_usd, 2) + "</td><td>" + util + "</td><td class=\"l\">" + flags + "</td></tr>";
  }
  h += "</table>\n";
  for (const auto& n : r.notes) h += "<p class=\"muted\">note: " + esc(n) + "</p>";
  h += "<p class=\"muted\">GPU-hours = allocated GPUs x elapsed time inside the window. Waste: "
       "failed runs count whole; interrupted runs (node failure, timeout, preemption, requeue) "
       "lose half a checkpoint interval, or the whole run without checkpoints. GPU util: what "
       "accounting recorded (sacct gres/gpuutil), else the plan's estimate, marked so. See "
       "docs/report.md.</p>\n";
  return h;
}

std::string usage_window(const Report& r) {
  return (r.since >= 0 ? format_time(r.since) : "?") + " .. " + (r.until >= 0 ? format_time(r.until) : "?");
}

std::string render_html(const Report& r) {
  const std::string window = usage_window(r);
  return html_head("scaleguard report " + window) + "<h1>scaleguard GPU report</h1><div class=\"muted\">" +
         esc(window) + "</div>" + usage_html_body(r, "") + "</body></html>\n";
}

}  // namespace scaleguard::report
