// uid -> user name for slurmctld: getpwuid_r behind a small cache. A name service lookup
// (sssd, LDAP) can take milliseconds or stall while the directory is slow, and job_submit
// and job_modify run with slurmctld's job write lock held; each uid is looked up at most
// once per kTtlSeconds.
#pragma once
#include <cstdint>
#include <string>

namespace sg_slurm {

// The user's name, or "" when the uid has none (a miss is cached too). Thread-safe.
std::string user_name(uint32_t uid);

}  // namespace sg_slurm
