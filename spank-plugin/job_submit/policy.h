// The policy in force inside slurmctld: loaded at init, checked for changes at most once a
// second (stat of the policy and catalog files), reloaded when they changed and then stayed
// unchanged for 2 s and during the read. A file this plugin cannot load (a key of a newer
// release, a typo) never stops slurmctld (issue 40): on reload the last good policy stays; at
// init with none, jobs in the partitions the file names are refused (fail closed) and every
// other job passes, until a file loads. Either way the log says file:line and the key.
// The budgets of a file are checked with it: a file is loaded whole or not at all.
// Safe to call from several slurmctld threads; never waits for another thread's reload.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "scaleguard/policy.h"
#include "settings.h"

namespace sg_slurm {

class PolicyHolder {
 public:
  // Loads the policy; on error logs it and holds none (fails closed, see refusal()).
  void load(const Settings& settings);
  // The policy to judge with, after a cheap change check; nullptr while no file has loaded.
  std::shared_ptr<const scaleguard::Policy> current();
  // Without a policy: the refusal for a job in `partitions` (a comma list; "" = the default
  // partition), "" when the job may pass (no partition the unloadable file names).
  std::string refusal(const std::string& partitions) const;
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
  Stamp stamp_of_settings() const;   // before any policy loaded: the settings' files
  void reload_if_changed();
  // Loads and checks policy and budgets; an error names file:line and the key.
  scaleguard::Result<std::shared_ptr<const scaleguard::Policy>> load_whole() const;
  // Without a policy: what the unloadable file governs (its [partition NAME] sections).
  struct Closed {
    std::string why;                     // the load error
    std::vector<std::string> partitions; // governed; empty with `all`
    std::string default_partition;
    bool all = false;                    // the file could not even be read: every job
  };
  void close_for(const scaleguard::Error& error);

  Settings settings_;
  std::shared_ptr<const scaleguard::Policy> policy_;  // read/written with std::atomic_*
  std::mutex reload_mutex_;                           // try_lock only
  std::atomic<long long> next_check_ms_{0};
  std::atomic<bool> partitions_checked_{false};
  Stamp stamp_;                                       // guarded by reload_mutex_
  std::shared_ptr<const Closed> closed_;              // std::atomic_*; set while policy_ is null
};

}  // namespace sg_slurm
