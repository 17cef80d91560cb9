// The probe store: record text, atomic writes, and the bounded cached reader job_submit uses
// inside slurmctld (no exceptions leave it, nothing follows a symlink, sizes are capped).
#include "scaleguard/probe_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <random>

namespace scaleguard::probe {
namespace {

bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'; }
bool token_ok(const std::string& s, std::size_t max) {
  if (s.empty() || s.size() > max) return false;
  for (char c : s)
    if (!name_char(c)) return false;
  return true;
}
// Free text (user, job id, version, model spec): printable, no '=' needed, bounded.
bool text_ok(const std::string& s, std::size_t max) {
  if (s.size() > max) return false;
  for (char c : s)
    if (c < 0x20 || c == 0x7f) return false;
  return true;
}

bool to_double(std::string_view v, double lo, double hi, double& out) {
  double x = 0;
  auto r = std::from_chars(v.data(), v.data() + v.size(), x);
  if (r.ec != std::errc() || r.ptr != v.data() + v.size() || !std::isfinite(x) || x < lo || x > hi) return false;
  out = x;
  return true;
}
bool to_ll(std::string_view v, long long lo, long long hi, long long& out) {
  long long x = 0;
  auto r = std::from_chars(v.data(), v.data() + v.size(), x);
  if (r.ec != std::errc() || r.ptr != v.data() + v.size() || x < lo || x > hi) return false;
  out = x;
  return true;
}

Error bad(const std::string& what) { return Error{what, "", 0, "", ""}; }

std::string num(double v) {
  char b[40];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

}  // namespace

std::string format_record(const Measurement& m, const std::string& model_spec) {
  std::string out = "# scaleguard probe record (probe/README.md)\n";
  auto kv = [&](const char* k, const std::string& v) { out += std::string(k) + "=" + v + "\n"; };
  kv("format", "2");
  kv("fingerprint", m.fingerprint);
  kv("instance", m.instance);
  kv("device", m.device);
  kv("gpu", m.gpu);
  kv("ranks", std::to_string(m.ranks));
  kv("nodes", std::to_string(m.nodes));
  kv("micro_batch", std::to_string(m.micro_batch));
  kv("step_s_1", num(m.step_s_1));
  kv("step_s_n", num(m.step_s_n));
  kv("speedup", num(m.speedup));
  kv("comm_ratio", num(m.comm_ratio));
  kv("peak_bytes", num(m.peak_bytes));
  kv("gpu_hours", num(m.gpu_hours));
  kv("time", std::to_string(m.time));
  kv("date", m.date);
  kv("scaleguard", m.version);
  kv("job_id", m.job_id);
  kv("user", m.user);
  if (!model_spec.empty()) kv("model", model_spec);
  return out;
}

Result<Measurement> parse_record(std::string_view text) {
  if (text.size() > kMaxRecordBytes) return bad("record larger than 4096 bytes");
  Measurement m;
  bool seen_format = false, seen_fp = false, seen_inst = false, seen_speedup = false, seen_comm = false,
       seen_time = false, seen_device = false, seen_gpu = false;
  std::map<std::string, int> seen;
  std::size_t pos = 0;
  int lines = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) return bad("record does not end with a newline (partial write?)");
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (++lines > 64) return bad("more than 64 lines");
    if (line.empty() || line[0] == '#') continue;
    const std::size_t eq = line.find('=');
    if (eq == std::string_view::npos || eq == 0) return bad("line without key=value");
    const std::string key(line.substr(0, eq));
    const std::string_view v = line.substr(eq + 1);
    if (seen[key]++) return bad("key '" + key + "' given twice");
    const std::string value(v);
    long long ll = 0;
    double d = 0;
    if (key == "format") {
      // Format 1 (before issue 37) did not say what hardware the probe ran on: such a record
      // could be a CPU run filed under a GPU instance, so it is never used.
      if (value == "1") return bad("format 1 record: it does not say which device and GPU it was measured on; probe again");
      if (value != "2") return bad("unknown record format '" + value.substr(0, 16) + "'");
      seen_format = true;
    } else if (key == "fingerprint") {
      if (value.size() != 16 || value.find_first_not_of("0123456789abcdef") != std::string::npos)
        return bad("malformed fingerprint");
      m.fingerprint = value, seen_fp = true;
    } else if (key == "instance") {
      if (!token_ok(value, 64)) return bad("malformed instance");
      m.instance = value, seen_inst = true;
    } else if (key == "device") {
      if (value != "cuda" && value != "cpu") return bad("device must be cuda or cpu");
      m.device = value, seen_device = true;
    } else if (key == "gpu") {
      if (!token_ok(value, 64)) return bad("malformed gpu");
      m.gpu = value, seen_gpu = true;
    } else if (key == "ranks") {
      if (!to_ll(v, 2, 1 << 20, ll)) return bad("ranks out of range");
      m.ranks = static_cast<int>(ll);
    } else if (key == "nodes") {
      if (!to_ll(v, 1, 1 << 20, ll)) return bad("nodes out of range");
      m.nodes = static_cast<int>(ll);
    } else if (key == "micro_batch") {
      if (!to_ll(v, 1, 1 << 20, ll)) return bad("micro_batch out of range");
      m.micro_batch = static_cast<int>(ll);
    } else if (key == "step_s_1" || key == "step_s_n" || key == "peak_bytes" || key == "gpu_hours") {
      if (!to_double(v, 0, 1e18, d)) return bad(key + " out of range");
      (key == "step_s_1" ? m.step_s_1 : key == "step_s_n" ? m.step_s_n : key == "peak_bytes" ? m.peak_bytes : m.gpu_hours) = d;
    } else if (key == "speedup") {
      if (!to_double(v, 1e-6, 1e6, d)) return bad("speedup out of range");
      m.speedup = d, seen_speedup = true;
    } else if (key == "comm_ratio") {
      if (!to_double(v, 0, 1e6, d)) return bad("comm_ratio out of range");
      m.comm_ratio = d, seen_comm = true;
    } else if (key == "time") {
      if (!to_ll(v, 1, 32503680000LL, ll)) return bad("time out of range");
      m.time = ll, seen_time = true;
    } else if (key == "date") {
      if (value.size() != 10 || value.find_first_not_of("0123456789-") != std::string::npos) return bad("malformed date");
      m.date = value;
    } else if (key == "scaleguard" || key == "job_id" || key == "user" || key == "model") {
      if (!text_ok(value, 256)) return bad(key + " has control characters or is too long");
      if (key == "scaleguard") m.version = value;
      else if (key == "job_id") m.job_id = value;
      else if (key == "user") m.user = value;
    } else {
      return bad("unknown key '" + key.substr(0, 32) + "'");
    }
  }
  if (!seen_format || !seen_fp || !seen_inst || !seen_device || !seen_gpu || !seen_speedup || !seen_comm || !seen_time)
    return bad("record misses format, fingerprint, instance, device, gpu, speedup, comm_ratio or time");
  return m;
}

