// scaleguard::Decision -> job_desc_msg_t: reject with the decision's message, or rewrite the
// request (GPUs, nodes, time, partition, requeue and a USR1 warning signal), then annotate
// the job (comment, plan in the batch environment and the spank env) and tell the user.
#pragma once
#include <string>

#include "scaleguard/decide.h"
#include "slurm_api.h"

namespace sg_slurm {

// Returns the Slurm return code for job_submit; sets *err_msg (Slurm-allocated) to what the
// user reads: the refusal, or the one-line plan.
int apply_decision(const scaleguard::Decision& decision, job_desc_msg_t* job, char** err_msg);

// The same for an update (job_modify has no err_msg in 22.05: the text goes to the log).
// `job` names the job for the log (an update carries its id as a string).
int apply_to_update(const scaleguard::Decision& decision, const std::string& job,
                    uint32_t submit_uid);

}  // namespace sg_slurm
