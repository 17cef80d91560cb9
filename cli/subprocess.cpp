#include "subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "scaleguard/report.h"

namespace scaleguard::cli {
namespace {
constexpr std::size_t kMaxStderrBytes = 4096;
}  // namespace

void run_lines(const Command& command, std::size_t max_line,
               const std::function<void(const std::string& line, bool cut)>& each) {
  const auto& args = command.args;
  int out[2], err[2], exec_err[2];
  if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC) || pipe2(exec_err, O_CLOEXEC))
    throw Failure{std::string("pipe: ") + std::strerror(errno)};
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw Failure{std::string("fork: ") + std::strerror(errno)};
  if (pid == 0) {
    for (const auto& e : command.env) putenv(const_cast<char*>(e.c_str()));
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    execvp(argv[0], argv.data());
    const int e = errno;
    (void)!write(exec_err[1], &e, sizeof e);
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  close(exec_err[1]);
  int exec_errno = 0;
  const bool exec_failed = read(exec_err[0], &exec_errno, sizeof exec_errno) == sizeof exec_errno;
  close(exec_err[0]);
  const auto reap = [&](bool stop) {
    for (int fd : {out[0], err[0]})
      if (fd >= 0) close(fd);
    if (stop) kill(pid, SIGTERM);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
  };

  std::string line, stderr_text;
  bool cut = false;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  char buf[65536];
  try {
    while (open_fds > 0) {
      if (poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        break;
      }
      for (auto& f : fds) {
        if (f.fd < 0 || !(f.revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const ssize_t n = read(f.fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          if (f.fd == out[0]) out[0] = -1;
          else err[0] = -1;
          close(f.fd);
          f.fd = -1;
          --open_fds;
          continue;
        }
        if (f.fd == err[0]) {
          stderr_text.append(buf, std::min<std::size_t>(n, kMaxStderrBytes - std::min(kMaxStderrBytes, stderr_text.size())));
          continue;
        }
        for (ssize_t i = 0; i < n;) {
          const char* nl = static_cast<const char*>(std::memchr(buf + i, '\n', n - i));
          const std::size_t len = nl ? nl - (buf + i) : n - i;
          const std::size_t room = max_line - std::min(max_line, line.size());
          if (len > room) cut = true;
          line.append(buf + i, std::min(len, room));
          i += len;
          if (nl) {
            each(line, cut);
            line.clear();
            cut = false;
            ++i;
          }
        }
      }
    }
    if (!line.empty()) each(line, cut);
  } catch (...) {
    reap(true);
    throw;
  }
  const int status = reap(false);
  if (exec_failed) {
    if (exec_errno == ENOENT)
      throw Failure{args[0] + " not found in PATH: install slurm-client on this host" + command.missing_hint};
    throw Failure{"cannot run " + args[0] + ": " + std::strerror(exec_errno)};
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    while (!stderr_text.empty() && (stderr_text.back() == '\n' || stderr_text.back() == '\r')) stderr_text.pop_back();
    const std::string how = WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                              : "signal " + std::to_string(WTERMSIG(status));
    throw Failure{args[0] + " failed (" + how + ")" + (stderr_text.empty() ? std::string() : ": " + stderr_text)};
  }
}

// stdout whole, through run_lines: one reader of a command's output (a line is kept with its
// newline; output past max_bytes stops the command and is a Failure).
std::string run_capture(const Command& command) {
  std::string text;
  run_lines(command, command.max_bytes, [&](const std::string& line, bool cut) {
    if (cut || text.size() + line.size() + 1 > command.max_bytes)
      throw Failure{command.args[0] + " printed more than " + std::to_string(command.max_bytes >> 20) + " MiB" +
                    command.too_big_hint};
    text += line;
    text += '\n';
  });
  return text;
}

std::vector<std::string> sacct_runs_arguments(const std::string& since, const std::string& until, bool steps,
                                              const char* format) {
  // -D: every run of a requeued job. --state=RUNNING selects by each run's own start and end
  // ("ran during the window"); without it sacct also requires EligibleTime < --endtime, and
  // Slurm rewrites a requeued run's EligibleTime to the job's next begin time, so a run that
  // lay inside the window could vanish. SUSPENDED keeps a job that ran in the window and is
  // suspended now (no end yet); CANCELLED adds the records of jobs cancelled while they
  // waited, which give a requeued job its final state.
  // --delimiter: 0x1f, not '|': a '|' is common in AdminComment. kSacctFormat asks for no
  // column a user writes (JobName, Comment), so no record can be forged by its text.
  std::vector<std::string> args = {"sacct", "-a", "-D", "--parsable2",
                                   std::string("--delimiter=") + report::kSacctDelimiter,
                                   "--state=RUNNING,SUSPENDED,CANCELLED",
                                   "--format=" + std::string(format),
                                   "--starttime=" + since, "--endtime=" + until};
  if (!steps) args.insert(args.begin() + 3, "-X");
  return args;
}

}  // namespace scaleguard::cli
