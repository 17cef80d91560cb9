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
  kv("format", "1");
  kv("fingerprint", m.fingerprint);
  kv("instance", m.instance);
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
       seen_time = false;
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
      if (value != "1") return bad("unknown record format '" + value.substr(0, 16) + "'");
      seen_format = true;
    } else if (key == "fingerprint") {
      if (value.size() != 16 || value.find_first_not_of("0123456789abcdef") != std::string::npos)
        return bad("malformed fingerprint");
      m.fingerprint = value, seen_fp = true;
    } else if (key == "instance") {
      if (!token_ok(value, 64)) return bad("malformed instance");
      m.instance = value, seen_inst = true;
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
  if (!seen_format || !seen_fp || !seen_inst || !seen_speedup || !seen_comm || !seen_time)
    return bad("record misses format, fingerprint, instance, speedup, comm_ratio or time");
  return m;
}

std::string record_name(const Measurement& m, uid_t uid) {
  return m.fingerprint + "." + m.instance + ".r" + std::to_string(m.ranks) + "n" + std::to_string(m.nodes) + ".u" +
         std::to_string(static_cast<unsigned long>(uid)) + ".rec";
}

Result<std::string> write_record(const std::string& dir, const Measurement& m, const std::string& model_spec) {
  try {
    const std::string text = format_record(m, model_spec);
    auto check = parse_record(text);
    if (!check) return Error{"refusing to write an invalid record: " + check.error().message, dir, 0, "", ""};
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
      return Error{std::string("cannot open the probe store: ") + std::strerror(errno), dir, 0, "",
                   "create it (root-owned, mode 1777) or name another with --store"};
    const std::string name = record_name(m, ::geteuid());
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
    return Error{std::string("internal error: ") + e.what(), dir, 0, "", ""};
  }
}

// --- reader ----------------------------------------------------------------------------------

