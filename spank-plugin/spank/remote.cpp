// slurmstepd (remote context), in each task's process just before exec, as the job's user:
// the checkpoint directory, then the task's environment: the plan from slurmctld, rank and
// rendezvous variables, and the NCCL/EFA profile for this node. A user's variable wins.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "plugin.h"
#include "scaleguard/nccl_env.h"
#include "scaleguard/policy.h"

namespace scaleguard::spank {
namespace {

// Marks what this plugin injected: "<job>.<step> NAME=<hash> ...". A later step of the same
// job inherits the batch script's environment; a value that still hashes to what we set
// there is ours to recompute (this node's NCCL profile, this step's ranks), not the user's.
constexpr const char* kMarker = "SCALEGUARD_INJECTED";

std::string hash(const std::string& value) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a 64
  for (unsigned char c : value) h = (h ^ c) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

Env job_env(spank_t sp) {
  Env env;
  char** array = nullptr;
  if (spank_get_item(sp, S_JOB_ENV, &array) != ESPANK_SUCCESS || !array) return env;
  for (char** e = array; *e; ++e) {
    const std::string entry = *e;
    const auto eq = entry.find('=');
    if (eq != std::string::npos) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

std::string get(const Env& env, const std::string& name) {
  const auto it = env.find(name);
  return it == env.end() ? std::string() : it->second;
}

// Forgets inherited values we injected in another step, so they are recomputed here;
// returns their names (those this step does not set again are removed from the task).
std::vector<std::string> drop_inherited(Env& env, const std::string& this_step) {
  std::vector<std::string> dropped;
  std::string word;
  std::istringstream marker(get(env, kMarker));
  if (!(marker >> word) || word == this_step) return dropped;
  while (marker >> word) {
    const auto eq = word.find('=');
    const auto it = env.find(word.substr(0, eq));
    if (eq != std::string::npos && it != env.end() && hash(it->second) == word.substr(eq + 1)) {
      dropped.push_back(it->first);
      env.erase(it);
    }
  }
  return dropped;
}

template <class T>
std::string item(spank_t sp, spank_item_t what) {
  T value{};
  if (spank_get_item(sp, what, &value) != ESPANK_SUCCESS) throw std::runtime_error("spank_get_item failed");
  return std::to_string(value);
}

bool nccl_vars(const Env& env, EnvList& out, std::string& error) {
  NodeProbe probe;
  probe.node_name = get(env, "SLURMD_NODENAME");
  probe.root = config().sysfs;
  if (const auto at = probe.root.find("%n"); at != std::string::npos) {
    const std::string& n = probe.node_name;  // becomes a path component
    const bool plain = !n.empty() && n.size() < 256 && n != "." && n != ".." &&
                       std::all_of(n.begin(), n.end(), [](char c) {
                         return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
                       });
    if (!plain) return error = "no usable SLURMD_NODENAME for sysfs=%n", false;
    probe.root.replace(at, 2, probe.node_name);
  }
  const NodeInfo node = detect_node(probe);
  const auto profile = load_profile(config().profiles, profile_family(node));
  if (!profile.ok()) return error = "NCCL profile: " + profile.error().str(), false;
  for (auto& kv : nccl_env(node, *profile, env)) out.push_back(std::move(kv));
  return true;
}

// Here rather than in user_init: in 22.05 a failing user_init makes slurmd report "batch job
// complete failure" and DRAIN the node (and the job shows COMPLETED, exit 0) for what is the
// user's mistake; a failing task_init fails only the task (exit 1, message in its output).
bool make_ckpt_dir(spank_t sp, const Env& env, std::string& dir) {
  dir = option_value("train-ckpt-dir");
  for (const char* name : {"SCALEGUARD_CKPT_DIR", "SCALEGUARD_TRAIN_CKPT_DIR"})
    if (dir.empty()) dir = get(env, name);
  if (dir.empty()) return true;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<std::string> roots;
  std::string error;
  if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS || spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS)
    error = "cannot read the job's uid/gid";
  else if (checkpoint_roots(roots, error) && check_ckpt_dir(dir, roots, error) &&
           create_ckpt_dir(dir, roots, uid, gid, error))
    return true;
  slurm_error("scaleguard: checkpoint directory '%.200s': %s", dir.c_str(), error.c_str());
  return false;
}

// The step's first node's NodeAddr, never asked of slurmctld: saved by the job prolog for
// every node of the job (node_addr.cpp), else from the job's SLURM_NODE_ALIASES; the node
// name when neither knows it.
std::string master_addr(const Env& env, const std::string& job, const std::string& first) {
  std::string addr = saved_address(job, first);
  if (addr.empty()) {
    const auto aliases = alias_addresses(get(env, "SLURM_NODE_ALIASES"));
    if (const auto it = aliases.find(first); it != aliases.end()) addr = it->second;
  }
  if (!addr.empty()) return addr;
  slurm_info("scaleguard: no NodeAddr for %s: MASTER_ADDR is the node name", first.c_str());
  return first;
}

// <plan_dir>/<job>.user, made by task_init_privileged (root) for this task's job; "" = none.
std::string plan_user_dir;

bool digits(const std::string& s) {
  return !s.empty() && s.size() < 19 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A JSON string: plan values are bounded and free of control characters (plan.cpp), so only
// the quote and the backslash need escaping.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// The plan as one JSON document, for trainers that read a file rather than SCALEGUARD_*:
// degrees, mesh order (outermost first: world rank = (pp * dp + dp_rank) * tp + tp_rank, as
// scaleguard-run forms its grid), batch split, bucket, checkpoints, restart count.
std::string plan_json(const Env& plan, const std::string& job, const std::string& restarts) {
  const auto n = [&](const char* name, const char* fallback) {
    const std::string v = get(plan, name);
    return digits(v) ? v : std::string(fallback);
  };
  const std::string bucket = get(plan, "SCALEGUARD_BUCKET_MB");
  const bool bucket_ok = !bucket.empty() && bucket.size() < 24 &&
                         std::all_of(bucket.begin(), bucket.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; }) &&
                         bucket.front() != '.' && bucket.back() != '.' && std::count(bucket.begin(), bucket.end(), '.') <= 1;
  const std::string ckpt = get(plan, "SCALEGUARD_CKPT_DIR");
  std::string j = "{\n";
  j += "  \"version\": 1,\n";
  j += "  \"job_id\": " + job + ",\n";
  j += "  \"plan\": " + quoted(get(plan, "SCALEGUARD_PLAN")) + ",\n";
  j += "  \"strategy\": " + quoted(get(plan, "SCALEGUARD_STRATEGY")) + ",\n";
  j += "  \"degrees\": {\"pp\": " + n("SCALEGUARD_PP", "1") + ", \"dp\": " + n("SCALEGUARD_DP", "1") +
       ", \"tp\": " + n("SCALEGUARD_TP", "1") + "},\n";
  j += "  \"mesh_order\": [\"pp\", \"dp\", \"tp\"],\n";
  j += "  \"zero\": " + n("SCALEGUARD_ZERO", "0") + ",\n";
  j += "  \"micro_batch\": " + n("SCALEGUARD_MICRO_BATCH", "1") + ",\n";
  j += "  \"accumulation\": " + n("SCALEGUARD_ACCUMULATION", "1") + ",\n";
  j += "  \"bucket_mb\": " + (bucket_ok ? bucket : std::string("null")) + ",\n";
  j += "  \"recompute\": " + quoted(get(plan, "SCALEGUARD_RECOMPUTE")) + ",\n";
  j += "  \"gpus\": " + n("SCALEGUARD_GPUS", "0") + ",\n";
  j += "  \"nodes\": " + n("SCALEGUARD_NODES", "0") + ",\n";
  j += "  \"ckpt_dir\": " + (ckpt.empty() ? std::string("null") : quoted(ckpt)) + ",\n";
  j += "  \"ckpt_interval_s\": " + n("SCALEGUARD_CKPT_INTERVAL_S", "0") + ",\n";
  j += "  \"restart_count\": " + restarts + "\n}\n";
  return j;
}

// Writes plan.json into the job's user directory as this task's user (task_init has dropped
// to it): the directory is opened without following links and must be ours; the file is
// written under a name unique to this process and renamed into place, so tasks writing the
// same job's plan at once never see a partial file. Returns the path, "" on failure.
std::string write_plan_file(const std::string& text) {
  if (plan_user_dir.empty()) return "";
  const int dir = open(plan_user_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st {};
  if (dir < 0 || fstat(dir, &st) != 0 || st.st_uid != geteuid()) {
    if (dir >= 0) close(dir);
    slurm_error("scaleguard: %s is not this task's user's directory: no plan file", plan_user_dir.c_str());
    return "";
  }
  const std::string tmp = ".plan.json." + std::to_string(getpid());
  const int fd = openat(dir, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  bool ok = fd >= 0 && write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (fd >= 0) ok = close(fd) == 0 && ok;
  ok = ok && renameat(dir, tmp.c_str(), dir, "plan.json") == 0;
  if (!ok) {
    slurm_error("scaleguard: cannot write %s/plan.json: %m", plan_user_dir.c_str());
    unlinkat(dir, tmp.c_str(), 0);
  }
  close(dir);
  return ok ? plan_user_dir + "/plan.json" : "";
}

// What the ecosystem reads: torchelastic's run id and restart count (with GROUP_RANK, Lightning
// takes the job for a torchrun one and follows RANK/WORLD_SIZE), Accelerate's
// ParallelismConfig sizes and gradient accumulation, and the plan file.
void ecosystem_vars(const Env& env, const Env& plan, const std::string& job, const std::string& node_id,
                    EnvList& want) {
  std::string restarts = get(env, "SLURM_RESTART_COUNT");
  if (!digits(restarts)) restarts = "0";
  want.emplace_back("TORCHELASTIC_RUN_ID", job);
  want.emplace_back("TORCHELASTIC_RESTART_COUNT", restarts);
  want.emplace_back("GROUP_RANK", node_id);
  if (get(plan, "SCALEGUARD_STRATEGY").empty()) return;  // no plan: nothing more to follow
  const auto degree = [&](const char* name) {
    const std::string v = get(plan, name);
    return digits(v) ? std::stol(v) : 1L;
  };
  const long tp = degree("SCALEGUARD_TP"), pp = degree("SCALEGUARD_PP"), dp = degree("SCALEGUARD_DP");
  const bool sharded = get(plan, "SCALEGUARD_ZERO").empty() ? false : degree("SCALEGUARD_ZERO") > 0;
  // Accelerate has no pipeline dimension, and refuses tp with plain (unsharded) replication:
  // such plans get no ParallelismConfig rather than one that would fail or mean another layout.
  if (pp == 1 && !(tp > 1 && dp > 1 && !sharded)) {
    want.emplace_back("ACCELERATE_USE_PARALLELISM_CONFIG", "true");
    want.emplace_back("PARALLELISM_CONFIG_DP_REPLICATE_SIZE", sharded ? "1" : std::to_string(dp));
    want.emplace_back("PARALLELISM_CONFIG_DP_SHARD_SIZE", sharded ? std::to_string(dp) : "1");
    want.emplace_back("PARALLELISM_CONFIG_TP_SIZE", std::to_string(tp));
    want.emplace_back("PARALLELISM_CONFIG_CP_SIZE", "1");
  }
  if (const std::string acc = get(plan, "SCALEGUARD_ACCUMULATION"); digits(acc))
    want.emplace_back("ACCELERATE_GRADIENT_ACCUMULATION_STEPS", acc);
  if (const std::string file = write_plan_file(plan_json(plan, job, restarts)); !file.empty())
    want.emplace_back("SCALEGUARD_PLAN_FILE", file);
}

}  // namespace

int remote_init(spank_t sp) { return register_options(sp); }

// Root, in the task's process before Slurm drops to the job's user: the only moment the
// plan files (root's, 0600) can be read for the task.
// Also makes the job's user's directory for the plan file (plan.cpp), which only root can.
int remote_task_init_privileged(spank_t sp) {
  const std::string job = item<uint32_t>(sp, S_JOB_ID);
  if (load_saved(job) != 0) return kFail;
  uid_t uid = 0;
  gid_t gid = 0;
  plan_user_dir.clear();
  if (spank_get_item(sp, S_JOB_UID, &uid) == ESPANK_SUCCESS && spank_get_item(sp, S_JOB_GID, &gid) == ESPANK_SUCCESS)
    plan_user_dir = make_user_dir(job, uid, gid);
  return 0;
}

// Issue 25, class 7: a --requeue batch job can be requeued by its owner again and again (also
// after it completed), and a scrontab entry runs again by the same requeue; each run is judged
// per run. The policy's max_job_runs bounds the runs over the job's life. Slurm calls no
// job_submit hook on a requeue, so the batch step checks its run before the script starts:
// SLURM_RESTART_COUNT is slurmctld's count, which slurmstepd sets after the user's environment
// (a user can raise it, never lower it). A run past the limit ends the job at once (FAILED),
// before any of its code runs; every further requeue does the same.
bool run_allowed(const Env& env, const std::string& job) {
  const std::string restarts = get(env, "SLURM_RESTART_COUNT");
  if (restarts.empty()) return true;  // the first run
  long n = -1;
  if (restarts.size() <= 9 && std::all_of(restarts.begin(), restarts.end(), ::isdigit)) n = std::stol(restarts);
  std::string error;
  const auto p = policy(error);
  if (!p) {
    slurm_error("scaleguard: job %s: cannot load the policy to check its runs (max_job_runs): %s", job.c_str(),
                error.c_str());
    return false;
  }
  if (n < 0) {
    slurm_error("scaleguard: job %s: SLURM_RESTART_COUNT is not a count", job.c_str());
    return false;
  }
  if (p->max_job_runs > 0 && n + 1 > p->max_job_runs) {
    char why[256];
    std::snprintf(why, sizeof why,
                  "scaleguard: job %s: run %ld refused: the policy allows %d runs of one job (max_job_runs), requeues "
                  "included; submit a new job",
                  job.c_str(), n + 1, p->max_job_runs);
    slurm_error("%s", why);
    std::fprintf(stderr, "%s\n", why);  // the task's stderr is the job's error file by now: the user reads it there
    return false;
  }
  slurm_info("scaleguard: job %s: run %ld (max_job_runs %d)", job.c_str(), n + 1, p->max_job_runs);
  return true;
}

int remote_task_init(spank_t sp) {
  Env env = job_env(sp);
  {
    uint32_t step_id = 0;
    if (spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS) throw std::runtime_error("no step id");
    if (step_id == SLURM_BATCH_SCRIPT && !run_allowed(env, item<uint32_t>(sp, S_JOB_ID))) return kFail;
  }
  std::string ckpt_dir;
  if (!make_ckpt_dir(sp, env, ckpt_dir)) return kFail;
  const std::string job = item<uint32_t>(sp, S_JOB_ID);
  uint32_t step_id = 0;
  if (spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS) throw std::runtime_error("no step id");
  const std::string step = job + "." + std::to_string(step_id);
  const std::vector<std::string> inherited = drop_inherited(env, step);

  EnvList want;
  // The plan job_submit/scaleguard attached (saved by the job prolog on this node, read by
  // task_init_privileged).
  Env plan;
  for (auto& kv : saved_plan(job)) {
    plan[kv.first] = env.count(kv.first) ? env[kv.first] : kv.second;  // what the task will see
    want.push_back(std::move(kv));
  }
  if (!ckpt_dir.empty()) want.emplace_back("SCALEGUARD_CKPT_DIR", ckpt_dir), plan["SCALEGUARD_CKPT_DIR"] = ckpt_dir;
  // The batch script is one process whatever the job's task count; its steps get theirs.
  const bool batch = step_id == SLURM_BATCH_SCRIPT;
  want.emplace_back("RANK", batch ? "0" : item<uint32_t>(sp, S_TASK_GLOBAL_ID));
  want.emplace_back("LOCAL_RANK", batch ? "0" : item<int>(sp, S_TASK_ID));
  want.emplace_back("WORLD_SIZE", batch ? "1" : item<uint32_t>(sp, S_JOB_TOTAL_TASK_COUNT));
  want.emplace_back("LOCAL_WORLD_SIZE", batch ? "1" : item<uint32_t>(sp, S_JOB_LOCAL_TASK_COUNT));
  std::string nodes = get(env, "SLURM_STEP_NODELIST");
  if (nodes.empty()) nodes = get(env, "SLURM_JOB_NODELIST");
  if (const auto first = first_host(nodes); first.ok()) want.emplace_back("MASTER_ADDR", master_addr(env, job, *first));
  else slurm_info("scaleguard: MASTER_ADDR not set: %s", first.error().str().c_str());
  want.emplace_back("MASTER_PORT", std::to_string(master_port(static_cast<uint32_t>(std::stoul(job)))));
  ecosystem_vars(env, plan, job, batch ? "0" : item<uint32_t>(sp, S_JOB_NODEID), want);
  std::string error;
  if (!nccl_vars(env, want, error)) {
    slurm_error("scaleguard: %s", error.c_str());
    return kFail;
  }

  std::string marker = step;
  for (const auto& [name, value] : want) {
    // nccl_env already left out what the user set, except the list it prepends to.
    if (env.count(name) && name != "LD_LIBRARY_PATH") continue;
    if (spank_setenv(sp, name.c_str(), value.c_str(), 1) != ESPANK_SUCCESS) {
      slurm_error("scaleguard: cannot set %s", name.c_str());
      return kFail;
    }
    if (name != "LD_LIBRARY_PATH") marker += " " + name + "=" + hash(value);
    env[name] = value;  // the first of two candidates for one name wins
  }
  for (const auto& name : inherited)
    if (!env.count(name)) spank_unsetenv(sp, name.c_str());  // e.g. EFA settings on a TCP node
  spank_setenv(sp, kMarker, marker.c_str(), 1);
  return 0;
}

}  // namespace scaleguard::spank
