// The atomic .prom writer. job_submit/scaleguard calls it as root (or SlurmUser) from its own
// thread, so everything is relative to one directory descriptor opened without following a
// symlink, the temporary file is created O_EXCL|O_NOFOLLOW (a planted name or link makes this
// write fail, never redirects it), and rename() replaces a link instead of following it.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "scaleguard/metrics.h"

namespace scaleguard::metrics {

std::string check_textfile_path(const std::string& path) {
  if (path.empty() || path[0] != '/') return "must be an absolute path";
  if (path.find("/../") != std::string::npos || path.find("/./") != std::string::npos ||
      path.compare(path.size() >= 3 ? path.size() - 3 : 0, 3, "/..") == 0)
    return "must not contain '.' or '..' components";
  const std::string base = path.substr(path.rfind('/') + 1);
  if (base.size() <= 5 || base.compare(base.size() - 5, 5, ".prom") != 0 || base[0] == '.')
    return "must name a file ending in .prom (the node exporter's textfile collector reads only those)";
  if (path.size() > 1024) return "is longer than 1,024 characters";
  for (unsigned char c : path)
    if (c < 0x20 || c == 0x7f) return "contains a control character";
  return "";
}

std::string write_textfile(const std::string& path, const std::string& text) {
  if (std::string why = check_textfile_path(path); !why.empty()) return path + ": " + why;
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == 0 ? "/" : path.substr(0, slash), base = path.substr(slash + 1);
  const int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) return "cannot open the directory " + dir + ": " + std::strerror(errno);
  struct stat st {};
  if (fstat(dfd, &st) != 0 || (st.st_mode & S_IWOTH)) {
    close(dfd);
    return "the directory " + dir + " may be written by anyone: not used (a textfile directory is root's or the "
           "writer's, e.g. /var/lib/prometheus/node-exporter)";
  }
  // A name of our own: pid, time and a counter (O_EXCL refuses anything already there).
  static std::atomic<unsigned> counter{0};
  const std::string tmp = "." + base + ".tmp." + std::to_string(getpid()) + "." + std::to_string(time(nullptr)) + "." +
                          std::to_string(++counter);
  const int fd = openat(dfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int e = errno;
    close(dfd);
    return "cannot create " + dir + "/" + tmp + ": " + std::strerror(e);
  }
  std::size_t done = 0;
  int e = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      e = n < 0 ? errno : EIO;
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  // Readable by the node exporter whatever the umask. No fsync: the file is rewritten every
  // few seconds and only whole-file visibility (the rename) matters to its reader.
  if (e == 0 && fchmod(fd, 0644) != 0) e = errno;
  if (close(fd) != 0 && e == 0) e = errno;
  if (e == 0 && renameat(dfd, tmp.c_str(), dfd, base.c_str()) != 0) e = errno;
  if (e != 0) unlinkat(dfd, tmp.c_str(), 0);
  close(dfd);
  return e == 0 ? "" : "cannot write " + path + ": " + std::strerror(e);
}

}  // namespace scaleguard::metrics