std::string record_name(const Measurement& m, uid_t uid) {
  return m.fingerprint + "." + m.instance + ".r" + std::to_string(m.ranks) + "n" + std::to_string(m.nodes) + ".u" +
         std::to_string(static_cast<unsigned long>(uid)) + ".rec";
}

namespace {
std::string owner_dir_name(uid_t uid) { return "u" + std::to_string(static_cast<unsigned long>(uid)); }
}  // namespace

std::string owner_dir(const std::string& store, uid_t uid) { return store + "/" + owner_dir_name(uid); }

Result<std::string> write_record(const std::string& store, const Measurement& m, const std::string& model_spec) {
  try {
    const std::string text = format_record(m, model_spec);
    auto check = parse_record(text);
    if (!check) return Error{"refusing to write an invalid record: " + check.error().message, store, 0, "", ""};
    const int sfd = ::open(store.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sfd < 0)
      return Error{std::string("cannot open the probe store: ") + std::strerror(errno), store, 0, "",
                   "create it (root-owned, mode 1777) or name another with --store"};
    // The writer's own directory u<uid>: made on first use (0755), used only if it is really ours.
    const uid_t me = ::geteuid();
    const std::string sub = owner_dir_name(me), dir = store + "/" + sub;
    if (::mkdirat(sfd, sub.c_str(), 0755) != 0 && errno != EEXIST) {
      const int e = errno;
      ::close(sfd);
      return Error{std::string("cannot create the writer's directory: ") + std::strerror(e), dir, 0, "", ""};
    }
    const int dfd = ::openat(sfd, sub.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    ::close(sfd);
    struct stat dst {};
    if (dfd < 0 || ::fstat(dfd, &dst) != 0 || dst.st_uid != me || (dst.st_mode & (S_IWGRP | S_IWOTH))) {
      const int e = errno;
      if (dfd >= 0) ::close(dfd);
      return Error{dfd < 0 ? std::string("cannot open the writer's directory: ") + std::strerror(e)
                           : "the writer's directory is not owned by uid " + std::to_string(me) +
                                 " or is writable by others",
                   dir, 0, "", "remove it (someone else made it) and probe again"};
    }
    const std::string name = record_name(m, me);
    std::random_device rd;
    const std::string tmp = "." + name + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rd());
    auto fail = [&](const std::string& what) {
      const int e = errno;
      ::unlinkat(dfd, tmp.c_str(), 0);
      ::close(dfd);
      return Error{what + ": " + std::strerror(e), dir + "/" + name, 0, "", ""};
    };
    const int fd = ::openat(dfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return fail("cannot create a temporary record");
    std::size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ::close(fd);
        return fail("cannot write the record");
      }
      done += static_cast<std::size_t>(n);
    }
    if (::fchmod(fd, 0644) != 0 || ::fsync(fd) != 0) {
      ::close(fd);
      return fail("cannot sync the record");
    }
    if (::close(fd) != 0) return fail("cannot close the record");
    if (::renameat(dfd, tmp.c_str(), dfd, name.c_str()) != 0) return fail("cannot rename the record into place");
    ::fsync(dfd);
    ::close(dfd);
    return dir + "/" + name;
  } catch (const std::exception& e) {
    return Error{std::string("internal error: ") + e.what(), store, 0, "", ""};
  }
}

