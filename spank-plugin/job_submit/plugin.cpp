// job_submit/scaleguard: the Slurm entry points. slurmctld calls job_submit() for every
// sbatch, srun, salloc, `sbatch --test-only` and scrontab submission and job_modify() for
// updates; both ask the planner's decide() with the site policy and apply its decision.
// No exception crosses into slurmctld: every entry point catches everything.
#include <exception>
#include <memory>

#include "apply.h"
#include "policy.h"
#include "request.h"
#include "settings.h"
#include "slurm_api.h"
#include "text.h"

// The plugin is built with hidden visibility; these are the symbols slurmctld looks up.
#define SG_EXPORT __attribute__((visibility("default")))
extern "C" {
SG_EXPORT extern const char plugin_name[] = "scaleguard: distributed-training policy for GPU jobs";
SG_EXPORT extern const char plugin_type[] = "job_submit/scaleguard";
SG_EXPORT extern const uint32_t plugin_version = SLURM_VERSION_NUMBER;
SG_EXPORT int init(void);
SG_EXPORT int fini(void);
SG_EXPORT int job_submit(job_desc_msg_t* job_desc, uint32_t submit_uid, char** err_msg);
SG_EXPORT int job_modify(job_desc_msg_t* job_desc, job_record_t* job_ptr, uint32_t submit_uid);
}

namespace {

// Created in init(), destroyed in fini(); slurmctld calls neither concurrently with jobs.
std::unique_ptr<sg_slurm::PolicyHolder> g_policy;

int internal_error(const char* where, const char* what, char** err_msg) {
  slurm_error("job_submit/scaleguard: %s: internal error: %s", where, what);
  if (err_msg) *err_msg = slurm_xstrdup("scaleguard: internal error, job not judged; see slurmctld log");
  return SLURM_ERROR;
}

// A submission with GPUs but no judgement would bypass the policy: refuse on any failure.
int judge(job_desc_msg_t* job, uint32_t submit_uid, char** err_msg) {
  auto policy = g_policy ? g_policy->current() : nullptr;
  if (!policy) return internal_error("job_submit", "no policy loaded", err_msg);
  scaleguard::JobRequest request;
  sg_slurm::RequestError error{};
  if (!sg_slurm::read_request(*job, submit_uid, *policy, &request, &error)) {
    *err_msg = sg_slurm::xstr(error.message);
    return error.code;
  }
  auto decision = scaleguard::decide(request, *policy);
  slurm_debug("job_submit/scaleguard: uid %u: %s: %s", submit_uid,
              scaleguard::to_string(decision.action), decision.summary.c_str());
  return sg_slurm::apply_decision(decision, job, err_msg);
}

}  // namespace

extern "C" int init(void) {
  try {
    auto settings = sg_slurm::load_settings(slurm_conf.slurm_conf ? slurm_conf.slurm_conf : "");
    if (!settings) {
      slurm_error("job_submit/scaleguard: %s", settings.error().str().c_str());
      return SLURM_ERROR;
    }
    auto holder = std::make_unique<sg_slurm::PolicyHolder>();
    auto loaded = holder->load(*settings);
    if (!loaded) {
      slurm_error("job_submit/scaleguard: cannot load the policy: %s", loaded.error().str().c_str());
      return SLURM_ERROR;
    }
    g_policy = std::move(holder);
    slurm_info("job_submit/scaleguard: policy %s (settings %s)", settings->policy.c_str(),
               settings->file.c_str());
    return SLURM_SUCCESS;
  } catch (const std::exception& e) {
    return internal_error("init", e.what(), nullptr);
  } catch (...) {
    return internal_error("init", "unknown exception", nullptr);
  }
}

extern "C" int fini(void) {
  try {
    g_policy.reset();
  } catch (...) {
  }
  return SLURM_SUCCESS;
}

extern "C" int job_submit(job_desc_msg_t* job_desc, uint32_t submit_uid, char** err_msg) {
  try {
    return judge(job_desc, submit_uid, err_msg);
  } catch (const std::exception& e) {
    return internal_error("job_submit", e.what(), err_msg);
  } catch (...) {
    return internal_error("job_submit", "unknown exception", err_msg);
  }
}

// 22.05 passes only the changed fields and an opaque job_record_t: the job's current GPUs,
// time limit and forwarded intent are not visible here. An update that changes the GPU request
// is judged on the fields it carries (time and nodes from the update, else the partition's
// defaults); other updates pass (users may only lower time limits; operators are trusted).
extern "C" int job_modify(job_desc_msg_t* job_desc, job_record_t*, uint32_t submit_uid) {
  try {
    if (!job_desc) return SLURM_SUCCESS;
    bool gpus_changed = job_desc->tres_per_job || job_desc->tres_per_node ||
                        job_desc->tres_per_task || job_desc->tres_per_socket;
    if (!gpus_changed) return SLURM_SUCCESS;
    auto policy = g_policy ? g_policy->current() : nullptr;
    if (!policy) return internal_error("job_modify", "no policy loaded", nullptr);
    const std::string job = job_desc->job_id_str ? sg_slurm::one_line(job_desc->job_id_str, 64)
                            : job_desc->job_id != NO_VAL ? std::to_string(job_desc->job_id)
                                                         : "?";
    scaleguard::JobRequest request;
    sg_slurm::RequestError error{};
    if (!sg_slurm::read_request(*job_desc, submit_uid, *policy, &request, &error)) {
      slurm_info("job_submit/scaleguard: update of job %s refused: %s", job.c_str(),
                 error.message.c_str());
      return error.code;
    }
    return sg_slurm::apply_to_update(scaleguard::decide(request, *policy), job, submit_uid);
  } catch (const std::exception& e) {
    return internal_error("job_modify", e.what(), nullptr);
  } catch (...) {
    return internal_error("job_modify", "unknown exception", nullptr);
  }
}
