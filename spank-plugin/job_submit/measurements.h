// The probe store's measurements for a job (issue 16): read with the bounded, cached reader of
// probe/ (a submission whose store directory did not change costs one stat) and attached to the
// JobRequest, so that decide() acts on what a probe measured. Never throws.
#pragma once
#include <cstdint>

#include "scaleguard/decide.h"
#include "scaleguard/policy.h"

namespace sg_slurm {

// Fills job->measurements and job->now when the policy names a probe_store and the job has a
// model. Files of root, SlurmUser and trusted_users count for everyone, `uid`'s own for it.
void attach_measurements(const scaleguard::Policy& policy, uint32_t uid, scaleguard::JobRequest* job) noexcept;

}  // namespace sg_slurm
