#include "policy.h"

#include <sys/stat.h>
#include <time.h>

#include "slurm_api.h"

namespace sg_slurm {
namespace {

long long now_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

// File identity + size + mtime: catches edits in place and atomic renames.
void add_stamp(const std::string& path, long long* ino, long long* size, long long* mtime) {
  struct stat st {};
  if (path.empty() || stat(path.c_str(), &st) != 0) return;
  *ino ^= static_cast<long long>(st.st_ino);
  *size += st.st_size;
  *mtime ^= st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
}

}  // namespace

PolicyHolder::Stamp PolicyHolder::stamp_of(const scaleguard::Policy& policy) const {
  Stamp s;
  add_stamp(policy.path.empty() ? settings_.policy : policy.path, &s.ino, &s.size, &s.mtime_ns);
  add_stamp(policy.catalog.path, &s.ino, &s.size, &s.mtime_ns);
  return s;
}

scaleguard::Result<bool> PolicyHolder::load(const Settings& settings) {
  settings_ = settings;
  auto loaded = scaleguard::load_policy(settings.policy, settings.catalog);
  if (!loaded) return loaded.error();
  std::lock_guard<std::mutex> lock(reload_mutex_);
  stamp_ = stamp_of(**loaded);
  std::atomic_store(&policy_, loaded.value());
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
  Stamp now = stamp_of(*old);
  if (now == stamp_) return;
  stamp_ = now;  // a broken file is reported once, not every second
  auto loaded = scaleguard::load_policy(settings_.policy, settings_.catalog);
  if (!loaded) {
    slurm_error("job_submit/scaleguard: policy reload failed, keeping the last good policy: %s",
                loaded.error().str().c_str());
    return;
  }
  stamp_ = stamp_of(**loaded);
  std::atomic_store(&policy_, loaded.value());
  slurm_info("job_submit/scaleguard: reloaded policy %s", settings_.policy.c_str());
}

}  // namespace sg_slurm