// --- reader ----------------------------------------------------------------------------------

struct StoreReader::Impl {
  struct Stamp {
    dev_t dev = 0;
    ino_t ino = 0;
    long long mtime_ns = 0, ctime_ns = 0;
    ino_t store_ino = 0;  // the store itself: identity, owner and mode (not its mtime: users add names)
    uid_t store_uid = 0;
    mode_t store_mode = 0;
    bool operator==(const Stamp& o) const {
      return dev == o.dev && ino == o.ino && mtime_ns == o.mtime_ns && ctime_ns == o.ctime_ns &&
             store_ino == o.store_ino && store_uid == o.store_uid && store_mode == o.store_mode;
    }
  };
  using Owned = StoreReader::Owned;
  struct Entry {
    Stamp stamp;
    std::vector<Owned> records;
    std::vector<std::string> problems;
    time_t window = 0;  // second of the last rescans, and how many in it
    int rescans_in_window = 0;
  };
  std::mutex mu;
  std::map<std::pair<std::string, std::string>, Entry> cache;  // (owner directory, fingerprint)
  long scans = 0;
};

StoreReader::StoreReader() : impl_(new Impl) {}
StoreReader::~StoreReader() = default;
long StoreReader::scans() const noexcept { return impl_->scans; }

namespace {
long long ns(const timespec& t) { return static_cast<long long>(t.tv_sec) * 1000000000LL + t.tv_nsec; }
bool is_admin(uid_t uid, const std::vector<uid_t>& admins) {
  for (uid_t a : admins)
    if (a == uid) return true;
  return false;
}
}  // namespace

