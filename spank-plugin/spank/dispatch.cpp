// The SPANK entry points Slurm looks up: each switches on the context and calls the file
// for that context. Only these symbols are exported (scaleguard.lds).
#include "plugin.h"

using namespace scaleguard::spank;

namespace {
bool configured(int ac, char** av) {
  std::string error;
  if (load_config(ac, av, error)) return true;
  slurm_error("scaleguard: plugstack.conf: %s", error.c_str());
  return false;
}
}  // namespace

extern "C" {

// SPANK_PLUGIN(scaleguard, 1), spelled out: const globals need `extern` in C++ to be exported.
extern const char plugin_name[] = "scaleguard";
extern const char plugin_type[] = "spank";
extern const unsigned int plugin_version = SLURM_VERSION_NUMBER;
extern const unsigned int spank_plugin_version = 1;

int slurm_spank_init(spank_t sp, int ac, char** av) {
  return guarded("init", [&]() -> int {
    if (!configured(ac, av)) return kFail;
    switch (spank_context()) {
      case S_CTX_LOCAL:
      case S_CTX_ALLOCATOR:
        return submit_init(sp);
      case S_CTX_REMOTE:
        return remote_init(sp);
      default:  // slurmd: options only, so forwarded values parse everywhere
        return register_options(sp);
    }
  });
}

int slurm_spank_init_post_opt(spank_t sp, int, char**) {
  return guarded("init_post_opt", [&]() -> int {
    const auto ctx = spank_context();
    return ctx == S_CTX_LOCAL || ctx == S_CTX_ALLOCATOR ? submit_post_opt(sp) : 0;
  });
}

// `slurmstepd spank prolog|epilog` (root, once per node and job): the controller's plan.
// slurm_spank_init is not called there (seen on 22.05): read the arguments here.
int slurm_spank_job_prolog(spank_t, int ac, char** av) {
  return guarded("job_prolog", [&]() -> int { return configured(ac, av) ? save_plan() : kFail; });
}
int slurm_spank_job_epilog(spank_t, int ac, char** av) {
  return guarded("job_epilog", [&]() -> int { return configured(ac, av) ? drop_plan() : kFail; });
}

// slurmstepd, once per task, in the task's process, as root: reads the plan files (root's, 0600).
int slurm_spank_task_init_privileged(spank_t sp, int, char**) {
  return guarded("task_init_privileged",
                 [&]() -> int { return spank_context() == S_CTX_REMOTE ? remote_task_init_privileged(sp) : 0; });
}

// slurmstepd, once per task, in the task's process (already the job's user) just before exec.
int slurm_spank_task_init(spank_t sp, int, char**) {
  return guarded("task_init", [&]() -> int { return spank_context() == S_CTX_REMOTE ? remote_task_init(sp) : 0; });
}

}  // extern "C"
