// Every difference between the Slurm releases the plugins build against (22.05 to 25.11),
// keyed on SLURM_VERSION_NUMBER from <slurm/slurm.h>. No other file tests a Slurm version.
// Checked against the headers and sources of 22.05.8 (Debian), 23.11.11, 24.05.8, 24.11.7,
// 25.05.8 and 25.11.7 (tests/slurm_release compiles both plugins against each); 23.02 is
// placed by SchedMD's notes only (no tarball here). Table: README.md beside this file.
//
//  - job_modify(): 22.05 passes (job_desc, job_ptr, submit_uid); 23.02+ adds char **err_msg,
//    which slurmctld sends back with the error (scontrol prints it as "error: <text>").
//  - job_desc_msg_t.job_id: gone in 25.11, which carries it in step_id.job_id.
//  - job_desc_msg_t.user_id when unset: NO_VAL in 22.05, SLURM_AUTH_NOBODY (99) in 23.11+
//    (both are treated as unset from 23.02 on).
//  - GPU TRES strings: "gres:gpu[:type]:N" in 22.05; "gres/gpu[:type]:N" in 23.11+ (what
//    sbatch/srun write: gres_prepend_tres_type; 23.11 NEWS "it should be TRESType/TRESName
//    not TRESType:TRESName"). slurmctld parses both (slurm_get_next_tres splits at the first
//    '/' or ':'); the plugin writes what that release's clients write.
//  - job_record_t (private to slurmctld): where admin_comment is (below).
//  - part_record_t (private to slurmctld): where alternate is (below).
//  - hostlist_t: a pointer typedef in 22.05, the struct in 23.11+ (hostlist_t *). The SPANK
//    plugin's one use (spank/node_addr.cpp) holds it in `auto*`, which fits both.
//  - SPANK: 23.11 adds spank_prepend_task_argv, 25.05 slurm_spank_init_failure_mode; nothing
//    the plugin uses changed, so nothing here.
//  - PrEp plugins: 22.05 and 23.11 load them in slurmctld and slurmd; 24.05+ in slurmstepd
//    too (prep_g_init in slurmstepd.c, after setproctitle has overwritten argv[0], so
//    program_invocation_short_name no longer names the program), where an init() that fails
//    is fatal and every job's launch fails. program_name() below asks the kernel instead.
//
// job_record_t is private to slurmctld; job_modify() receives one, and the plugin needs one
// field of it: AdminComment, where job_submit kept what it judged. Its position is read from
// each release's src/common/job_record.h (src/slurmctld/slurmctld.h up to 23.11); the record's
// magic cookie is checked before the field is touched, so a release whose layout differs
// makes the plugin refuse to read (and fail closed), never read garbage.
#pragma once
#include <errno.h>    // program_invocation_short_name

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

extern "C" {
#include <slurm/slurm.h>
}

#if SLURM_VERSION_NUMBER < SLURM_VERSION_NUM(22, 5, 0)
#error "Slurm releases before 22.05 are not supported"
#endif

// job_record_t is opaque to plugins built against the public headers.
typedef struct job_record job_record_t;

// --- job_modify() -------------------------------------------------------------------------
// The exported prototype (src/interfaces/job_submit.c, slurm_submit_ops_t.modify; 22.05:
// src/slurmctld/job_submit.c) and the err_msg it gives: SG_JOB_MODIFY_ERR_MSG is a
// char** that is nullptr where Slurm has none (22.05: the reason goes to the log only).
//   extern "C" int job_modify(SG_JOB_MODIFY_PARAMS(job_desc, job_ptr, submit_uid)) {
//     char** err_msg = SG_JOB_MODIFY_ERR_MSG; ...
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 2, 0)
#define SG_JOB_MODIFY_PARAMS(desc, job, uid) \
  job_desc_msg_t *desc, job_record_t *job, uint32_t uid, char **sg_job_modify_err_msg
#define SG_JOB_MODIFY_ERR_MSG sg_job_modify_err_msg
#else
#define SG_JOB_MODIFY_PARAMS(desc, job, uid) job_desc_msg_t *desc, job_record_t *job, uint32_t uid
#define SG_JOB_MODIFY_ERR_MSG static_cast<char**>(nullptr)
#endif