// One owner's directory u<uid> scanned for one fingerprint. Only that owner can add names to it,
// so whatever others put in the store costs nothing here and hides nothing.
void StoreReader::scan_owner(int store_fd, const std::string& store, uid_t owner, const std::string& fingerprint,
                             std::vector<Owned>* records, std::vector<std::string>* problems) {
  const std::string sub = owner_dir_name(owner), where = "probe store " + store + "/" + sub;
  auto note = [problems](std::string what) {  // bounded: a directory full of junk must not fill the log
    if (problems->size() < 32) problems->push_back(std::move(what));
  };
  const int dfd = ::openat(store_fd, sub.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat dst {};
  if (dfd < 0) {
    if (errno != ENOENT) note(where + ": cannot open: " + std::strerror(errno) + " (a symlink?): not used");
    return;
  }
  if (::fstat(dfd, &dst) != 0 || dst.st_uid != owner || (dst.st_mode & (S_IWGRP | S_IWOTH))) {
    // Someone else made it (squatting on this uid's name) or others could write into it.
    note(where + " is owned by uid " + std::to_string(dst.st_uid) +
         (dst.st_uid != owner ? ", not the uid it names" : " and writable by others") + ": not used (remove it)");
    ::close(dfd);
    return;
  }
  DIR* d = ::fdopendir(dfd);
  if (!d) {
    ::close(dfd);
    return;
  }
  const std::string prefix = fingerprint + ".";
  const std::string owner_tag = ".u" + std::to_string(static_cast<unsigned long>(owner)) + ".rec";
  std::vector<Owned> found;
  std::size_t looked = 0;
  while (dirent* de = ::readdir(d)) {
    if (++looked > kMaxOwnerEntries) {
      // Partly read, it could miss one of this owner's records: none of them is used.
      note(where + ": more than " + std::to_string(kMaxOwnerEntries) + " entries: its records are not used");
      found.clear();
      break;
    }
    const std::string name = de->d_name;
    if (name.size() > 200 || name.compare(0, prefix.size(), prefix) != 0 || name.size() < owner_tag.size() ||
        name.compare(name.size() - owner_tag.size(), owner_tag.size(), owner_tag) != 0)
      continue;
    // The owner and kind are checked before anything is opened or read (lstat: no symlink followed).
    struct stat lst {};
    if (::fstatat(::dirfd(d), name.c_str(), &lst, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(lst.st_mode) ||
        lst.st_nlink != 1 || lst.st_uid != owner || lst.st_size > static_cast<off_t>(kMaxRecordBytes)) {
      note(name + ": not a single-linked regular file of uid " + std::to_string(owner) +
           " of at most 4096 bytes: ignored");
      continue;
    }
    const int fd = ::openat(::dirfd(d), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
      note(name + ": " + std::strerror(errno) + ": ignored");
      continue;
    }
    struct stat fst {};
    char buf[kMaxRecordBytes + 1];
    ssize_t got = -1;
    if (::fstat(fd, &fst) == 0 && fst.st_ino == lst.st_ino && S_ISREG(fst.st_mode) && fst.st_nlink == 1 &&
        fst.st_uid == owner && fst.st_size <= static_cast<off_t>(kMaxRecordBytes))
      got = ::read(fd, buf, sizeof buf);
    ::close(fd);
    if (got < 0 || got > static_cast<ssize_t>(kMaxRecordBytes)) {
      note(name + ": replaced while read: ignored");
      continue;
    }
    auto rec = parse_record(std::string_view(buf, static_cast<std::size_t>(got)));
    if (!rec) {
      note(name + ": " + rec.error().message + ": ignored");
      continue;
    }
    if (rec.value().fingerprint != fingerprint) {
      note(name + ": its fingerprint is not its name's: ignored");
      continue;
    }
    if (found.size() < kMaxOwnerRecords) found.push_back(Owned{std::move(rec).value(), owner});
  }
  ::closedir(d);
  records->insert(records->end(), found.begin(), found.end());
}

std::vector<Measurement> StoreReader::lookup(const std::string& dir, const std::string& fingerprint, uid_t job_uid,
                                             const std::vector<uid_t>& admins, ReadReport* report) noexcept {
  try {
    std::vector<Measurement> out;
    if (dir.empty() || dir[0] != '/' || fingerprint.size() != 16 ||
        fingerprint.find_first_not_of("0123456789abcdef") != std::string::npos)
      return out;
    // The owners whose directories count for this job: the admins, then the job's user.
    std::vector<uid_t> owners;
    for (uid_t a : admins)
      if (!is_admin(a, owners) && owners.size() < 64) owners.push_back(a);
    if (!is_admin(job_uid, owners)) owners.push_back(job_uid);
    struct stat root {};
    if (::lstat(dir.c_str(), &root) != 0) {
      if (report) report->problems.push_back("probe store " + dir + ": " + std::strerror(errno));
      return out;
    }
    std::lock_guard<std::mutex> lock(impl_->mu);
    const time_t second = std::time(nullptr);
    for (uid_t owner : owners) {
      // Per submission: one lstat per owner (never the store's own listing, which users can flood).
      struct stat st {};
      const std::string sub = dir + "/" + owner_dir_name(owner);
      Impl::Stamp stamp;
      if (::lstat(sub.c_str(), &st) == 0) stamp = Impl::Stamp{st.st_dev, st.st_ino, ns(st.st_mtim), ns(st.st_ctim)};
      stamp.store_ino = root.st_ino, stamp.store_uid = root.st_uid, stamp.store_mode = root.st_mode;
      auto key = std::make_pair(sub, fingerprint);
      auto it = impl_->cache.find(key);
      // A directory that changes all the time (its owner churning files to make slurmctld rescan)
      // is rescanned at most kMaxRescansPerSecond times a second per model.
      const bool churning = it != impl_->cache.end() && it->second.window == second &&
                            it->second.rescans_in_window >= kMaxRescansPerSecond;
      if ((it == impl_->cache.end() || !(it->second.stamp == stamp)) && !churning) {
        const int rescans = it != impl_->cache.end() && it->second.window == second ? it->second.rescans_in_window : 0;
        if (impl_->cache.size() > 4096) impl_->cache.clear();  // bounded: many models and users, rarely
        Impl::Entry e;
        e.stamp = stamp;
        e.window = second;
        e.rescans_in_window = rescans + 1;
        ++impl_->scans;
        // The store itself must be one that only admins control (or sticky, like /tmp).
        const int sfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat sst {};
        if (sfd < 0 || ::fstat(sfd, &sst) != 0) {
          e.problems.push_back("probe store " + dir + ": cannot open: " + std::strerror(errno));
        } else if (!is_admin(sst.st_uid, admins)) {
          e.problems.push_back("probe store " + dir + " is owned by uid " + std::to_string(sst.st_uid) +
                               ", not root/SlurmUser/trusted_users: not used");
        } else if ((sst.st_mode & (S_IWGRP | S_IWOTH)) && !(sst.st_mode & S_ISVTX)) {
          e.problems.push_back("probe store " + dir +
                               " is writable by others without the sticky bit (anyone could replace records): not used");
        } else if (st.st_ino != 0) {
          scan_owner(sfd, dir, owner, fingerprint, &e.records, &e.problems);
        }
        if (sfd >= 0) ::close(sfd);
        it = impl_->cache.insert_or_assign(key, std::move(e)).first;
      }
      for (const auto& o : it->second.records) {
        out.push_back(o.m);
        out.back().trust = is_admin(o.owner, admins) ? Trust::admin : Trust::own;
      }
      if (report)
        report->problems.insert(report->problems.end(), it->second.problems.begin(), it->second.problems.end());
    }
    return out;
  } catch (...) {
    if (report) report->problems.push_back("probe store " + dir + ": internal error while reading");
    return {};
  }
}

}  // namespace scaleguard::probe
