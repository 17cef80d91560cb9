// Goodput per training job (report_goodput.h): the renderings; the CLI reads the files.
#include "scaleguard/report_goodput.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "report_format.h"

namespace scaleguard::report {
using namespace fmt;

std::vector<GoodputStraggler> parse_stragglers(const std::string& text) {
  std::vector<GoodputStraggler> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream w(line);
    GoodputStraggler s;
    std::string k1, k2;
    if (!(w >> s.node >> k1 >> s.step >> k2 >> s.ratio) || k1 != "step" || k2 != "ratio" || s.ratio <= 0) continue;
    // One entry per node: its first naming (the loss counts from there) with its latest ratio.
    auto it = std::find_if(out.begin(), out.end(), [&](const GoodputStraggler& o) { return o.node == s.node; });
    if (it == out.end()) out.push_back(s);
    else it->ratio = s.ratio;
  }
  return out;
}

void estimate_straggler_loss(GoodputJob& j, double devices) {
  j.gpu_hours_stragglers = 0;
  if (j.steps <= 0) return;
  for (const auto& s : j.stragglers) {
    if (s.ratio <= 1) continue;
    const double after = static_cast<double>(std::max(0LL, j.steps - s.step)) / static_cast<double>(j.steps);
    j.gpu_hours_stragglers += j.productive_s * after * (s.ratio - 1) / s.ratio * devices / 3600;
  }
}

namespace {

std::string minutes(double s) { return fixed(s / 60, s < 600 ? 2 : 1); }
std::string straggler_names(const GoodputJob& j) {
  std::string out;
  for (const auto& s : j.stragglers)
    out += (out.empty() ? "" : ", ") + s.node + " (x" + fixed(s.ratio, 2) + " from step " + std::to_string(s.step) + ")";
  return out;
}

}  // namespace

std::string render_goodput_text(const GoodputReport& r) {
  std::string out;
  if (r.jobs.empty()) out += "no goodput files\n";
  else
    out += pad("job", 12, false) + pad("runs", 5, true) + pad("failures", 9, true) + pad("goodput", 9, true) +
           pad("productive min", 15, true) + pad("allocated min", 14, true) + pad("lost work", 15, true) +
           pad("restart min", 12, true) + pad("ckpt min", 9, true) + pad("GPU-h lost: failures", 21, true) +
           pad("stragglers", 11, true) + "  state\n";
  for (const auto& j : r.jobs) {
    out += pad(cell(j.job.empty() ? "(no job id)" : j.job, 12), 12, false) + pad(std::to_string(j.runs), 5, true) +
           pad(std::to_string(j.failures), 9, true) + pad(percent(j.productive_s, j.allocated_s), 9, true) +
           pad(minutes(j.productive_s), 15, true) + pad(minutes(j.allocated_s), 14, true) +
           pad(std::to_string(j.lost_steps) + " st " + minutes(j.lost_s) + "m", 15, true) +
           pad(minutes(j.restart_s), 12, true) + pad(minutes(j.ckpt_s), 9, true) +
           pad(hours(j.gpu_hours_failures), 21, true) + pad(hours(j.gpu_hours_stragglers), 11, true) + "  " +
           j.state + "\n";
    out += "  " + j.path + (j.requeue_wait_s > 0 ? "; requeue wait " + minutes(j.requeue_wait_s) + " min (not allocated)" : "") +
           "\n";
    if (!j.stragglers.empty()) out += "  stragglers: " + straggler_names(j) + "\n";
  }
  for (const auto& n : r.notes) out += "note: " + n + "\n";
  return out;
}

std::string render_goodput_json(const GoodputReport& r) {
  using nlohmann::json;
  json jobs = json::array();
  for (const auto& j : r.jobs) {
    json st = json::array();
    for (const auto& s : j.stragglers) st.push_back({{"node", s.node}, {"step", s.step}, {"ratio", s.ratio}});
    jobs.push_back({{"path", j.path}, {"job", j.job}, {"runs", j.runs}, {"failures", j.failures},
                    {"steps", j.steps}, {"goodput", j.goodput()}, {"allocated_s", j.allocated_s},
                    {"productive_s", j.productive_s}, {"lost_s", j.lost_s}, {"lost_steps", j.lost_steps},
                    {"restart_s", j.restart_s}, {"startup_s", j.startup_s}, {"restore_s", j.restore_s},
                    {"ckpt_s", j.ckpt_s}, {"overhead_s", j.overhead_s}, {"requeue_wait_s", j.requeue_wait_s},
                    {"gpu_hours_allocated", j.gpu_hours_allocated}, {"gpu_hours_failures", j.gpu_hours_failures},
                    {"gpu_hours_stragglers", j.gpu_hours_stragglers}, {"stragglers", st}, {"state", j.state}});
  }
  return json({{"goodput", jobs}, {"notes", r.notes}}).dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string render_goodput_html(const GoodputReport& r) {
  std::string h = "<table><tr><th class=\"l\">job</th><th>runs</th><th>failures</th><th>goodput</th>"
                  "<th>productive min</th><th>allocated min</th><th>lost steps</th><th>lost work min</th>"
                  "<th>restart min</th><th>checkpoint min</th><th>GPU-h lost to failures</th>"
                  "<th>GPU-h lost to stragglers</th><th class=\"l\">state</th></tr>";
  for (const auto& j : r.jobs)
    h += "<tr><td class=\"l\" title=\"" + esc(j.path) + "\">" + esc(j.job.empty() ? "(no job id)" : j.job) +
         "</td><td>" + std::to_string(j.runs) + "</td><td>" + std::to_string(j.failures) + "</td><td>" +
         percent(j.productive_s, j.allocated_s) + "</td><td>" + minutes(j.productive_s) + "</td><td>" +
         minutes(j.allocated_s) + "</td><td>" + std::to_string(j.lost_steps) + "</td><td>" + minutes(j.lost_s) +
         "</td><td>" + minutes(j.restart_s) + "</td><td>" + minutes(j.ckpt_s) + "</td><td>" +
         hours(j.gpu_hours_failures) + "</td><td>" + hours(j.gpu_hours_stragglers) +
         (j.stragglers.empty() ? "" : " <span class=\"muted\">" + esc(straggler_names(j)) + "</span>") +
         "</td><td class=\"l\">" + esc(j.state) + "</td></tr>";
  h += "</table>";
  if (r.jobs.empty()) h = "<p class=\"missing\">no goodput files</p>";
  for (const auto& n : r.notes) h += "<p class=\"muted\">" + esc(n) + "</p>";
  return h;
}

std::string render_goodput_page_html(const GoodputReport& r) {
  return html_head("scaleguard goodput") + "<h1>Goodput of training jobs</h1>" + render_goodput_html(r) +
         "</body></html>\n";
}

}  // namespace scaleguard::report
