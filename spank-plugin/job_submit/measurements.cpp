// attach_measurements(): the probe store read from slurmctld (measurements.h).
#include "measurements.h"

#include <pwd.h>

#include <ctime>
#include <mutex>
#include <string>
#include <vector>

#include "scaleguard/measurement.h"
#include "scaleguard/model.h"
#include "scaleguard/probe_store.h"
#include "slurm_api.h"

namespace sg_slurm {
namespace {

scaleguard::probe::StoreReader& reader() {
  static scaleguard::probe::StoreReader r;
  return r;
}

// root, SlurmUser and the policy's trusted_users as uids; names resolved again only when the
// list (or SlurmUser) changes, so a submission does not ask NSS.
std::vector<uid_t> admins(const scaleguard::Policy& policy) {
  static std::mutex mu;
  static std::vector<std::string> resolved_for{"\n"};  // never a real list
  static uid_t resolved_slurm_user = 0;
  static std::vector<uid_t> resolved;
  std::lock_guard<std::mutex> lock(mu);
  const uid_t slurm_user = static_cast<uid_t>(slurm_conf.slurm_user_id);
  if (resolved_for != policy.trusted_users || resolved_slurm_user != slurm_user) {
    resolved = {0, slurm_user};
    for (const auto& u : policy.trusted_users) {
      if (!u.empty() && u.size() <= 10 && u.find_first_not_of("0123456789") == std::string::npos) {
        resolved.push_back(static_cast<uid_t>(std::stoul(u)));
        continue;
      }
      passwd pw{}, *out = nullptr;
      char buf[2048];
      if (getpwnam_r(u.c_str(), &pw, buf, sizeof buf, &out) == 0 && out) resolved.push_back(out->pw_uid);
    }
    resolved_for = policy.trusted_users;
    resolved_slurm_user = slurm_user;
  }
  return resolved;
}

}  // namespace

void attach_measurements(const scaleguard::Policy& policy, uint32_t uid, scaleguard::JobRequest* job) noexcept {
  try {
    if (policy.probe_store.empty() || job->model.empty() || job->probe) return;
    auto model = scaleguard::parse_model_spec(job->model, policy.catalog);
    if (!model) return;  // decide() refuses it with the reason
    scaleguard::probe::ReadReport report;
    const long scans = reader().scans();
    job->measurements = reader().lookup(policy.probe_store, scaleguard::model_fingerprint(model.value()),
                                        static_cast<uid_t>(uid), admins(policy), &report);
    job->now = static_cast<long long>(std::time(nullptr));
    if (reader().scans() != scans)  // log what a fresh scan refused, once
      for (const auto& p : report.problems) slurm_info("job_submit/scaleguard: %s", p.c_str());
  } catch (...) {
    job->measurements.clear();  // the model's estimate applies
  }
}

}  // namespace sg_slurm
