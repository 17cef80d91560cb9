// scaleguard SPANK plugin: what the per-context files share. The dispatcher (dispatch.cpp)
// calls one file per context: submit.cpp (srun/sbatch/salloc), remote.cpp (slurmstepd).
#pragma once
extern "C" {
#include <slurm/slurm.h>
#include <slurm/spank.h>
}

#include <sys/types.h>

#include <cstddef>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace scaleguard {
struct Policy;
}

namespace scaleguard::spank {

// plugstack.conf arguments (config.cpp): policy= catalog= sysfs= profiles= plan_dir=.
struct Config {
  std::string policy;    // required: checkpoint roots, catalog for model validation
  std::string catalog;   // optional override of the policy's catalog
  std::string sysfs = "/";  // root for NCCL/EFA detection; %n = Slurm node name
  std::string profiles;  // configs/nccl directory
  std::string plan_dir = "/run/scaleguard";  // per-job plan files (plan.cpp), root-owned
};
// Parses the arguments into config(). Unknown key or malformed argument -> false with the
// reason, and the plugin refuses to load (`required` in plugstack.conf makes that fatal).
bool load_config(int ac, char** av, std::string& error);
const Config& config();

// The --train-* options (options.cpp): one table, registered in every context.
struct Option {
  const char* name;     // "train-model"
  const char* env;      // "SCALEGUARD_TRAIN_MODEL": default when the option is absent
  const char* arginfo;  // shown by --help
  const char* usage;
  const char* accepted; // the accepted forms, quoted in every error
  int has_arg = 1;      // 0: a flag (--train-probe), its value is "1"
};
// The policy (plugstack.conf `policy=`), loaded once per process when first needed; nullptr
// with `error` when it cannot be loaded.
std::shared_ptr<const scaleguard::Policy> policy(std::string& error);
const std::vector<Option>& options();
int register_options(spank_t sp);
// Value given for option `name` (command line, #SBATCH, or remote forwarding); empty = none.
std::string option_value(const std::string& name);
// Validates `value` for `opt`; on failure `error` names the option (or `source`) and the
// accepted forms. Never echoes more than a short, sanitised prefix of the value.
bool validate(const Option& opt, const std::string& value, const std::string& source, std::string& error);
// Name Slurm 22.05 gives a forwarded option in the job's spank env (job_submit reads it):
// _SLURM_SPANK_OPTION_scaleguard_train_model (plugin and option name, '-' -> '_').
std::string forwarded_name(const Option& opt);

// Checkpoint directory rules (ckpt_dir.cpp). check_ckpt_dir: the spelling, and where the path
// resolves to (for a clear message). walk_ckpt_dir: below the checkpoint root, component by
// component on open descriptors, every directory is real (no symlink), the job's user's own
// (root's on the way to it), and not writable by every user (on the way to it: unless
// sticky); with `create` the missing ones are made as the job's user, mode 0750; without,
// the walk stops where the path stops existing (the submitting host's check).
bool check_ckpt_dir(const std::string& path, const std::vector<std::string>& roots, std::string& error);
bool walk_ckpt_dir(const std::string& path, const std::vector<std::string>& roots, uid_t uid, gid_t gid,
                   bool create, std::string& error);
bool create_ckpt_dir(const std::string& path, const std::vector<std::string>& roots, uid_t uid, gid_t gid,
                     std::string& error);
// The policy's checkpoint roots (loads policy= once per process).
bool checkpoint_roots(std::vector<std::string>& roots, std::string& error);

// What every callback returns on failure. Not ESPANK_ERROR: that is 3000, and sbatch, srun
// and slurmstepd test `rc < 0` (22.05 sbatch.c, slurmstepd mgr.c): a positive code only
// logs "failed with rc=3000" and the submission goes ahead.
constexpr int kFail = -1;

// The controller's plan for a job and its nodes' addresses (plan.cpp): saved by the job
// prolog (root-owned, mode 0600), read as root by task_init_privileged (load_saved), used by
// task_init after Slurm has dropped to the job's user.
int save_plan();
int drop_plan();
int load_saved(const std::string& job);
std::vector<std::pair<std::string, std::string>> saved_plan(const std::string& job);
// <plan_dir>/<job>.user: made (root) for the job's user, 0700, when the job has a plan; "" if
// none or on an error (logged). The tasks write the plan's JSON file into it.
std::string make_user_dir(const std::string& job, uid_t uid, gid_t gid);
// The address the prolog saved for `node` of the job; "" if none.
std::string saved_address(const std::string& job, const std::string& node);

// NodeAddr without slurmctld (node_addr.cpp): from SLURM_NODE_ALIASES, then the NodeName lines
// of `slurm_conf`; nodes with neither are left out (the caller uses the node name).
constexpr std::size_t kMaxNodes = 100000;
std::map<std::string, std::string> node_addresses(const std::vector<std::string>& nodes, const std::string& aliases,
                                                  const std::string& slurm_conf);
std::map<std::string, std::string> alias_addresses(const std::string& aliases);
std::vector<std::string> expand_hosts(const std::string& hostlist);  // Slurm's hostlist syntax
bool plain_address(const std::string& addr);

// Per-context entry points (return 0 or kFail).
int submit_init(spank_t sp);
int submit_post_opt(spank_t sp);
int remote_init(spank_t sp);
int remote_task_init_privileged(spank_t sp);
int remote_task_init(spank_t sp);

// Runs `body` and turns any exception into kFail with a slurm_error line: nothing
// throws across the C boundary into slurmstepd or sbatch.
template <class F>
int guarded(const char* where, F&& body) noexcept {
  try {
    return body();
  } catch (const std::exception& e) {
    slurm_error("scaleguard: %s: internal error: %s", where, e.what());
  } catch (...) {
    slurm_error("scaleguard: %s: internal error", where);
  }
  return kFail;
}

}  // namespace scaleguard::spank
