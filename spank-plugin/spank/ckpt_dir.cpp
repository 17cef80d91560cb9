// --train-ckpt-dir: the path must lie inside one of the policy's checkpoint roots, and below
// the root it must be the job's user's own: no symlinks, nothing another user owns or could
// swap. Checked component by component on open directory descriptors (openat with
// O_NOFOLLOW, fstat, mkdirat), never by path then use; what is missing is created by the
// job's user, never by root.
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

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

// "/a/b/" -> "/a/b"; "." and "//" removed.
std::string normal(const std::string& path) {
  std::string s = fs::path(path).lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

// "alice (uid 1001)", or "uid 1001" when the user database does not know it.
std::string owner(uid_t uid) {
  struct passwd pw {}, *found = nullptr;
  char buf[4096];
  const std::string id = "uid " + std::to_string(uid);
  if (getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found && found->pw_name) return std::string(found->pw_name) + " (" + id + ")";
  return id;
}

std::string mode(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

// A descriptor that closes itself.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.fd_;
      o.fd_ = -1;
    }
    return *this;
  }
  ~Fd() { reset(); }
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

// Opens directory `name` in `dir` without following a symlink. On failure says why, naming
// `shown` (the path so far) and, for what is not a directory, its type and owner.
Fd open_dir(int dir, const std::string& name, const std::string& shown, std::string& error, int* failed = nullptr) {
  Fd fd(openat(dir, name.c_str(), kDirFlags));
  if (fd.get() >= 0) return fd;
  const int err = errno;
  if (failed) *failed = err;
  struct stat st {};
  if ((err == ELOOP || err == ENOTDIR) && fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      const ssize_t n = readlinkat(dir, name.c_str(), target, sizeof target - 1);
      std::string to = n > 0 ? std::string(target, static_cast<std::size_t>(n)) : std::string("?");
      for (char& c : to)
        if (!std::isprint(static_cast<unsigned char>(c))) c = '?';
      error = shown + " is a symlink (to " + to.substr(0, 200) + ") owned by " + owner(st.st_uid) +
              ": refused; below a checkpoint root every part of the path must be a real directory";
    } else {
      error = shown + " is not a directory (owned by " + owner(st.st_uid) + ")";
    }
  } else {
    error = "cannot open " + shown + ": " + std::strerror(err);
  }
  return Fd();
}

// The rules for a directory below the checkpoint root: the job's user's own (or, on the way
// to it, root's), and nobody else may replace what is in it.
bool safe_dir(const struct stat& st, const std::string& shown, bool last, uid_t uid, std::string& error) {
  if (st.st_uid != uid && (last || st.st_uid != 0)) {
    error = shown + " is owned by " + owner(st.st_uid) + ", not by the job's user " + owner(uid) +
            ": refused; use a directory of your own";
    return false;
  }
  // Every user may write here: without the sticky bit they may rename what we checked and put
  // their own in its place later; in the checkpoint directory itself they may plant files.
  if ((st.st_mode & S_IWOTH) && (last || !(st.st_mode & S_ISVTX))) {
    error = shown + " (owned by " + owner(st.st_uid) + ") is writable by every user (mode " + mode(st.st_mode) +
            "): refused; chmod o-w it";
    return false;
  }
  return true;
}

// The root the path is spelled under (as configured or resolved), longest first; sets `base`
// to the resolved root and `rest` to the components below it.
bool split_root(const std::string& path, const std::vector<std::string>& roots, std::string& base,
                std::vector<std::string>& rest) {
  std::size_t best = 0;
  std::string below;
  for (const auto& root : roots) {
    const std::string resolved = real(root);
    if (resolved.empty()) continue;
    for (const std::string& spelled : {normal(root), resolved}) {
      if (spelled.empty() || spelled[0] != '/' || !inside(path, spelled) || spelled.size() < best) continue;
      best = spelled.size();
      base = resolved;
      below = path.substr(spelled == "/" ? 1 : std::min(path.size(), spelled.size() + 1));
    }
  }
  if (!best) return false;
  rest.clear();
  for (const auto& part : fs::path(below))
    if (!part.empty() && part != "." && part != "/") rest.push_back(part.string());
  return true;
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
  // Resolve the deepest part that exists (symlinks included), for a clear message when the
  // path leaves the roots; walk_ckpt_dir then refuses any symlink below the root anyway.
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

bool walk_ckpt_dir(const std::string& path, const std::vector<std::string>& roots, uid_t uid, gid_t gid,
                   bool create, std::string& error) {
  std::string base;
  std::vector<std::string> rest;
  const std::string wanted = normal(path);
  if (!split_root(wanted, roots, base, rest))
    return error = "not spelled under a checkpoint root (" + join(roots) +
                   "): give the directory's real path, without symlinks", false;
  AsUser as(uid, gid);
  if (!as.ok()) return error = "cannot switch to the job's user", false;
  // The root as the admin configured it, resolved: symlink-free, so opened with O_NOFOLLOW
  // all the way (a component swapped for a symlink since realpath fails here).
  Fd dir(open("/", kDirFlags));
  std::string shown;
  for (const auto& part : fs::path(base)) {
    if (part.empty() || part == "/") continue;
    shown += "/" + part.string();
    Fd next = open_dir(dir.get(), part.string(), shown, error);
    if (next.get() < 0) return false;
    dir = std::move(next);
  }
  if (dir.get() < 0) return error = "cannot open /: " + std::string(std::strerror(errno)), false;
  struct stat st {};
  if (fstat(dir.get(), &st) != 0) return error = "cannot stat " + base + ": " + std::strerror(errno), false;
  if (rest.empty()) return safe_dir(st, base, true, uid, error);  // the root itself
  if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))
    return error = "checkpoint root " + base + " is writable by every user without the sticky bit (mode " +
                   mode(st.st_mode) + "): ask the cluster's admin", false;
  shown = base == "/" ? "" : base;
  for (std::size_t i = 0; i < rest.size(); ++i) {
    const std::string& name = rest[i];
    const bool last = i + 1 == rest.size();
    shown += "/" + name;
    bool made = false;
    if (create && mkdirat(dir.get(), name.c_str(), 0750) == 0) made = true;
    else if (create && errno != EEXIST)
      return error = "cannot create " + shown + ": " + std::strerror(errno), false;
    int failed = 0;
    Fd next = open_dir(dir.get(), name, shown, error, &failed);
    if (next.get() < 0) {
      // Checking only (the submitting host): what does not exist yet is created on the nodes.
      if (!create && failed == ENOENT) return error.clear(), true;
      return false;
    }
    // What we opened may not be what we made (someone else's, put there in between): the
    // descriptor's owner decides, not the name.
    if (fstat(next.get(), &st) != 0) return error = "cannot stat " + shown + ": " + std::strerror(errno), false;
    if (made && st.st_uid == uid && fchmod(next.get(), 0750) == 0) st.st_mode = S_IFDIR | 0750;  // the umask may have taken bits away
    if (!safe_dir(st, shown, last, uid, error)) return false;
    dir = std::move(next);
  }
  if (create && !(st.st_mode & S_IWUSR)) return error = shown + " is not writable by the job's user", false;
  return true;
}

bool create_ckpt_dir(const std::string& path, const std::vector<std::string>& roots, uid_t uid, gid_t gid,
                     std::string& error) {
  return walk_ckpt_dir(path, roots, uid, gid, true, error);
}

}  // namespace scaleguard::spank
