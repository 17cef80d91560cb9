// The Slurm C API job_submit/scaleguard uses: the public headers plus the few libslurmfull
// functions they do not declare (logging and Slurm's allocator). They resolve when slurmctld
// loads the plugin. Everything slurmctld later frees (err_msg, comment, partition, TRES
// strings, environment arrays) must come from these allocators, never from malloc or new.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

extern "C" {
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

// job_record_t is opaque to plugins built against the public headers.
typedef struct job_record job_record_t;

char* slurm_xstrdup(const char* str);
void* slurm_xrecalloc(void** item, size_t count, size_t size, bool clear, bool try_,
                      const char* file, int line, const char* func);
void slurm_xfree(void** item);
void slurm_info(const char* format, ...) __attribute__((format(printf, 1, 2)));
void slurm_error(const char* format, ...) __attribute__((format(printf, 1, 2)));
void slurm_debug(const char* format, ...) __attribute__((format(printf, 1, 2)));
extern slurm_conf_t slurm_conf;   // slurm_conf.slurm_conf: path of slurm.conf
// slurmctld's lookup of a het job's component (job_mgr.c; exported by slurmctld 22.05-25.11
// with this prototype). Weak: where it is missing it is null and het updates fail closed.
job_record_t* find_het_job_record(uint32_t job_id, uint32_t het_job_offset) __attribute__((weak));
// slurmctld's own (22.05 to 25.11: part_record_t *find_part_record(char *name)); weak, so the
// plugin still loads where slurmctld is absent (bench/slurm/plugin_load). Needs the partition
// read lock, which job_submit and job_modify hold.
void* find_part_record(char* name) __attribute__((weak));
}

namespace sg_slurm {

// A Slurm-owned copy of `text` (for fields slurmctld frees).
inline char* xstr(const std::string& text) { return slurm_xstrdup(text.c_str()); }

// Replaces a Slurm-owned string field with a copy of `text`.
inline void replace(char** field, const std::string& text) {
  slurm_xfree(reinterpret_cast<void**>(field));
  *field = xstr(text);
}

// Sets the user's message in *err_msg. A plugin before this one in JobSubmitPlugins (e.g.
// job_submit/lua's slurm.user_msg) may have left one there: it is kept, ours follows it, and
// the old string is freed (overwriting it leaked it and hid the other plugin's message).
inline void set_err_msg(char** err_msg, const std::string& text) {
  if (!err_msg) return;
  if (*err_msg && **err_msg) replace(err_msg, std::string(*err_msg) + "\n" + text);
  else replace(err_msg, text);
}

}  // namespace sg_slurm