// --- PrEp plugins (prep/scaleguard, spank-plugin/job_submit/prep.cpp) ----------------------
// The interface is private (src/interfaces/prep.h, 22.05: src/common/prep.h); these are its
// types as each release declares them. The callbacks slurmctld registers for an async
// prolog_slurmctld: 22.05 void (*)(int rc, uint32_t job_id) (src/slurmctld/prep_slurmctld.c
// at the 22.05 tag); 23.11..25.11 add `bool timed_out`. 23.02 is not placed (no source here):
// it gets the 22.05 form, which is harmless on x86_64 for the values the plugin passes (an exit
// status, never a signal, so timed_out is never read). The call types are one enum, the same
// order in every release: PREP_REGISTER_CALLBACKS, PREP_PROLOG, PREP_EPILOG,
// PREP_PROLOG_SLURMCTLD, PREP_EPILOG_SLURMCTLD.
// What slurmctld does with an async prolog that reports failure (an exit status): requeue
// without hold (22.05: job_requeue(0, id, NULL, false, 0); 23.11+: job_requeue_internal(0,
// job, false, 0), ESLURM_JOB_PENDING tolerated), or when the job cannot be requeued, kill it
// ("PrologSlurmctld failed, job killed" to srun). 22.05 also kills a job the prolog's own
// requeue finds pending: report failure only when the job was not requeued otherwise.
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0)
typedef void (*sg_prep_callback_t)(int rc, uint32_t job_id, bool timed_out);
#define SG_PREP_CALL(cb, rc, job_id) (cb)((rc), (job_id), false)
#else
typedef void (*sg_prep_callback_t)(int rc, uint32_t job_id);
#define SG_PREP_CALL(cb, rc, job_id) (cb)((rc), (job_id))
#endif
struct SgPrepCallbacks {
  sg_prep_callback_t prolog_slurmctld;
  sg_prep_callback_t epilog_slurmctld;
};
constexpr int kPrepPrologSlurmctld = 3;   // PREP_PROLOG_SLURMCTLD

namespace sg_shim {

// --- job_desc_msg_t -----------------------------------------------------------------------

// The job an update names by number (NO_VAL when it names it by job_id_str only).
inline uint32_t job_id(const job_desc_msg_t& d) {
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
  return d.step_id.job_id;   // 25.11: slurm_step_id_t step_id replaces uint32_t job_id
#else
  return d.job_id;
#endif
}

// Names the job an update or request is for (job_id above).
inline void set_job_id(job_desc_msg_t* d, uint32_t id) {
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
  d->step_id.job_id = id;
#else
  d->job_id = id;
#endif
}

// The job's user, or `fallback` when the descriptor leaves it unset (slurm_init_job_desc_msg:
// NO_VAL in 22.05, SLURM_AUTH_NOBODY = 99 in 23.11+; slurmctld sets it before job_submit).
inline uint32_t user_id(const job_desc_msg_t& d, uint32_t fallback) {
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 2, 0)
  constexpr uint32_t kUnset = 99;   // SLURM_AUTH_NOBODY (src/common/slurm_protocol_defs.h)
#else
  constexpr uint32_t kUnset = NO_VAL;
#endif
  return d.user_id == NO_VAL || d.user_id == kUnset ? fallback : d.user_id;
}

// The TRES prefix of GPU entries in tres_per_{job,node,task,socket}, as this release's
// sbatch/srun write it ("gres:gpu:2" in 22.05, "gres/gpu:2" in 23.11+).
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0)
constexpr const char* kGpuTres = "gres/gpu";
#else
constexpr const char* kGpuTres = "gres:gpu";
#endif

// --- job_record_t -------------------------------------------------------------------------

constexpr uint32_t kJobMagic = 0xf0b7392c;  // JOB_MAGIC, unchanged 22.05 .. 25.11

// The head of struct job_record, copied from each release (DO NOT REORDER in Slurm's own
// comment): the offsets below are computed by the compiler, not written by hand.
struct JobRecordHead {
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
  slurm_step_id_t step_id;   // 25.11: {sluid_t sluid; uint32 job_id, step_het_comp, step_id}
#endif
  uint32_t magic;
  char* account;
  char* admin_comment;
};
constexpr size_t kMagicOffset = offsetof(JobRecordHead, magic);
constexpr size_t kAdminCommentOffset = offsetof(JobRecordHead, admin_comment);
constexpr size_t kAccountOffset = offsetof(JobRecordHead, account);
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
static_assert(kMagicOffset == 24 && kAdminCommentOffset == 40, "25.11 job_record layout (x86_64)");
#else
static_assert(kMagicOffset == 0 && kAdminCommentOffset == 16, "22.05-25.05 job_record layout (x86_64)");
#endif

