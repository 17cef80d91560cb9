// --train-ckpt-dir: the path must resolve inside one of the policy's checkpoint roots, and
// the directory is created by the job's user, never by root.
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

#include "plugin.h"

namespace fs = std::filesystem;

namespace scaleguard::spank {
namespace {

std::string real(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) ? std::string(buf) : std::string();
}

bool inside(const std::string& path, const std::string& root) {
  return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
                          (root.back() == '/' || path[root.size()] == '/'));
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "(none configured)" : out;
}

// Switches the effective ids to the job's user for the lifetime of the object when the
// caller runs as someone else (root); slurmstepd's user_init normally already has.
class AsUser {
 public:
  AsUser(uid_t uid, gid_t gid) : uid_(geteuid()), gid_(getegid()) {
    if (uid_ != uid) ok_ = setegid(gid) == 0 && seteuid(uid) == 0;
  }
  ~AsUser() {
    if (uid_ != geteuid() && seteuid(uid_) != 0) slurm_error("scaleguard: cannot restore euid %d", int(uid_));
    if (gid_ != getegid() && setegid(gid_) != 0) slurm_error("scaleguard: cannot restore egid %d", int(gid_));
  }
  bool ok() const { return ok_; }

 private:
  uid_t uid_;
  gid_t gid_;
  bool ok_ = true;
};

}  // namespace

bool check_ckpt_dir(const std::string& path, const std::vector<std::string>& roots, std::string& error) {
  if (path.empty() || path[0] != '/') return error = "not an absolute path", false;
  if (path.size() >= PATH_MAX) return error = "path too long", false;
  // Portable file-name characters only: the path travels through spank env, the job's
  // environment and comment, and users' shell scripts.
  for (char c : path)
    if (!std::isalnum(static_cast<unsigned char>(c)) && (c == '\0' || !std::strchr("/._-+@", c)))
      return error = std::string("character '") + (std::isprint(static_cast<unsigned char>(c)) ? c : '?') +
                     "' is not allowed (letters, digits and / . _ - + @)", false;
  for (const auto& part : fs::path(path))
    if (part == "..") return error = "'..' is not allowed", false;
  // Resolve the deepest part that exists (symlinks included); the rest is created later
  // below it, so it cannot leave the resolved directory.
  fs::path existing = fs::path(path).lexically_normal(), rest;
  while (access(existing.c_str(), F_OK) != 0 && existing.has_relative_path()) {
    rest = existing.filename() / rest;
    existing = existing.parent_path();
  }
  const std::string resolved_base = real(existing.string());
  if (resolved_base.empty()) return error = "cannot resolve " + existing.string(), false;
  const std::string resolved = (fs::path(resolved_base) / rest).lexically_normal().string();
  const std::string trimmed = resolved.size() > 1 && resolved.back() == '/' ? resolved.substr(0, resolved.size() - 1) : resolved;
  for (const auto& root : roots) {
    const std::string r = real(root);
    if (!r.empty() && inside(trimmed, r)) return true;
  }
  error = (trimmed == path ? std::string("outside") : "resolves to " + trimmed + ", outside") +
          " the allowed checkpoint roots: " + join(roots);
  return false;
}

bool create_ckpt_dir(const std::string& path, uid_t uid, gid_t gid, std::string& error) {
  AsUser as(uid, gid);
  if (!as.ok()) return error = "cannot switch to the job's user", false;
  fs::path partial;
  for (const auto& part : fs::path(path).lexically_normal()) {
    partial /= part;
    if (part.empty() || part == "/") continue;
    if (mkdir(partial.c_str(), 0750) == 0) {
      chmod(partial.c_str(), 0750);  // the user's umask may have taken bits away
    } else if (errno != EEXIST) {
      return error = "cannot create " + partial.string() + ": " + std::strerror(errno), false;
    }
  }
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return error = path + " is not a directory", false;
  if (access(path.c_str(), W_OK) != 0) return error = path + " is not writable by the job's user", false;
  return true;
}

}  // namespace scaleguard::spank
