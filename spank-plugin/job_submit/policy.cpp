#include "policy.h"

#include <sys/stat.h>
#include <time.h>

#include "metrics.h"
#include "slurm_api.h"

namespace sg_slurm {
namespace {

long long now_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

// File identity + size + mtime: catches edits in place and atomic renames.
void add_stamp(const std::string& path, long long* ino, long long* size, long long* mtime, long long* newest) {
  struct stat st {};
  if (path.empty() || stat(path.c_str(), &st) != 0) return;
  *ino ^= static_cast<long long>(st.st_ino);
  *size += st.st_size;
  const long long ns = st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
  *mtime ^= ns;
  if (ns > *newest) *newest = ns;
}

}  // namespace

PolicyHolder::Stamp PolicyHolder::stamp_of(const scaleguard::Policy& policy) const {
  Stamp s;
  add_stamp(policy.path.empty() ? settings_.policy : policy.path, &s.ino, &s.size, &s.mtime_ns, &s.newest_ns);
  add_stamp(policy.catalog.path, &s.ino, &s.size, &s.mtime_ns, &s.newest_ns);
  return s;
}

scaleguard::Result<bool> PolicyHolder::load(const Settings& settings) {
  settings_ = settings;
  auto loaded = scaleguard::load_policy(settings.policy, settings.catalog);
  if (!loaded) return loaded.error();
  std::lock_guard<std::mutex> lock(reload_mutex_);
  stamp_ = stamp_of(**loaded);  // a change during this load differs from it: reloaded later
  std::atomic_store(&policy_, loaded.value());
  partitions_checked_ = false;
  next_check_ms_ = now_ms() + 1000;
  return true;
}

std::shared_ptr<const scaleguard::Policy> PolicyHolder::current() {
  if (now_ms() >= next_check_ms_.load(std::memory_order_relaxed)) reload_if_changed();
  return std::atomic_load(&policy_);
}

void PolicyHolder::reload_if_changed() {
  std::unique_lock<std::mutex> lock(reload_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;  // another thread is checking: use the current policy
  next_check_ms_ = now_ms() + 1000;
  auto old = std::atomic_load(&policy_);
  if (!old) return;
  const Stamp before = stamp_of(*old);
  if (before == stamp_) return;
  // A file edited in place may be caught half-written: load only a file that has not changed
  // for 2 s and did not change while it was read (docs: replace it with `mv` instead).
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  const long long age_ns = now.tv_sec * 1000000000LL + now.tv_nsec - before.newest_ns;
  if (age_ns >= -2000000000LL && age_ns < 2000000000LL) return;
  // A modification time in the future (touch -d, clock skew between hosts) would wait forever.
  if (age_ns < -2000000000LL)
    slurm_error("job_submit/scaleguard: policy %s or its catalog has a modification time %lld s in the future "
                "(clock skew?); loading it now",
                settings_.policy.c_str(), -age_ns / 1000000000LL);
  auto loaded = scaleguard::load_policy(settings_.policy, settings_.catalog);
  if (!(stamp_of(*old) == before)) return;  // changed while being read: next time
  stamp_ = before;  // a broken file is reported once, not every second
  if (!loaded) {
    slurm_error("job_submit/scaleguard: policy reload failed, keeping the last good policy: %s",
                loaded.error().str().c_str());
    count_policy_reload(false);
    return;
  }
  std::atomic_store(&policy_, loaded.value());
  partitions_checked_ = false;
  slurm_info("job_submit/scaleguard: reloaded policy %s", settings_.policy.c_str());
  count_policy_reload(true);
}

void PolicyHolder::check_partitions(const scaleguard::Policy& policy) {
  if (partitions_checked_.exchange(true) || !find_part_record) return;
  for (const auto& p : policy.partitions) {
    std::string name = p.name;  // find_part_record takes a char*, and does not keep it
    if (!find_part_record(name.data()))
      slurm_error("job_submit/scaleguard: policy %s names partition '%s', which Slurm does not have: its rules "
                  "judge no job (a typo? check with `sinfo -s`)",
                  settings_.policy.c_str(), p.name.c_str());
  }
}

}  // namespace sg_slurm
