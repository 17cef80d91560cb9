// The few libslurmfull functions job_submit/scaleguard calls (spank-plugin/job_submit/
// slurm_api.h). Inside slurmctld they resolve to Slurm's own; a fuzz process has no slurmctld,
// so these minimal versions stand in. Harness-only: never linked into a plugin.
//
// The allocator keeps Slurm's contract that matters to the plugin: xrecalloc grows an array
// and zeroes the new part when asked, xfree frees and NULLs, and every block carries its size
// in a header (as Slurm's xmalloc does) so a grown array can be cleared. The block ends
// exactly where the caller's bytes end, so ASan sees any overrun.
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "slurm_api.h"
#include "slurm_stubs.h"

namespace {

constexpr size_t kHeader = 16;  // keeps the caller's pointer 16-byte aligned

void* block_alloc(size_t bytes) {
  auto* raw = static_cast<unsigned char*>(malloc(kHeader + bytes));
  if (!raw) abort();  // Slurm's xmalloc aborts too (the try_ form aside)
  memcpy(raw, &bytes, sizeof bytes);
  return raw + kHeader;
}

size_t block_size(void* p) {
  size_t bytes;
  memcpy(&bytes, static_cast<unsigned char*>(p) - kHeader, sizeof bytes);
  return bytes;
}

int g_verbose = -1;
bool verbose() {
  if (g_verbose < 0) g_verbose = getenv("SCALEGUARD_FUZZ_VERBOSE") != nullptr;
  return g_verbose == 1;
}

void log_line(const char* level, const char* format, va_list args) {
  char buf[4096];
  vsnprintf(buf, sizeof buf, format, args);  // formats every message: catches bad varargs
  if (verbose()) fprintf(stderr, "%s: %s\n", level, buf);
}

}  // namespace

extern "C" {

slurm_conf_t slurm_conf;

char* slurm_xstrdup(const char* str) {
  if (!str) return nullptr;
  size_t n = strlen(str) + 1;
  char* copy = static_cast<char*>(block_alloc(n));
  memcpy(copy, str, n);
  return copy;
}

void* slurm_xrecalloc(void** item, size_t count, size_t size, bool clear, bool try_,
                      const char*, int, const char*) {
  if (size != 0 && count > SIZE_MAX / size) abort();
  size_t bytes = count * size;
  void* fresh = block_alloc(bytes);
  size_t old = 0;
  if (*item) {
    old = block_size(*item);
    memcpy(fresh, *item, old < bytes ? old : bytes);
    free(static_cast<unsigned char*>(*item) - kHeader);
  }
  if (bytes > old) {
    // Slurm zeroes new memory either way; `clear` only matters for a fresh block. Zero
    // both ways here too, so the harness checks the plugin's logic, not this stub.
    (void)clear;
    memset(static_cast<unsigned char*>(fresh) + old, 0, bytes - old);
  }
  (void)try_;
  *item = fresh;
  return fresh;
}

void slurm_xfree(void** item) {
  if (item && *item) {
    free(static_cast<unsigned char*>(*item) - kHeader);
    *item = nullptr;
  }
}

void slurm_info(const char* format, ...) {
  va_list args;
  va_start(args, format);
  log_line("info", format, args);
  va_end(args);
}
void slurm_error(const char* format, ...) {
  va_list args;
  va_start(args, format);
  log_line("error", format, args);
  va_end(args);
}
void slurm_debug(const char* format, ...) {
  va_list args;
  va_start(args, format);
  log_line("debug", format, args);
  va_end(args);
}

// prep/scaleguard's calls back into slurmctld (prep.cpp): a fuzz process has no controller,
// so each fails the way an unreachable one would; the plugin then logs and lets the run start.
void slurm_init_job_desc_msg(job_desc_msg_t* job_desc_msg) { memset(job_desc_msg, 0, sizeof *job_desc_msg); }
int slurm_load_job(job_info_msg_t** resp, uint32_t, uint16_t) {
  *resp = nullptr;
  return SLURM_ERROR;
}
void slurm_free_job_info_msg(job_info_msg_t*) {}
int slurm_update_job(job_desc_msg_t*) { return SLURM_ERROR; }
int slurm_requeue(uint32_t, uint32_t) { return SLURM_ERROR; }
char* slurm_strerror(int) { return const_cast<char*>("no slurmctld in a fuzz process"); }

}  // extern "C"

namespace sg_fuzz {

char* slurm_alloc_string(const std::string& text) { return slurm_xstrdup(text.c_str()); }

char** slurm_alloc_env(const std::vector<std::string>& entries) {
  void* array = nullptr;
  slurm_xrecalloc(&array, entries.size() + 1, sizeof(char*), true, false, __FILE__, __LINE__,
                  __func__);
  char** env = static_cast<char**>(array);
  for (size_t i = 0; i < entries.size(); ++i) env[i] = slurm_alloc_string(entries[i]);
  return env;
}

void slurm_free_env(char*** env, uint32_t size) {
  if (!*env) return;
  // As slurmctld frees a job_desc_msg_t: `size` entries, then the array.
  for (uint32_t i = 0; i < size; ++i) slurm_xfree(reinterpret_cast<void**>(&(*env)[i]));
  slurm_xfree(reinterpret_cast<void**>(env));
}

}  // namespace sg_fuzz
