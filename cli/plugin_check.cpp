// `scaleguard policy check --plugin-version`: the plugin's own parser judges the file, so the
// answer is exact for any plugin release that exports scaleguard_policy_check (this one and
// later). The .so is loaded in a child process (a plugin built for another Slurm may crash it)
// after libslurmfull from the same PluginDir, which supplies the Slurm symbols it needs.
#include "plugin_check.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "scaleguard/build_info.h"
#include "scaleguard/text.h"
#include "subprocess.h"

namespace scaleguard::cli {
namespace {

constexpr const char* kPlugin = "job_submit_scaleguard.so";

// One value of `scontrol show config` ("" when scontrol fails or lacks it).
std::string slurm_config(const std::string& key) {
  std::string text;
  try {
    text = run_capture(Command{{"scontrol", "show", "config"}});
  } catch (const Failure&) {
    return "";
  }
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto eq = line.find('=');
    if (eq != std::string::npos && text::trim(line.substr(0, eq)) == key) return text::trim(line.substr(eq + 1));
  }
  return "";
}

struct Answer {
  bool asked = false;   // the plugin exports the check
  bool suits = false;
  std::string release, text;
};

// Asks the plugin at `path` in a child; libslurmfull.so beside it (or libslurm) first.
Answer ask(const std::string& path, const std::string& slurm_lib, const std::string& policy, const std::string& catalog) {
  int fds[2];
  Answer a;
  if (pipe(fds) != 0) return a.text = "pipe failed", a;
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string out;
    if (!dlopen(slurm_lib.c_str(), RTLD_NOW | RTLD_GLOBAL) && !dlopen("libslurm.so", RTLD_NOW | RTLD_GLOBAL)) {
      out = "E\ncannot load Slurm's library for it: " + std::string(dlerror());
    } else if (void* so = dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL); !so) {
      out = "E\ncannot load it: " + std::string(dlerror());
    } else {
      auto check = reinterpret_cast<int (*)(const char*, const char*, char*, size_t)>(dlsym(so, "scaleguard_policy_check"));
      auto release = reinterpret_cast<const char* (*)()>(dlsym(so, "scaleguard_plugin_release"));
      if (!check || !release) {
        out = "O\n";   // an older plugin: it cannot be asked
      } else {
        std::vector<char> why(4096);
        const int rc = check(policy.c_str(), catalog.c_str(), why.data(), why.size());
        out = std::string(rc == 0 ? "Y\n" : "N\n") + release() + "\n" + why.data();
      }
    }
    (void)!write(fds[1], out.data(), out.size());
    _exit(0);
  }
  close(fds[1]);
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  if (pid > 0) waitpid(pid, &status, 0);
  if (got.empty()) return a.text = "loading it failed (the check process died)", a;
  const auto nl = got.find('\n');
  const char kind = got[0];
  std::string rest = nl == std::string::npos ? "" : got.substr(nl + 1);
  if (kind == 'E') return a.text = rest, a;
  if (kind == 'O') return a.text = "it predates `policy check --plugin-version` and cannot be asked", a;
  a.asked = true;
  a.suits = kind == 'Y';
  const auto nl2 = rest.find('\n');
  a.release = rest.substr(0, nl2);
  a.text = nl2 == std::string::npos ? "" : rest.substr(nl2 + 1);
  return a;
}

// The job_submit_scaleguard.so mapped by the running slurmctld on this host: "" when none,
// else a path that opens it (/proc/PID/map_files/..., root only) and, in *file, the path it
// was loaded from (" (deleted)" when it has been replaced since).
std::string running_plugin(std::string* file, std::string* pid_text) {
  std::ifstream pid_in(slurm_config("SlurmctldPidFile"));
  long pid = 0;
  if (!(pid_in >> pid) || pid <= 0) return "";
  *pid_text = std::to_string(pid);
  std::ifstream maps("/proc/" + *pid_text + "/maps");
  for (std::string line; std::getline(maps, line);) {
    const auto at = line.find(kPlugin);
    if (at == std::string::npos) continue;
    const auto slash = line.find('/');
    *file = slash == std::string::npos ? "" : line.substr(slash);
    return "/proc/" + *pid_text + "/map_files/" + line.substr(0, line.find(' '));
  }
  return "";
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

bool report(const std::string& what, const Answer& a, const std::string& policy) {
  if (!a.asked) {
    std::printf("%s: cannot tell: %s\n", what.c_str(), a.text.c_str());
    return false;
  }
  if (a.suits) std::printf("%s (scaleguard %s): loads %s\n", what.c_str(), a.release.c_str(), policy.c_str());
  else std::printf("%s (scaleguard %s): does NOT load %s: %s\n", what.c_str(), a.release.c_str(), policy.c_str(), a.text.c_str());
  return a.suits;
}

}  // namespace

int check_with_plugins(const std::string& policy, const std::string& catalog, const std::string& plugin) {
  std::string installed = plugin, slurm_lib;
  for (const auto& dir : text::split(slurm_config("PluginDir"), ':')) {
    if (dir.empty()) continue;
    if (installed.empty() && access((dir + "/" + kPlugin).c_str(), R_OK) == 0) installed = dir + "/" + kPlugin;
    if (slurm_lib.empty() && access((dir + "/libslurmfull.so").c_str(), R_OK) == 0) slurm_lib = dir + "/libslurmfull.so";
  }
  std::string running_file, pid;
  const std::string running = running_plugin(&running_file, &pid);
  if (installed.empty() && running.empty()) {
    std::printf("no %s found (not in slurmctld's PluginDir; name it with --plugin PATH)\n", kPlugin);
    return 1;
  }
  // Slurm's own library for the plugin's Slurm symbols: slurmctld's, else the one beside the .so.
  const auto lib_beside = [&](const std::string& so) {
    return slurm_lib.empty() ? so.substr(0, so.rfind('/') + 1) + "libslurmfull.so" : slurm_lib;
  };
  bool ok = true;
  if (!installed.empty())
    ok = report("installed plugin " + installed, ask(installed, lib_beside(installed), policy, catalog), policy) && ok;
  if (!running.empty()) {
    const std::string what = "plugin running in slurmctld (pid " + pid + ")";
    // By inode, not by name: PluginDir may hold a link to the file slurmctld mapped (its maps
    // name the link's target), and a replaced file keeps the name but not the inode.
    if (!installed.empty() && same_file(running, installed)) {
      std::printf("%s: the installed file\n", what.c_str());
    } else {
      // Replaced on disk since slurmctld loaded it: ask the copy it runs (root may open it).
      const std::string from = running_file.substr(0, running_file.find(" (deleted)"));
      ok = report(what + ", loaded from " + running_file, ask(running, lib_beside(from), policy, catalog), policy) && ok;
      std::printf("restart slurmctld to run the installed plugin\n");
    }
  }
  std::printf("this scaleguard: %s\n", build_version());
  return ok ? 0 : 1;
}

}  // namespace scaleguard::cli
