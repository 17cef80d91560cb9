#include "audit.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "metrics.h"
#include "slurm_api.h"
#include "text.h"
#include "user_names.h"

namespace sg_slurm {
namespace {

std::atomic<unsigned long> g_counter{0};
std::atomic<long long> g_last_audit_error{0};

std::string utc_now() {
  time_t now = time(nullptr);
  tm t{};
  gmtime_r(&now, &t);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &t);
  return buf;
}

std::string rule_ids(const scaleguard::Decision& d) {
  std::string ids;
  for (const auto& r : d.rules) ids += (ids.empty() ? "" : ",") + r.id;
  return ids.empty() ? "-" : ids;
}

}  // namespace

std::string new_decision_id() {
  return "sg-" + std::to_string(time(nullptr)) + "-" + std::to_string(++g_counter);
}

void record_decision(const scaleguard::Policy& policy, const AuditEntry& e) {
  count_decision(policy, e);   // Prometheus counters (metrics.h), when on
  const scaleguard::Decision& d = *e.decision;
  const auto& env = d.envelope;
  const double judged = env.gpu_hours() + 0.0;
  const double granted = d.action == scaleguard::Action::reject ? 0 : d.granted_gpu_hours;
  const std::string part = one_line(e.partition.empty() ? "(default)" : e.partition, 128);
  slurm_info("job_submit/scaleguard: decision %s event=%s job=%s uid=%u partition=%s envelope=%dx%dgpu/%dmin "
             "gpu_hours=%.1f action=%s%s rules=%s%s%s",
             e.id.c_str(), e.event.c_str(), e.job.empty() ? "new" : e.job.c_str(), e.uid, part.c_str(), env.nodes,
             env.gpus_per_node, env.time_limit_min, judged, scaleguard::to_string(d.action),
             d.shadow ? " mode=shadow(not enforced)" : "", rule_ids(d).c_str(),
             e.changes.empty() ? "" : " changes=", one_line(e.changes, 256).c_str());
  if (policy.audit_file.empty()) return;
  nlohmann::json j = {
      {"ts", utc_now()},
      {"id", e.id},
      {"event", e.event},
      {"job", e.job},
      {"uid", e.uid},
      {"user", user_name(e.uid)},
      {"partition", part},
      {"mode", d.shadow ? "shadow" : "enforce"},
      {"enforced", !d.shadow},
      {"action", scaleguard::to_string(d.action)},
      {"rules", nlohmann::json::array()},
      {"envelope",
       {{"nodes", env.nodes}, {"gpus_per_node", env.gpus_per_node}, {"gpus", env.gpus}, {"hours", env.hours()},
        {"gpu_hours", judged}, {"array_tasks", e.array_tasks}}},
      {"judged_gpu_hours", judged},
      {"granted_gpu_hours", granted},
      {"avoided_gpu_hours", judged > granted ? judged - granted : 0.0},
      {"changes", one_line(e.changes, 512)},
      {"message", one_line(e.message, kMaxMessage)}};
  for (const auto& r : d.rules) j["rules"].push_back(r.id);
  if (!e.budgets_json.empty()) j["budgets"] = nlohmann::json::parse(e.budgets_json, nullptr, false);
  const std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  // One write() per line with O_APPEND: lines from slurmctld's threads never interleave.
  // The file must be slurmctld's: one a user pre-created (in a shared directory), a link, or a
  // file others may write could be edited to hide decisions; it is refused and the log says so.
  int fd = open(policy.audit_file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0640);
  int err = errno;
  const char* why = nullptr;
  struct stat st {};
  if (fd >= 0 && fstat(fd, &st) == 0 &&
      (!S_ISREG(st.st_mode) || st.st_nlink != 1 ||
       (st.st_uid != 0 && st.st_uid != static_cast<uid_t>(slurm_conf.slurm_user_id)) || (st.st_mode & S_IWOTH)))
    why = "not a single-linked regular file owned by root or SlurmUser and not world-writable: not written "
          "(remove it; slurmctld creates it)";
  ssize_t n = fd >= 0 && !why ? write(fd, line.data(), line.size()) : -1;
  if (!why) err = errno;
  if (fd >= 0) close(fd);
  if (n != static_cast<ssize_t>(line.size())) {
    const long long now = time(nullptr);
    if (now - g_last_audit_error.exchange(now) >= 60)
      slurm_error("job_submit/scaleguard: cannot append to audit file %s: %s", policy.audit_file.c_str(),
                  why ? why : strerror(err));
  }
}

}  // namespace sg_slurm
