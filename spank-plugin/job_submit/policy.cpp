#include "policy.h"

#include <sys/stat.h>
#include <time.h>

#include <cstdio>

#include "metrics.h"
#include "scaleguard/budget.h"
#include "scaleguard/build_info.h"
#include "scaleguard/ini.h"
#include "scaleguard/text.h"
#include "slurm_api.h"
#include "text.h"

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

PolicyHolder::Stamp PolicyHolder::stamp_of_settings() const {
  Stamp s;
  add_stamp(settings_.policy, &s.ino, &s.size, &s.mtime_ns, &s.newest_ns);
  add_stamp(settings_.catalog, &s.ino, &s.size, &s.mtime_ns, &s.newest_ns);
  return s;
}

scaleguard::Result<std::shared_ptr<const scaleguard::Policy>> PolicyHolder::load_whole() const {
  auto loaded = scaleguard::load_policy(settings_.policy, settings_.catalog);
  if (!loaded) return loaded.error();
  auto budgets = scaleguard::budget::load_budgets(settings_.policy, **loaded);
  if (!budgets) return budgets.error();
  return loaded.value();
}

void PolicyHolder::close_for(const scaleguard::Error& error) {
  auto closed = std::make_shared<Closed>();
  closed->why = error.str();
  // The sections of a file with a key this plugin does not know still say what it governs.
  auto file = scaleguard::ini::read(settings_.policy);
  if (!file) closed->all = true;
  else
    for (const auto& sec : file->sections) {
      if (sec.kind != "partition" || sec.name.empty()) continue;
      closed->partitions.push_back(sec.name);
      for (const auto& e : file->entries)
        if (e.section == "partition " + sec.name && e.key == "default" && scaleguard::text::lower(e.value) == "yes")
          closed->default_partition = sec.name;
    }
  slurm_error("job_submit/scaleguard: cannot load the policy: %s; NO POLICY IN FORCE: jobs in %s are refused "
              "until a policy loads (fix the file; it is read again when it changes); other jobs pass",
              closed->why.c_str(),
              closed->all ? "every partition (the file cannot be read)"
                          : ("its partitions " + scaleguard::text::join(closed->partitions, ", ")).c_str());
  std::atomic_store(&closed_, std::shared_ptr<const Closed>(std::move(closed)));
}

void PolicyHolder::load(const Settings& settings) {
  settings_ = settings;
  std::lock_guard<std::mutex> lock(reload_mutex_);
  stamp_ = stamp_of_settings();   // a change during this load differs from it: reloaded later
  auto loaded = load_whole();
  next_check_ms_ = now_ms() + 1000;
  if (!loaded) {
    close_for(loaded.error());
    return;
  }
  stamp_ = stamp_of(**loaded);
  std::atomic_store(&policy_, loaded.value());
  partitions_checked_ = false;
}

std::string PolicyHolder::refusal(const std::string& partitions) const {
  auto closed = std::atomic_load(&closed_);
  if (!closed) return "scaleguard: no policy is loaded; see slurmctld's log";
  bool governed = closed->all;
  for (const auto& name : scaleguard::text::split(partitions.empty() ? closed->default_partition : partitions, ','))
    for (const auto& p : closed->partitions) governed = governed || p == scaleguard::text::trim(name);
  if (!governed) return "";
  return "scaleguard: jobs in this partition are refused: the site policy cannot be loaded (" +
         one_line(closed->why, 300) + "); ask your administrator";
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
  const Stamp before = old ? stamp_of(*old) : stamp_of_settings();
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
  auto loaded = load_whole();
  if (!((old ? stamp_of(*old) : stamp_of_settings()) == before)) return;  // changed while being read: next time
  stamp_ = before;  // a broken file is reported once, not every second
  if (!loaded) {
    if (old)
      slurm_error("job_submit/scaleguard: policy reload failed, keeping the last good policy: %s",
                  loaded.error().str().c_str());
    else
      close_for(loaded.error());
    count_policy_reload(false);
    return;
  }
  std::atomic_store(&policy_, loaded.value());
  partitions_checked_ = false;
  slurm_info("job_submit/scaleguard: %s policy %s", old ? "reloaded" : "loaded (jobs are judged again)",
             settings_.policy.c_str());
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

// For `scaleguard policy check --plugin-version` (cli/plugin_check.cpp), which loads this .so
// outside slurmctld: does this plugin's own parser load the file (policy, catalog, budgets)?
// 0 and "" when it does, else 1 and the error (file:line, key). Never throws.
extern "C" __attribute__((visibility("default"))) int scaleguard_policy_check(const char* policy, const char* catalog,
                                                                             char* out, size_t out_len) {
  std::string why;
  try {
    auto loaded = scaleguard::load_policy(policy ? policy : "", catalog ? catalog : "");
    if (!loaded) why = loaded.error().str();
    else if (auto budgets = scaleguard::budget::load_budgets(policy, **loaded); !budgets) why = budgets.error().str();
  } catch (...) {
    why = "internal error";
  }
  if (out && out_len) snprintf(out, out_len, "%s", why.c_str());
  return why.empty() ? 0 : 1;
}

extern "C" __attribute__((visibility("default"))) const char* scaleguard_plugin_release(void) {
  return scaleguard::build_version();
}
