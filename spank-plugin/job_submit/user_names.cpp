#include "user_names.h"

#include <pwd.h>

#include <ctime>
#include <mutex>
#include <unordered_map>

#include "text.h"

namespace sg_slurm {
namespace {

constexpr time_t kTtlSeconds = 600;   // a renamed or new user shows within 10 minutes
constexpr size_t kMaxEntries = 4096;  // bounded: cleared whole when full

struct Entry {
  std::string name;
  time_t fetched = 0;
};

std::mutex g_mutex;
std::unordered_map<uint32_t, Entry> g_names;

}  // namespace

std::string user_name(uint32_t uid) {
  const time_t now = time(nullptr);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = g_names.find(uid);
    if (it != g_names.end() && now - it->second.fetched < kTtlSeconds) return it->second.name;
  }
  // The lookup itself outside the lock: another thread's lookup of another uid need not wait.
  passwd pw{}, *out = nullptr;
  char buf[4096];
  std::string name;
  if (getpwuid_r(uid, &pw, buf, sizeof buf, &out) == 0 && out && out->pw_name) name = one_line(out->pw_name, 64);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_names.size() >= kMaxEntries) g_names.clear();
  g_names[uid] = Entry{name, now};
  return name;
}

}  // namespace sg_slurm