// The job record's AdminComment slot, or nullptr when the record does not look like one.
inline char** admin_comment_slot(void* job_record) {
  if (!job_record) return nullptr;
  uint32_t magic = 0;
  std::memcpy(&magic, static_cast<char*>(job_record) + kMagicOffset, sizeof magic);
  if (magic != kJobMagic) return nullptr;
  return reinterpret_cast<char**>(static_cast<char*>(job_record) + kAdminCommentOffset);
}

// The job record's account (what the job is charged to), or nullptr when the record does not
// look like one. Read-only: slurmctld owns it.
inline const char* account_of(void* job_record) {
  if (!admin_comment_slot(job_record)) return nullptr;   // the same magic check
  const char* account = nullptr;
  std::memcpy(&account, static_cast<char*>(job_record) + kAccountOffset, sizeof account);
  return account;
}

// --- part_record_t ------------------------------------------------------------------------

constexpr uint32_t kPartMagic = 0xaefe8495;  // PART_MAGIC, unchanged 22.05 .. 25.11

// The head of part_record_t up to `alternate`: 23.11's src/slurmctld/slurmctld.h and
// 24.05-25.11's src/common/part_record.h (identical; DO NOT ALPHABETIZE in Slurm's comment).
// 22.05 has neither allow_accts_list nor allow_uids_cnt: `alternate` sits at 64, as read from
// a live 22.05.8 slurmctld (gdb, find_part_record("gpu-od") with Alternate=gpu-spot). 23.02 is
// not placed (no source here): alternates are not read there.
struct PartRecordHead {
  uint32_t magic;
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0)
  void* allow_accts_list;
#endif
  char* allow_accounts;
  char** allow_account_array;
  char* allow_alloc_nodes;
  char* allow_groups;
  uid_t* allow_uids;
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0)
  int allow_uids_cnt;
#endif
  char* allow_qos;
  void* allow_qos_bitstr;
  char* alternate;
};
constexpr size_t kPartMagicOffset = offsetof(PartRecordHead, magic);
constexpr size_t kPartAlternateOffset = offsetof(PartRecordHead, alternate);
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0)
static_assert(kPartAlternateOffset == 80, "23.11-25.11 part_record layout (x86_64)");
constexpr bool kPartLayoutKnown = true;
#else
static_assert(kPartAlternateOffset == 64, "22.05 part_record layout (x86_64)");
constexpr bool kPartLayoutKnown = SLURM_VERSION_NUMBER < SLURM_VERSION_NUM(23, 2, 0);
#endif

// The partition's Alternate= (where slurmctld sends a job while the partition is drained or
// inactive), or "" when it has none or the record does not look like one. Read-only.
inline const char* partition_alternate(const void* part_record) {
  if (!part_record || !kPartLayoutKnown) return "";
  uint32_t magic = 0;
  std::memcpy(&magic, static_cast<const char*>(part_record) + kPartMagicOffset, sizeof magic);
  if (magic != kPartMagic) return "";
  const char* alternate = nullptr;
  std::memcpy(&alternate, static_cast<const char*>(part_record) + kPartAlternateOffset, sizeof alternate);
  return alternate ? alternate : "";
}

// --- which program loaded the plugin ------------------------------------------------------
// "slurmctld", "slurmd", "slurmstepd", ...: the kernel's name of the process (/proc/self/comm:
// the file name it was started as, as execve saw it, at most 15 bytes; Debian's /usr/sbin/slurmd
// is a link to slurmd-wlm and still says slurmd), which setproctitle does not change (24.05+
// slurmstepd loads PrEp plugins after renaming itself, above; the main thread is never
// renamed); program_invocation_short_name only where /proc cannot say.
inline std::string program_name() {
  if (FILE* f = std::fopen("/proc/self/comm", "re")) {
    char name[64] = {};
    const bool ok = std::fgets(name, sizeof name, f) != nullptr;
    std::fclose(f);
    if (ok) {
      name[std::strcspn(name, "\n")] = '\0';
      if (name[0]) return name;
    }
  }
  return program_invocation_short_name;
}

}  // namespace sg_shim