struct StoreReader::Impl {
  struct Stamp {
    dev_t dev = 0;
    ino_t ino = 0;
    long long mtime_ns = 0, ctime_ns = 0;
    bool operator==(const Stamp& o) const {
      return dev == o.dev && ino == o.ino && mtime_ns == o.mtime_ns && ctime_ns == o.ctime_ns;
    }
  };
  struct Owned {
    Measurement m;
    uid_t owner;
  };
  struct Entry {
    Stamp stamp;
    std::vector<Owned> records;
    std::vector<std::string> problems;
    time_t window = 0;  // second of the last rescans, and how many in it
    int rescans_in_window = 0;
  };
  std::mutex mu;
  std::map<std::pair<std::string, std::string>, Entry> cache;  // (dir, fingerprint)
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

std::vector<Measurement> StoreReader::lookup(const std::string& dir, const std::string& fingerprint, uid_t job_uid,
                                             const std::vector<uid_t>& admins, ReadReport* report) noexcept {
  try {
    std::vector<Measurement> out;
    if (dir.empty() || dir[0] != '/' || fingerprint.size() != 16 ||
        fingerprint.find_first_not_of("0123456789abcdef") != std::string::npos)
      return out;
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) {
      if (report) report->problems.push_back("probe store " + dir + ": " + std::strerror(errno));
      return out;
    }
    Impl::Stamp stamp{st.st_dev, st.st_ino, ns(st.st_mtim), ns(st.st_ctim)};
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto key = std::make_pair(dir, fingerprint);
    auto it = impl_->cache.find(key);
    // A directory that changes all the time (someone churning files to make slurmctld rescan on
    // every submission) is rescanned at most kMaxRescansPerSecond times a second per model.
    const time_t second = std::time(nullptr);
    const bool churning = it != impl_->cache.end() && it->second.window == second &&
                          it->second.rescans_in_window >= kMaxRescansPerSecond;
    if ((it == impl_->cache.end() || !(it->second.stamp == stamp)) && !churning) {
      const int rescans = it != impl_->cache.end() && it->second.window == second ? it->second.rescans_in_window : 0;
      if (impl_->cache.size() > 1024) impl_->cache.clear();  // bounded: many models, rarely
      Impl::Entry e;
      e.stamp = stamp;
      e.window = second;
      e.rescans_in_window = rescans + 1;
      ++impl_->scans;
      const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      struct stat dst {};
      if (dfd < 0 || ::fstat(dfd, &dst) != 0) {
        e.problems.push_back("probe store " + dir + ": cannot open: " + std::strerror(errno));
        if (dfd >= 0) ::close(dfd);
      } else if (!is_admin(dst.st_uid, admins)) {
        e.problems.push_back("probe store " + dir + " is owned by uid " + std::to_string(dst.st_uid) +
                             ", not root/SlurmUser/trusted_users: not used");
        ::close(dfd);
      } else if ((dst.st_mode & (S_IWGRP | S_IWOTH)) && !(dst.st_mode & S_ISVTX)) {
        e.problems.push_back("probe store " + dir +
                             " is writable by others without the sticky bit (anyone could replace records): not used");
        ::close(dfd);
      } else {
        DIR* d = ::fdopendir(dfd);
        if (!d) {
          ::close(dfd);
        } else {
          const std::string prefix = fingerprint + ".";
          auto note = [&e](std::string what) {  // bounded: a store full of junk must not fill the log
            if (e.problems.size() < 32) e.problems.push_back(std::move(what));
          };
          std::size_t looked = 0;
          while (dirent* de = ::readdir(d)) {
            if (++looked > kMaxDirEntries) {
              // Partly read, it could miss a trusted record: not used at all (the model decides).
              e.problems.push_back("probe store " + dir + ": more than " + std::to_string(kMaxDirEntries) +
                                   " entries: not used (clean it up)");
              e.records.clear();
              break;
            }
            const std::string name = de->d_name;
            if (name.size() > 200 || name.compare(0, prefix.size(), prefix) != 0 || name.size() < 4 ||
                name.compare(name.size() - 4, 4, ".rec") != 0)
              continue;
            const int fd = ::openat(::dirfd(d), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
            if (fd < 0) {
              note(name + ": " + std::strerror(errno) + " (a symlink?): ignored");
              continue;
            }
            struct stat fst {};
            char buf[kMaxRecordBytes + 1];
            ssize_t got = -1;
            if (::fstat(fd, &fst) == 0 && S_ISREG(fst.st_mode) && fst.st_nlink == 1 &&
                fst.st_size <= static_cast<off_t>(kMaxRecordBytes))
              got = ::read(fd, buf, sizeof buf);
            ::close(fd);
            if (got < 0 || got > static_cast<ssize_t>(kMaxRecordBytes)) {
              note(name + ": not a single-linked regular file of at most 4096 bytes: ignored");
              continue;
            }
            // The name says whose it is; it must agree with the owner (no squatting on another uid's name).
            const std::string owner_tag = ".u" + std::to_string(static_cast<unsigned long>(fst.st_uid)) + ".rec";
            if (name.size() < owner_tag.size() || name.compare(name.size() - owner_tag.size(), owner_tag.size(), owner_tag) != 0) {
              note(name + ": owned by uid " + std::to_string(fst.st_uid) + ", not the uid it names: ignored");
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
            if (e.records.size() < 256) e.records.push_back(Impl::Owned{std::move(rec).value(), fst.st_uid});
          }
          ::closedir(d);
        }
      }
      it = impl_->cache.insert_or_assign(key, std::move(e)).first;
    }
    for (const auto& o : it->second.records) {
      if (is_admin(o.owner, admins)) {
        out.push_back(o.m);
        out.back().trust = Trust::admin;
      } else if (o.owner == job_uid) {
        out.push_back(o.m);
        out.back().trust = Trust::own;
      }
    }
    if (report)
      report->problems.insert(report->problems.end(), it->second.problems.begin(), it->second.problems.end());
    return out;
  } catch (...) {
    if (report) report->problems.push_back("probe store " + dir + ": internal error while reading");
    return {};
  }
}

}  // namespace scaleguard::probe
