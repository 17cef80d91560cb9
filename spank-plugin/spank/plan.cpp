// The plan slurmctld attached to the job. job_submit/scaleguard writes SCALEGUARD_* entries
// into the job's spank env; in 22.05 that env reaches a node only in the job prolog/epilog
// (as SPANK_SCALEGUARD_*), never the tasks of an srun-launched job. So the prolog (root,
// once per node and job) saves the entries to <plan_dir>/<job id>, task_init reads them, the
// epilog removes the file. The prolog also saves the job's first node and its NodeAddr to
// <plan_dir>/<job id>.addr: one slurmctld RPC per node, not one per task, for MASTER_ADDR.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>

#include "plugin.h"
#include "scaleguard/nccl_env.h"

extern char** environ;

namespace scaleguard::spank {
namespace {

constexpr std::size_t kMaxLine = 512;  // job_submit/scaleguard's bound per plan value
constexpr std::size_t kMaxEntries = 64;

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

// Writes `text` to `path` in plan_dir, atomically. Root writes here: the directory must be
// root's and writable by nobody else, or a user could swap in files for other jobs.
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
  const bool written = fd >= 0 && fchmod(fd, 0644) == 0 &&
                       write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (fd >= 0) close(fd);
  if (!written || rename(tmp.c_str(), path.c_str()) != 0) {
    if (fd >= 0) unlink(tmp.c_str());
    slurm_error("scaleguard: cannot write %s", path.c_str());
    return false;
  }
  return true;
}

// "<first node> <its NodeAddr>" of the job, when slurmctld tells it.
bool save_address(const std::string& job) {
  const char* nodes = std::getenv("SLURM_JOB_NODELIST");
  if (!nodes) nodes = std::getenv("SLURM_NODELIST");  // 22.05's name in the prolog environment
  const auto first = first_host(nodes ? nodes : "");
  if (!first.ok()) return slurm_info("scaleguard: prolog: %s", first.error().str().c_str()), true;
  const std::string addr = node_address(*first);
  if (addr.empty()) return slurm_info("scaleguard: prolog: no NodeAddr for %s", first->c_str()), true;
  return write_root_file(addr_file(job), *first + " " + addr + "\n");
}

}  // namespace

int save_plan() {
  const std::string job = job_id();
  if (job.empty()) return slurm_error("scaleguard: prolog without a usable SLURM_JOB_ID"), kFail;
  if (!save_address(job)) return kFail;
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
  }
  return 0;
}

std::string saved_address(const std::string& job, const std::string& node) {
  std::ifstream in(addr_file(job));
  std::string saved_node, addr;
  if (!(in >> saved_node >> addr) || saved_node != node || !plain_address(addr)) return "";
  return addr;
}

std::vector<std::pair<std::string, std::string>> saved_plan(const std::string& job) {
  std::vector<std::pair<std::string, std::string>> plan;
  std::ifstream in(plan_file(job));
  std::string line;
  while (plan.size() < kMaxEntries && std::getline(in, line)) {
    const auto eq = line.find('=');
    if (eq != std::string::npos && plan_entry(line.substr(0, eq), line.substr(eq + 1)))
      plan.emplace_back(line.substr(0, eq), line.substr(eq + 1));
  }
  return plan;
}

}  // namespace scaleguard::spank
