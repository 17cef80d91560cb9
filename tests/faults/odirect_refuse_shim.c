/* LD_PRELOAD shim for tests/faults/odirect_write_refused.sh: files open with O_DIRECT, but
 * every pwrite on such a descriptor fails with EINVAL: a file system that accepts the flag
 * at open and refuses it at the first write, the case the shard writer's probe write is
 * for. No such file system can be mounted here (tmpfs and ext4 take O_DIRECT, ramfs refuses
 * it at open), so the shim stands in for one at the syscall boundary.
 * Everything else passes through. Logs once per process when it refuses a write. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/types.h>
#include <unistd.h>

#define MAX_FD 4096
static atomic_bool direct_fd[MAX_FD];
static atomic_bool told;

static void track(int fd, int flags) {
  if (fd >= 0 && fd < MAX_FD) atomic_store(&direct_fd[fd], (flags & O_DIRECT) != 0);
}

static mode_t mode_of(int flags, va_list ap) {
  return (flags & O_CREAT) || (flags & __O_TMPFILE) == __O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

#define OPEN_WRAPPER(name, ...)                                              \
  int name(__VA_ARGS__, int flags, ...) {                                    \
    static int (*real)();                                                    \
    if (!real) real = (int (*)())dlsym(RTLD_NEXT, #name);                    \
    va_list ap;                                                              \
    va_start(ap, flags);                                                     \
    const mode_t mode = mode_of(flags, ap);                                  \
    va_end(ap);

OPEN_WRAPPER(open, const char* path)
  const int fd = real(path, flags, mode);
  track(fd, flags);
  return fd;
}
OPEN_WRAPPER(open64, const char* path)
  const int fd = real(path, flags, mode);
  track(fd, flags);
  return fd;
}
OPEN_WRAPPER(openat, int dir, const char* path)
  const int fd = real(dir, path, flags, mode);
  track(fd, flags);
  return fd;
}
OPEN_WRAPPER(openat64, int dir, const char* path)
  const int fd = real(dir, path, flags, mode);
  track(fd, flags);
  return fd;
}

int close(int fd) {
  static int (*real)(int);
  if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "close");
  if (fd >= 0 && fd < MAX_FD) atomic_store(&direct_fd[fd], 0);
  return real(fd);
}

static int refused(int fd) {
  if (fd < 0 || fd >= MAX_FD || !atomic_load(&direct_fd[fd])) return 0;
  if (!atomic_exchange(&told, 1)) fprintf(stderr, "odirect_refuse_shim: pwrite on an O_DIRECT descriptor refused (EINVAL)\n");
  errno = EINVAL;
  return 1;
}

ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) {
  static ssize_t (*real)(int, const void*, size_t, off_t);
  if (!real) real = (ssize_t(*)(int, const void*, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
  return refused(fd) ? -1 : real(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void* buf, size_t n, off64_t off) {
  static ssize_t (*real)(int, const void*, size_t, off64_t);
  if (!real) real = (ssize_t(*)(int, const void*, size_t, off64_t))dlsym(RTLD_NEXT, "pwrite64");
  return refused(fd) ? -1 : real(fd, buf, n, off);
}
