// Text table and CSV renderings of a Report.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "report_format.h"
#include "scaleguard/report.h"

namespace scaleguard::report {
namespace {

using namespace fmt;

template <class Map, class KeyFn>
void usage_table(std::string& out, const char* title, const Map& rows, KeyFn key_of) {
  if (rows.empty()) return;
  std::size_t w = std::string(title).size();
  for (const auto& [k, u] : rows) w = std::max(w, cell(key_of(k), 32).size());
  out += "\n" + pad(title, w, false) + "  " + pad("JOBS", 5, true) + " " + pad("RUNS", 5, true) +
         " " + pad("GPU-H", 10, true) + " " + pad("WASTED", 10, true) + " " +
         pad("WASTE%", 7, true) + " " + pad("COST $", 11, true) + "\n";
  for (const auto& [k, u] : rows)
    out += pad(cell(key_of(k), 32), w, false) + "  " + pad(std::to_string(u.jobs), 5, true) + " " +
           pad(std::to_string(u.runs), 5, true) + " " + pad(hours(u.gpu_hours), 10, true) + " " +
           pad(hours(u.wasted_gpu_hours), 10, true) + " " +
           pad(percent(u.wasted_gpu_hours, u.gpu_hours), 7, true) + " " +
           pad(fixed(u.cost_usd, 2), 11, true) + "\n";
}

// "87%" (accounting), "13% plan" (the plan's estimate), "-" (neither).
std::string util_cell(const JobSummary& j) {
  if (j.gpu_util < 0) return "-";
  return fixed(j.gpu_util, 0) + "%" + (j.gpu_util_source == "accounting" ? "" : " plan");
}

}  // namespace

std::string render_text(const Report& r) {
  const Usage& t = r.total;
  std::string out = "scaleguard report: " + (r.since >= 0 ? format_time(r.since) : "?") + " .. " +
                    (r.until >= 0 ? format_time(r.until) : "?") + "\n";
  out += std::to_string(t.jobs) + " jobs, " + std::to_string(t.runs) + " runs, " +
         hours(t.gpu_hours) + " GPU-hours, " + hours(t.wasted_gpu_hours) + " wasted (" +
         percent(t.wasted_gpu_hours, t.gpu_hours) + "), cost $" + fixed(t.cost_usd, 2) + " ($" +
         fixed(t.wasted_usd, 2) + " wasted)\n";
  usage_table(out, "PARTITION", r.by_partition, same);
  usage_table(out, "USER", r.by_user, same);
  usage_table(out, "ACCOUNT", r.by_account, same);
  usage_table(out, "STATE", r.by_state, same);
  usage_table(out, "DAY", r.by_day, [](std::int64_t d) { return format_day(d); });

  if (!r.jobs.empty()) {
    out += "\n" + pad("JOBID", 12, false) + " " +
           pad("USER", 10, false) + " " + pad("PARTITION", 10, false) + " " +
           pad("STATE", 13, false) + " " + pad("RUNS", 4, true) + " " + pad("GPUS", 4, true) +
           " " + pad("GPU-H", 9, true) + " " + pad("WASTED", 9, true) + " " +
           pad("COST $", 10, true) + " " + pad("GPU UTIL", 10, true) + "\n";
    for (const auto& j : r.jobs) {
      out += pad(cell(j.job_id, 12), 12, false) + " " +
             pad(cell(j.user, 10), 10, false) + " " + pad(cell(j.partition, 10), 10, false) + " " +
             pad(cell(j.state, 13), 13, false) + " " + pad(std::to_string(j.runs), 4, true) + " " +
             pad(std::to_string(j.gpus), 4, true) + " " + pad(hours(j.gpu_hours), 9, true) +
             " " + pad(hours(j.wasted_gpu_hours), 9, true) + " " +
             pad(fixed(j.cost_usd, 2), 10, true) + " " + pad(util_cell(j), 10, true) + "\n";
      for (const auto& f : j.flags) out += "    ! " + f + "\n";
    }
  }
  for (const auto& n : r.notes) out += "\nnote: " + n;
  if (!r.notes.empty()) out += "\n";
  return out;
}

std::string render_csv(const Report& r) {
  std::string out = "by,key,user,account,partition,state,jobs,runs,gpus,gpu_hours,"
                    "wasted_gpu_hours,cost_usd,wasted_usd,flags\n";
  auto numbers = [](const auto& u) {
    return fixed(u.gpu_hours, 4) + "," + fixed(u.wasted_gpu_hours, 4) + "," + fixed(u.cost_usd, 2) +
           "," + fixed(u.wasted_usd, 2);
  };
  auto row = [&](const std::string& by, const std::string& key, const Usage& u) {
    out += by + "," + csv(key) + ",,,,," + std::to_string(u.jobs) + "," + std::to_string(u.runs) +
           ",," + numbers(u) + ",\n";
  };
  const std::string window = (r.since >= 0 ? format_time(r.since) : "") + ".." +
                             (r.until >= 0 ? format_time(r.until) : "");
  row("total", window, r.total);
  for (const auto& [k, u] : r.by_partition) row("partition", k, u);
  for (const auto& [k, u] : r.by_user) row("user", k, u);
  for (const auto& [k, u] : r.by_account) row("account", k, u);
  for (const auto& [k, u] : r.by_state) row("state", k, u);
  for (const auto& [d, u] : r.by_day) row("day", format_day(d), u);
  for (const auto& j : r.jobs) {
    std::string flags;
    for (const auto& f : j.flags) flags += (flags.empty() ? "" : "; ") + f;
    out += "job," + csv(j.job_id) + "," + csv(j.user) + "," + csv(j.account) + "," +
           csv(j.partition) + "," + csv(j.state) + ",1," + std::to_string(j.runs) + "," +
           std::to_string(j.gpus) + "," + numbers(j) + "," + csv(flags) + "\n";
  }
  return out;
}

}  // namespace scaleguard::report
