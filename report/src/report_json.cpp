// JSON rendering of a Report (`scaleguard report --format json`): the same numbers as the
// CSV, nested, unrounded, for scripts and dashboards.
#include <nlohmann/json.hpp>

#include "scaleguard/report.h"

namespace scaleguard::report {
namespace {

nlohmann::json usage(const Usage& u) {
  return {{"jobs", u.jobs},           {"runs", u.runs},
          {"gpu_hours", u.gpu_hours}, {"wasted_gpu_hours", u.wasted_gpu_hours},
          {"cost_usd", u.cost_usd},   {"wasted_usd", u.wasted_usd}};
}

template <class Map, class KeyFn>
nlohmann::json groups(const Map& rows, KeyFn key_of) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [k, u] : rows) out[key_of(k)] = usage(u);
  return out;
}

}  // namespace

std::string render_json(const Report& r) {
  const auto same = [](const std::string& s) { return s; };
  nlohmann::json j;
  j["since"] = r.since >= 0 ? format_time(r.since) : "";
  j["until"] = r.until >= 0 ? format_time(r.until) : "";
  j["total"] = usage(r.total);
  j["by_partition"] = groups(r.by_partition, same);
  j["by_user"] = groups(r.by_user, same);
  j["by_account"] = groups(r.by_account, same);
  j["by_state"] = groups(r.by_state, same);
  j["by_day"] = groups(r.by_day, [](std::int64_t d) { return format_day(d); });
  j["jobs"] = nlohmann::json::array();
  for (const auto& job : r.jobs)
    j["jobs"].push_back({{"job_id", job.job_id},
                         {"user", job.user},           {"account", job.account},
                         {"partition", job.partition}, {"state", job.state},
                         {"runs", job.runs},           {"gpus", job.gpus},
                         {"gpu_hours", job.gpu_hours}, {"wasted_gpu_hours", job.wasted_gpu_hours},
                         {"cost_usd", job.cost_usd},   {"wasted_usd", job.wasted_usd},
                         {"flags", job.flags},
                         {"gpu_util", job.gpu_util >= 0 ? nlohmann::json(job.gpu_util) : nlohmann::json()},
                         {"gpu_util_source", job.gpu_util_source}});
  j["notes"] = r.notes;
  // Invalid UTF-8 (sacct passes bytes through) becomes U+FFFD, not an exception.
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace scaleguard::report
