// job_desc_msg_t -> scaleguard::JobRequest: the GPU request (tres_per_job/node/task/socket),
// nodes, tasks, time limit and partition as Slurm sends them, plus the training intent the
// SPANK plugin forwarded in the job's spank env. Every value is bounded and validated here;
// forged spank env entries are read like real ones (the controller judges what it receives).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "scaleguard/decide.h"
#include "scaleguard/policy.h"
#include "slurm_api.h"

namespace sg_slurm {

// Forwarded SPANK options appear as _SLURM_SPANK_OPTION_<plugin>_<option>=value, with '-' in
// the option name turned into '_'.
constexpr const char* kSpankOptionPrefix = "_SLURM_SPANK_OPTION_scaleguard_";

struct RequestError {
  int code;             // ESLURM_INVALID_GRES (GPU request) or ESPANK_BAD_ARG (intent)
  std::string message;  // names the field and the accepted forms
};

// Reads `job` (a submission, or the changed fields of an update: unset ones stay 0/empty).
// On success `*out` holds the request and `*partitions` (when given) the --partition list,
// each name once, in order (`out->partition` is it comma-joined; partitions.h takes it on);
// otherwise the error to return to the user.
bool read_request(const job_desc_msg_t& job, uint32_t submit_uid,
                  const scaleguard::Policy& policy, scaleguard::JobRequest* out,
                  RequestError* error, std::vector<std::string>* partitions = nullptr);

// GPUs Slurm derives after job_submit from --ntasks-per-gpu (ntasks_per_tres) when no TRES
// field asks for a GPU: r->ntasks_per_gpu is kept only then, and r->gpus_total becomes what
// slurmctld will create (gres/gpu:ntasks/N). `update`: the request is a record with an update
// laid over it, judged for every way the update can re-derive the count.
void derive_gpus(scaleguard::JobRequest* r, bool update);

}  // namespace sg_slurm
