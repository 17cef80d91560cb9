#include "health/health.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <sstream>

#include "config/exit_codes.h"

namespace scaleguard::run {
namespace {

constexpr size_t kNameLen = 64;

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
double wall_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string read_file(const std::string& path, size_t max = 1 << 20) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::string s(max, '\0');
  in.read(&s[0], static_cast<std::streamsize>(max));
  s.resize(static_cast<size_t>(in.gcount()));
  return s;
}

// One rank's heartbeat as the watchdog writes it (a single line).
struct Beat {
  int rank = -1;
  std::string node, host;
  long pid = 0;
  long long step = -1;
  std::string section;
  double since = 0, beat = 0;
};

bool parse_beat(const std::string& text, Beat& b) {
  char node[kNameLen + 1] = {}, host[kNameLen + 1] = {}, section[32] = {};
  return std::sscanf(text.c_str(), "rank %d node %64s host %64s pid %ld step %lld section %31s since %lf beat %lf",
                     &b.rank, node, host, &b.pid, &b.step, section, &b.since, &b.beat) == 8 &&
         (b.node = node, b.host = host, b.section = section, true);
}

// Runs a command, returns its output (at most `max` bytes).
std::string capture(const std::string& cmd, size_t max = 64 * 1024) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0 && out.size() < max) out.append(buf, n);
  pclose(p);
  return out;
}

// mkdir -p: the checkpoint directory (the heartbeats' parent) may not exist yet.
void make_dirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i)
    if (i == path.size() || path[i] == '/') ::mkdir(path.substr(0, i).c_str(), 0750);  // EEXIST is fine
}

bool have_gdb() {
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/bin:/bin");
  std::string d;
  while (std::getline(ss, d, ':'))
    if (!d.empty() && access((d + "/gdb").c_str(), X_OK) == 0) return true;
  return false;
}

// What can be seen of a local process's stacks: every thread's state and wait channel, the
// kernel stack where readable (root), and the user stacks through gdb when installed.
std::string stacks_of(long pid) {
  std::string out, base = "/proc/" + std::to_string(pid);
  std::string status = read_file(base + "/status", 4096);
  auto st = status.find("State:");
  if (st != std::string::npos) out += status.substr(st, status.find('\n', st) - st) + "\n";
  if (DIR* d = opendir((base + "/task").c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::string t = base + "/task/" + e->d_name;
      out += "thread " + std::string(e->d_name) + " wchan " + read_file(t + "/wchan", 256) + "\n";
      std::string k = read_file(t + "/stack", 8192);
      if (!k.empty()) out += k;
    }
    closedir(d);
  }
  if (have_gdb())
    out += capture("timeout -s KILL 20 gdb -batch -nx -q -p " + std::to_string(pid) +
                   " -ex 'thread apply all bt 30' 2>&1 | grep -E '^(Thread|#)'");
  else
    out += "(gdb not installed: user-space stacks not taken)\n";
  return out;
}

}  // namespace

Health::Health(const HealthSettings& s, const Launch& l)
    : s_(s), l_(l), limits_(s.limits), straggler_(s.straggler) {
  const char* nn = std::getenv("SLURMD_NODENAME");
  node_ = nn && *nn ? nn : l.host;
  node_ = node_.substr(0, kNameLen);
  host_ = l.host.substr(0, kNameLen);
  for (std::string* s : {&node_, &host_})
    for (char& c : *s)
      if (c <= ' ') c = '_';
  std::vector<char> mine(kNameLen + 1, '\0'), all((kNameLen + 1) * static_cast<size_t>(l.world));
  std::memcpy(mine.data(), node_.data(), node_.size());
  if (!s_.dir.empty()) {
    make_dirs(s_.dir);  // every rank tries
    // An earlier attempt's reports, read already by the launcher (stragglers stay: they are the job's).
    if (l.rank == 0) {
      ::unlink((s_.dir + "/hang").c_str());
      if (DIR* d = opendir(s_.dir.c_str())) {
        while (dirent* e = readdir(d))
          if (std::strncmp(e->d_name, "stacks-rank-", 12) == 0) ::unlinkat(dirfd(d), e->d_name, 0);
        closedir(d);
      }
    }
  }
  // After rank 0 removed the old report: nobody can detect a hang before this returns.
  MPI_Allgather(mine.data(), static_cast<int>(kNameLen + 1), MPI_CHAR, all.data(), static_cast<int>(kNameLen + 1),
                MPI_CHAR, l.world_comm);
  for (int r = 0; r < l.world; ++r) node_of_rank_.emplace_back(&all[static_cast<size_t>(r) * (kNameLen + 1)]);
  if (!s_.dir.empty()) {
    std::string path = s_.dir + "/rank-" + std::to_string(l.rank);
    hb_fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0640);
    if (hb_fd_ < 0)
      std::fprintf(stderr, "scaleguard-run: rank %d: no heartbeat file %s (%s): hangs are still detected, but the "
                           "hung rank cannot be named\n", l.rank, path.c_str(), std::strerror(errno));
  }
  since_ns_ = steady_ns();
  since_wall_ = wall_s();
  if (s_.watchdog) {
    write_heartbeat();
    thread_ = std::thread([this] { watch(); });
  }
}

