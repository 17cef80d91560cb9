// Every difference between the Slurm releases the plugins build against (22.05 to 25.11),
// keyed on SLURM_VERSION_NUMBER from <slurm/slurm.h>. No other file tests a Slurm version.
//
// job_record_t is private to slurmctld; job_modify() receives one, and the plugin needs one
// field of it: AdminComment, where job_submit kept what it judged. Its position is read from
// each release's src/common/job_record.h (src/slurmctld/slurmctld.h in 22.05); the record's
// magic cookie is checked before the field is touched, so a release whose layout differs
// makes the plugin refuse to read (and fail closed), never read garbage.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

extern "C" {
#include <slurm/slurm.h>
}

namespace sg_shim {

constexpr uint32_t kJobMagic = 0xf0b7392c;  // JOB_MAGIC, unchanged 22.05 .. 25.11

#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
// 25.11 puts slurm_step_id_t {uint64 sluid; uint32 job_id, step_het_comp, step_id} first.
constexpr size_t kMagicOffset = 24, kAdminCommentOffset = 40;
#elif SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(22, 5, 0)
// 22.05 .. 25.05: uint32 magic; char *account; char *admin_comment; ...
constexpr size_t kMagicOffset = 0, kAdminCommentOffset = 16;
#else
#error "Slurm releases before 22.05 are not supported"
#endif

// The job record's AdminComment slot, or nullptr when the record does not look like one.
inline char** admin_comment_slot(void* job_record) {
  if (!job_record) return nullptr;
  uint32_t magic = 0;
  std::memcpy(&magic, static_cast<char*>(job_record) + kMagicOffset, sizeof magic);
  if (magic != kJobMagic) return nullptr;
  return reinterpret_cast<char**>(static_cast<char*>(job_record) + kAdminCommentOffset);
}

}  // namespace sg_shim
