// The plan slurmctld attached to the job. job_submit/scaleguard writes SCALEGUARD_* entries
// into the job's spank env; in 22.05 that env reaches a node only in the job prolog/epilog
// (as SPANK_SCALEGUARD_*), never the tasks of an srun-launched job. So the prolog (root,
// once per node and job) saves the entries to <plan_dir>/<job id>, task_init_privileged
// (root, in each task's process before Slurm drops to the job's user) reads them, the epilog
// removes the file. The prolog also saves the NodeAddr of each of the job's nodes to
// <plan_dir>/<job id>.addr, for MASTER_ADDR, from what the node already has (node_addr.cpp):
// no RPC to slurmctld. Both files are root's, mode 0600: no user reads another job's plan.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>

#include "plugin.h"

extern char** environ;

namespace scaleguard::spank {
namespace {

constexpr std::size_t kMaxLine = 512;  // job_submit/scaleguard's bound per plan value
constexpr std::size_t kMaxEntries = 64;
constexpr std::size_t kMaxFile = 16u << 20;  // an .addr file of kMaxNodes lines fits

// What task_init_privileged read for this task's job (task_init runs later in the same process).
struct Saved {
  std::string job;
  std::vector<std::pair<std::string, std::string>> plan;
  std::map<std::string, std::string> addrs;
} saved;

bool plan_entry(const std::string& name, const std::string& value) {
  const bool name_ok = name.rfind("SCALEGUARD_", 0) == 0 && name.size() > 11 && name.size() < 64 &&
                       std::all_of(name.begin(), name.end(), [](char c) {
                         return std::isupper(static_cast<unsigned char>(c)) ||
                                std::isdigit(static_cast<unsigned char>(c)) || c == '_';
                       });
  return name_ok && value.size() <= kMaxLine &&
         std::none_of(value.begin(), value.end(), [](char c) { return std::iscntrl(static_cast<unsigned char>(c)); });
}

// The job id from the prolog/epilog environment, digits only (it becomes a file name).
std::string job_id() {
  const char* id = std::getenv("SLURM_JOB_ID");
  const std::string s = id ? id : "";
  return !s.empty() && s.size() < 12 && std::all_of(s.begin(), s.end(), ::isdigit) ? s : std::string();
}

std::string plan_file(const std::string& job) { return config().plan_dir + "/" + job; }
std::string addr_file(const std::string& job) { return plan_file(job) + ".addr"; }
std::string user_dir(const std::string& job) { return plan_file(job) + ".user"; }

// The plan directory as root configured it: root's, writable by nobody else.
bool plan_dir_ok() {
  struct stat st {};
  return lstat(config().plan_dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == 0 &&
         !(st.st_mode & (S_IWGRP | S_IWOTH));
}

// Removing <plan_dir>/<job>.user: the job's user made everything below it, so every entry is
// hostile (symlinks, FIFOs, deep trees, odd names, a directory swapped for a link mid-way).
// Names are resolved only relative to an open directory and never followed; FIFOs and
// devices are unlinked, never opened. Bounded, so a huge tree cannot stall the epilog: what
// is left past the bounds is logged.
constexpr int kMaxDepth = 64;               // open directories held at once
constexpr std::size_t kMaxRemoved = 200000; // entries looked at per job
constexpr std::size_t kBatch = 256;         // names read before removing them

struct Sweep {
  std::size_t seen = 0;
  bool cut = false;  // a bound was reached
};

struct DirCloser {
  void operator()(DIR* d) const { closedir(d); }
};

bool remove_at(int parent, const char* name, int depth, Sweep& sweep);

// Removes everything in the directory `fd` (taken over, closed here).
void empty_dir(int fd, int depth, Sweep& sweep) {
  std::unique_ptr<DIR, DirCloser> dir(fdopendir(fd));
  if (!dir) return (void)close(fd);
  std::vector<std::string> names;
  for (;;) {  // read a batch, remove it, read again from the start until nothing is left
    names.clear();
    rewinddir(dir.get());
    while (const dirent* e = readdir(dir.get())) {
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      names.emplace_back(e->d_name);
      if (names.size() == kBatch) break;
    }
    bool progress = false;
    for (const auto& n : names) progress |= remove_at(dirfd(dir.get()), n.c_str(), depth, sweep);
    if (!progress || sweep.cut) return;  // empty, or only entries that will not go
  }
}

// Removes `name` in the directory `parent`, a directory with all below it; true when gone.
bool remove_at(int parent, const char* name, int depth, Sweep& sweep) {
  if (++sweep.seen > kMaxRemoved) return sweep.cut = true, false;
  // Flags 0: unlinks a file, symlink, FIFO or socket as the name itself; EISDIR for a directory.
  if (unlinkat(parent, name, 0) == 0 || errno == ENOENT) return true;
  if (errno != EISDIR) return false;
  if (depth >= kMaxDepth) return sweep.cut = true, false;
  const int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return (errno == ENOTDIR || errno == ELOOP) && unlinkat(parent, name, 0) == 0;  // swapped for a link
  empty_dir(fd, depth + 1, sweep);
  return unlinkat(parent, name, AT_REMOVEDIR) == 0 || errno == ENOENT;
}

// Removes <plan_dir>/<job>.user and the whole tree the job left in it; logs what stays.
void drop_user_dir(const std::string& job) {
  const int fd = open(config().plan_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  std::unique_ptr<DIR, DirCloser> plans(fdopendir(fd));  // closes fd, also on an exception
  if (!plans) return (void)close(fd);
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH))) return;  // not root's: never made one
  Sweep sweep;
  if (!remove_at(fd, (job + ".user").c_str(), 0, sweep))
    slurm_error("scaleguard: epilog: %s not removed (%s after %lu entries): remove it by hand",
                user_dir(job).c_str(), sweep.cut ? "deeper or larger than the plugin removes" : "an entry would not go",
                static_cast<unsigned long>(sweep.seen));
}

// Writes `text` to `path` in plan_dir, atomically, mode 0600 (root reads it for the task).
// Root writes here: the directory must be root's and writable by nobody else, or a user
// could swap in files for other jobs.
bool write_root_file(const std::string& path, const std::string& text) {
  mkdir(config().plan_dir.c_str(), 0755);
  struct stat st {};
  if (lstat(config().plan_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 ||
      (st.st_mode & (S_IWGRP | S_IWOTH))) {
    slurm_error("scaleguard: plan_dir %s must be a directory owned by root, writable only by root",
                config().plan_dir.c_str());
    return false;
  }
  // A unique temporary name: several slurmd of one host (multiple-slurmd, the dev cluster)
  // run this job's prolog at the same moment into the same plan_dir.
  std::string tmp = path + ".XXXXXX";
  const int fd = mkostemp(tmp.data(), O_CLOEXEC);
  const bool written = fd >= 0 && fchmod(fd, 0600) == 0 &&
                       write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (fd >= 0) close(fd);
  if (!written || rename(tmp.c_str(), path.c_str()) != 0) {
    if (fd >= 0) unlink(tmp.c_str());
    slurm_error("scaleguard: cannot write %s", path.c_str());
    return false;
  }
  return true;
}

// "<node> <NodeAddr>" for each of the job's nodes whose address this node knows.
bool save_addresses(const std::string& job) {
  const char* nodes = std::getenv("SLURM_JOB_NODELIST");
  if (!nodes) nodes = std::getenv("SLURM_NODELIST");  // 22.05's name in the prolog environment
  const char* aliases = std::getenv("SLURM_NODE_ALIASES");
  const char* conf = std::getenv("SLURM_CONF");  // slurmd's own file (configless: its cache)
  const auto hosts = expand_hosts(nodes ? nodes : "");
  const auto addrs = node_addresses(hosts, aliases ? aliases : "", conf && *conf ? conf : "/etc/slurm/slurm.conf");
  if (addrs.empty())
    return slurm_info("scaleguard: prolog: no NodeAddr known for %.200s: MASTER_ADDR will be the node name",
                      nodes ? nodes : "(no node list)"), true;
  std::string text;
  for (const auto& [node, addr] : addrs) text += node + " " + addr + "\n";
  return write_root_file(addr_file(job), text);
}

// A root-owned regular file in plan_dir, opened without following a symlink; "" if absent.
bool read_root_file(const std::string& path, std::string& text) {
  text.clear();
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0 && errno == ENOENT) return true;
  if (fd < 0) return slurm_error("scaleguard: cannot read %s: %m", path.c_str()), false;
  struct stat st {};
  bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 && !(st.st_mode & 0077) &&
            static_cast<std::size_t>(st.st_size) <= kMaxFile;
  if (ok) {
    text.resize(static_cast<std::size_t>(st.st_size));
    ok = read(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  }
  close(fd);
  if (!ok) slurm_error("scaleguard: %s is not a root-owned 0600 file of the plugin's: ignored", path.c_str());
  return ok;
}

}  // namespace

int save_plan() {
  const std::string job = job_id();
  if (job.empty()) return slurm_error("scaleguard: prolog without a usable SLURM_JOB_ID"), kFail;
  if (!save_addresses(job)) return kFail;
  std::string text;
  std::size_t entries = 0;
  for (char** e = environ; *e && entries < kMaxEntries; ++e) {
    const std::string entry = *e;
    const auto eq = entry.find('=');
    if (entry.rfind("SPANK_SCALEGUARD_", 0) != 0 || eq == std::string::npos) continue;
    const std::string name = entry.substr(6, eq - 6), value = entry.substr(eq + 1);
    if (!plan_entry(name, value)) continue;
    text += name + "=" + value + "\n";
    ++entries;
  }
  if (text.empty()) return 0;
  return write_root_file(plan_file(job), text) ? 0 : kFail;
}

int drop_plan() {
  const std::string job = job_id();
  if (!job.empty()) {
    unlink(plan_file(job).c_str());
    unlink(addr_file(job).c_str());
    drop_user_dir(job);
  }
  return 0;
}

int load_saved(const std::string& job) {
  saved = Saved{};
  saved.job = job;
  std::string text;  // a file that is not as the prolog wrote it is logged and ignored
  if (!read_root_file(plan_file(job), text)) text.clear();
  std::istringstream plan(text);
  std::string line;
  while (saved.plan.size() < kMaxEntries && std::getline(plan, line)) {
    const auto eq = line.find('=');
    if (eq != std::string::npos && plan_entry(line.substr(0, eq), line.substr(eq + 1)))
      saved.plan.emplace_back(line.substr(0, eq), line.substr(eq + 1));
  }
  if (!read_root_file(addr_file(job), text)) text.clear();
  std::istringstream addrs(text);
  std::string node, addr;
  while (saved.addrs.size() < kMaxNodes && addrs >> node >> addr)
    if (plain_address(node) && plain_address(addr)) saved.addrs.emplace(node, addr);
  return 0;
}

// Root, in the task's process: <plan_dir>/<job>.user, mode 0700, owned by the job's user, where
// its tasks write the plan as JSON (remote.cpp). In root's plan_dir nobody else can create,
// rename or replace it, so the path the task gets cannot lead anywhere else. Every task of
// the job on this host tries (the dev cluster's slurmd share one plan_dir): one that finds
// it checks it is a real directory of the job's user.
std::string make_user_dir(const std::string& job, uid_t uid, gid_t gid) {
  if (saved.job != job || saved.plan.empty()) return "";  // no plan, no file
  if (!plan_dir_ok()) return slurm_error("scaleguard: plan_dir %s must be a directory owned by root, writable only by root",
                                         config().plan_dir.c_str()), "";
  const std::string path = user_dir(job);
  if (mkdir(path.c_str(), 0700) == 0 && (lchown(path.c_str(), uid, gid) != 0 || chmod(path.c_str(), 0700) != 0)) {
    slurm_error("scaleguard: cannot hand %s to uid %u: %m", path.c_str(), static_cast<unsigned>(uid));
    rmdir(path.c_str());
    return "";
  }
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != uid || (st.st_mode & 0077)) {
    slurm_error("scaleguard: %s is not a 0700 directory of uid %u: no plan file", path.c_str(),
                static_cast<unsigned>(uid));
    return "";
  }
  return path;
}

std::string saved_address(const std::string& job, const std::string& node) {
  if (saved.job != job) return "";
  const auto it = saved.addrs.find(node);
  return it == saved.addrs.end() ? std::string() : it->second;
}

std::vector<std::pair<std::string, std::string>> saved_plan(const std::string& job) {
  return saved.job == job ? saved.plan : std::vector<std::pair<std::string, std::string>>{};
}

}  // namespace scaleguard::spank
