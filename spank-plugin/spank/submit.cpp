// Submitting host (srun: local context; sbatch/salloc: allocator context). Option values are
// checked in the option callback; here the SCALEGUARD_TRAIN_* environment defaults fill in
// what the command line left out, checked the same way and forwarded under the same name
// job_submit/scaleguard reads for a command-line value.
#include <cstdlib>

#include "plugin.h"

namespace scaleguard::spank {

int submit_init(spank_t sp) { return register_options(sp); }

int submit_post_opt(spank_t sp) {
  for (const Option& opt : options()) {
    if (!option_value(opt.name).empty()) continue;  // the command line wins
    const char* env = std::getenv(opt.env);
    if (!env) continue;
    std::string error;
    if (!validate(opt, env, opt.env, error)) {
      slurm_error("%s", error.c_str());
      return kFail;
    }
    if (spank_job_control_setenv(sp, forwarded_name(opt).c_str(), env, 1) != ESPANK_SUCCESS) {
      slurm_error("scaleguard: cannot forward %s to the job", opt.env);
      return kFail;
    }
  }
  return 0;
}

}  // namespace scaleguard::spank
