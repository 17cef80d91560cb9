// The policy in force inside slurmctld: loaded at init (a broken file fails init), checked for
// changes at most once a second (stat of the policy and catalog files), reloaded when they
// changed and then stayed unchanged for 2 s and during the read. A broken new file is logged
// with file and line and the last good policy stays.
// Safe to call from several slurmctld threads; never waits for another thread's reload.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "scaleguard/policy.h"
#include "settings.h"

namespace sg_slurm {

class PolicyHolder {
 public:
  // Loads the policy; on error returns it (init fails) and holds nothing.
  scaleguard::Result<bool> load(const Settings& settings);
  // The policy to judge with, after a cheap change check.
  std::shared_ptr<const scaleguard::Policy> current();
  // Once per loaded policy: logs each of its partitions that Slurm does not have. Call with
  // slurmctld's partition read lock held (job_submit holds it).
  void check_partitions(const scaleguard::Policy& policy);

 private:
  struct Stamp {
    long long ino = 0, size = 0, mtime_ns = 0;
    long long newest_ns = 0;  // the later of the two files' mtimes (not compared)
    bool operator==(const Stamp& o) const {
      return ino == o.ino && size == o.size && mtime_ns == o.mtime_ns;
    }
  };
  Stamp stamp_of(const scaleguard::Policy& policy) const;
  void reload_if_changed();

  Settings settings_;
  std::shared_ptr<const scaleguard::Policy> policy_;  // read/written with std::atomic_*
  std::mutex reload_mutex_;                           // try_lock only
  std::atomic<long long> next_check_ms_{0};
  std::atomic<bool> partitions_checked_{false};
  Stamp stamp_;                                       // guarded by reload_mutex_
};

}  // namespace sg_slurm
