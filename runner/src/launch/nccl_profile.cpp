#include "launch/nccl_profile.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "scaleguard/nccl_env.h"
#include "scaleguard/build_info.h"

extern char** environ;

namespace scaleguard::run {
namespace {

// Whether the dynamic loader finds libraries in `dir` without LD_LIBRARY_PATH: listed in
// ld.so.conf.d (the EFA installer writes /etc/ld.so.conf.d/100_ofinccl.conf).
bool in_ld_so_conf(const std::string& root, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path conf = fs::path(root) / "etc/ld.so.conf.d";
  for (fs::directory_iterator it(conf, ec), end; !ec && it != end; it.increment(ec)) {
    std::ifstream in(it->path());
    std::string line;
    while (std::getline(in, line)) {
      while (!line.empty() && (line.back() == '/' || line.back() == ' ')) line.pop_back();
      const auto start = line.find_first_not_of(" /");  // absolute paths, read under `root`
      if (start == std::string::npos || line[start] == '#') continue;
      if ((fs::path(root) / line.substr(start)).lexically_normal() == fs::path(dir).lexically_normal()) return true;
    }
  }
  return false;
}

}  // namespace

std::string apply_nccl_profile() {
  if (std::getenv("SCALEGUARD_NCCL_PROFILE")) return "";
  NodeProbe probe;
  if (const char* root = std::getenv("SCALEGUARD_NODE_ROOT")) probe.root = root;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) {
    probe.node_name = host;
    probe.node_name = probe.node_name.substr(0, probe.node_name.find('.'));
  }
  const NodeInfo node = detect_node(probe);
  // Without EFA, NCCL's own choices are right for what mpirun starts outside Slurm (one box,
  // containers whose only interface may be lo, which tcp-v1's ^lo would leave NCCL without).
  if (profile_family(node) != "efa") return "";
  const char* dir_env = std::getenv("SCALEGUARD_NCCL_PROFILES");
  const std::string dir = dir_env ? dir_env : std::string(build_config_dir()) + "/nccl";
  const auto profile = load_profile(dir, profile_family(node));
  if (!profile.ok())
    return "warning: no NCCL profile applied (" + profile.error().str() +
           "); set SCALEGUARD_NCCL_PROFILES to the configs/nccl directory";
  Env current;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq != std::string::npos) current[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  std::string applied, kept, note;
  for (const auto& [name, value] : nccl_env(node, *profile, current)) {
    if (name == "LD_LIBRARY_PATH") {
      if (!in_ld_so_conf(probe.root, node.ofi_nccl_dir))
        note = "; the aws-ofi-nccl directory " + node.ofi_nccl_dir +
               " is neither on LD_LIBRARY_PATH nor in ld.so.conf.d, so NCCL cannot load the plugin: start with "
               "mpirun -x LD_LIBRARY_PATH=" + node.ofi_nccl_dir + ":$LD_LIBRARY_PATH";
      continue;
    }
    setenv(name.c_str(), value.c_str(), /*overwrite=*/0);
    applied += (applied.empty() ? "" : " ") + name + "=" + std::getenv(name.c_str());
  }
  // What the profile would have set but the user already had: the user's value stays.
  for (const auto& [name, value] : nccl_env(node, *profile, {}))
    if (name != "LD_LIBRARY_PATH" && current.count(name)) kept += (kept.empty() ? "" : " ") + name + "=" + current[name];
  return "NCCL profile " + profile->name + " applied (no SCALEGUARD_NCCL_PROFILE from a Slurm step): " + applied +
         (kept.empty() ? "" : "; kept the user's " + kept) + note;
}

}  // namespace scaleguard::run
