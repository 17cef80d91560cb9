// scaleguard::Decision -> job_desc_msg_t: reject with the decision's message, or rewrite the
// request (GPUs, nodes, time, partition, requeue and a USR1 warning signal), then annotate
// the job (comment, plan in the batch environment and the spank env) and tell the user.
#pragma once
#include <string>

#include "scaleguard/decide.h"
#include "text.h"
#include "slurm_api.h"

namespace sg_slurm {

// The code a policy refusal returns. sbatch prints our message, then "Batch job submission
// failed: " + this code's text: ESLURM_ACCOUNTING_POLICY would add "Job violates
// accounting/QOS policy (job submit limit, user's size and/or time limits)", which sends users
// to the wrong admin; "Access/permission denied" is what the policy does.
constexpr int kRefused = ESLURM_ACCESS_DENIED;

struct Applied {
  int rc = SLURM_SUCCESS;
  std::string changes;  // what a rewrite or bound changed, for the log and the audit
};

// Applies a submission's decision (nothing in shadow mode): refuse with the message, or
// rewrite, bound and annotate the job (AdminComment with the plan and the judged request
// under decision `id`, plan variables) and set *err_msg (Slurm-allocated) to the plan line.
Applied apply_decision(const scaleguard::Decision& decision, const scaleguard::JobRequest& request,
                       const std::string& id, job_desc_msg_t* job, char** err_msg);

// The AdminComment after an accepted update: the summary and the merged request's record.
std::string record_after_update(const scaleguard::JobRequest& merged, const std::string& id,
                                const std::string& summary, const std::string& existing);

}  // namespace sg_slurm