Health::~Health() {
  {
    std::lock_guard<std::mutex> lock(wake_mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (hb_fd_ >= 0) ::close(hb_fd_);
}

void Health::enter(Section s, int64_t step) {
  step_ = step;
  since_ns_ = steady_ns();
  since_wall_ = wall_s();
  section_ = static_cast<int>(s);
}

void Health::record(Section s, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  limits_.record(s, seconds);
}

std::string Health::limit_text(Section s) const {
  std::lock_guard<std::mutex> lock(mu_);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g s", limits_.limit(s));
  return std::string(buf) + " (" + limits_.explain(s) + ")";
}

std::vector<NodeVerdict> Health::add_compute(int64_t step, double compute_s) {
  window_s_ += compute_s;
  if (s_.straggler.every <= 0 || step % s_.straggler.every != 0) return {};
  std::vector<double> all(static_cast<size_t>(l_.world));
  MPI_Allgather(&window_s_, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, l_.world_comm);
  window_s_ = 0;
  std::vector<NodeVerdict> v = straggler_.observe(all, node_of_rank_);
  if (l_.rank == 0 && !s_.dir.empty())
    for (const auto& n : v)
      if (n.named) {
        std::ofstream f(s_.dir + "/stragglers", std::ios::app);
        f << n.node << " step " << step << " ratio " << n.ratio << " windows " << n.streak << "\n";
      }
  return v;
}

void Health::write_heartbeat() {
  if (hb_fd_ < 0) return;
  char line[256];
  int n = std::snprintf(line, sizeof line, "rank %d node %s host %s pid %ld step %lld section %s since %.3f beat %.3f\n",
                        l_.rank, node_.c_str(), host_.c_str(), static_cast<long>(getpid()), static_cast<long long>(step_.load()),
                        section_name(static_cast<Section>(section_.load())), since_wall_.load(), wall_s());
  if (n <= 0) return;
  // Fixed length (spaces after the newline): a reader never sees a shorter line's tail.
  std::memset(line + n, ' ', sizeof line - static_cast<size_t>(n));
  (void)!::pwrite(hb_fd_, line, sizeof line, 0);
}

void Health::watch() {
  std::unique_lock<std::mutex> lock(wake_mu_);
  while (!stop_) {
    wake_.wait_for(lock, std::chrono::duration<double>(s_.tick_s));
    if (stop_) break;
    write_heartbeat();
    const Section s = static_cast<Section>(section_.load());
    const int64_t step = step_.load();
    const double waited = static_cast<double>(steady_ns() - since_ns_.load()) * 1e-9;
    double limit;
    {
      std::lock_guard<std::mutex> l(mu_);
      limit = limits_.limit(s);
    }
    // The section may have changed between the loads: only a section still current counts.
    if (waited > limit && static_cast<Section>(section_.load()) == s && step_.load() == step) hung(s, step, waited, limit);
  }
}

void Health::hung(Section s, int64_t step, double waited, double limit) {
  const double now = wall_s();
  const double stale_after = std::max(5.0, 5 * s_.tick_s);
  std::string explain;
  {
    std::lock_guard<std::mutex> l(mu_);
    explain = limits_.explain(s);
  }
  std::fprintf(stderr,
               "scaleguard-run: hang: rank %d (node %s) waited %.1f s in section %s at step %lld, past its limit "
               "%.3g s (%s)\n",
               l_.rank, node_.c_str(), waited, section_name(s), static_cast<long long>(step), limit, explain.c_str());
  // Who is not progressing: a heartbeat that stopped (the process is stopped or frozen), else
  // whoever is behind this rank's step or in another section.
  std::vector<Beat> stale, behind;
  if (!s_.dir.empty()) {
    for (int r = 0; r < l_.world; ++r) {
      Beat b;
      if (!parse_beat(read_file(s_.dir + "/rank-" + std::to_string(r), 512), b) || b.rank != r) continue;
      if (now - b.beat > stale_after) stale.push_back(b);
      else if (b.step < step || (b.step == step && b.section != section_name(s))) behind.push_back(b);
    }
  }
  std::vector<Beat>& suspects = !stale.empty() ? stale : behind;
  std::string report;
  for (const Beat& b : suspects) {
    char line[512];
    std::snprintf(line, sizeof line,
                  "rank=%d node=%s pid=%ld step=%lld section=%s heartbeat_age_s=%.1f in_section_s=%.1f "
                  "detected_by=%d waited_s=%.1f limit_s=%.3g why=%s\n",
                  b.rank, b.node.c_str(), b.pid, b.step, b.section.c_str(), now - b.beat, now - b.since, l_.rank,
                  waited, limit, &suspects == &stale ? "heartbeat-stopped" : "behind");
    report += line;
    std::fprintf(stderr, "scaleguard-run: hang: not progressing: %s", line);
  }
  if (suspects.empty())
    std::fprintf(stderr, "scaleguard-run: hang: no rank's heartbeat stopped or lags (%s): a collective that never "
                         "completes on every rank\n", s_.dir.empty() ? "no --health-dir" : "all alive");
  if (!s_.dir.empty()) {
    // The first rank here writes the report the launcher reads (its first line names the node).
    int fd = ::open((s_.dir + "/hang").c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    if (fd >= 0) {
      if (report.empty()) report = "rank=-1 node=- detected_by=" + std::to_string(l_.rank) + " why=no-suspect\n";
      (void)!::write(fd, report.data(), report.size());
      ::close(fd);
    }
    // Stacks of the suspects on this host, once each (the first local rank to claim them).
    for (const Beat& b : suspects) {
      if (b.host != host_ || b.pid <= 0 || (::kill(static_cast<pid_t>(b.pid), 0) != 0 && errno != EPERM)) continue;
      std::string path = s_.dir + "/stacks-rank-" + std::to_string(b.rank);
      int sfd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
      if (sfd < 0) continue;
      std::string st = stacks_of(b.pid);
      (void)!::write(sfd, st.data(), st.size());
      ::close(sfd);
      std::fprintf(stderr, "scaleguard-run: hang: stacks of rank %d (pid %ld on %s), also in %s:\n%s", b.rank, b.pid,
                   b.node.c_str(), path.c_str(), st.c_str());
      std::fflush(stderr);
      ::close(::open((path + ".done").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0640));
    }
    // The first rank to exit ends the step (srun --kill-on-bad-exit, mpirun): give a stack
    // dump in progress (gdb takes seconds) up to 25 s before leaving.
    for (int i = 0; i < 125; ++i) {
      bool busy = false;
      for (const Beat& b : suspects) {
        const std::string path = s_.dir + "/stacks-rank-" + std::to_string(b.rank);
        busy = busy || (::access(path.c_str(), F_OK) == 0 && ::access((path + ".done").c_str(), F_OK) != 0);
      }
      if (!busy) break;
      ::usleep(200 * 1000);
    }
  }
  std::fprintf(stderr, "scaleguard-run: hang: rank %d exits %d (restart in-job)\n", l_.rank, kExitHang);
  std::fflush(stderr);
  std::_Exit(kExitHang);
}

}  // namespace scaleguard::run
