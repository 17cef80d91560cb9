// plugstack.conf arguments: strict key=value, each key at most once, unknown keys refused.
#include <map>

#include "plugin.h"
#include "scaleguard/build_info.h"

namespace scaleguard::spank {
namespace {
Config current;

bool sane_path(const std::string& value) {
  if (value.empty() || value.size() > 4096 || value[0] != '/') return false;
  for (char c : value)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  return true;
}
}  // namespace

const Config& config() { return current; }

bool load_config(int ac, char** av, std::string& error) {
  Config parsed;
  parsed.profiles = std::string(scaleguard::build_config_dir()) + "/nccl";
  const std::map<std::string, std::string Config::*> keys = {
      {"policy", &Config::policy}, {"catalog", &Config::catalog},
      {"sysfs", &Config::sysfs},   {"profiles", &Config::profiles},
      {"plan_dir", &Config::plan_dir}};
  std::map<std::string, bool> seen;
  for (int i = 0; i < ac; ++i) {
    const std::string arg = av[i] ? av[i] : "";
    const auto eq = arg.find('=');
    const std::string key = arg.substr(0, eq);
    const auto it = keys.find(key);
    if (eq == std::string::npos || it == keys.end()) {
      error = "unknown argument '" + arg.substr(0, 80) + "' (accepted: policy=PATH catalog=PATH sysfs=ROOT profiles=DIR plan_dir=DIR)";
      return false;
    }
    if (seen[key]) {
      error = key + "= given twice";
      return false;
    }
    seen[key] = true;
    const std::string value = arg.substr(eq + 1);
    if (!sane_path(value)) {
      error = key + "=: not an absolute path";
      return false;
    }
    parsed.*(it->second) = value;
  }
  if (parsed.policy.empty()) {
    error = "policy=PATH is required (the admin policy with the checkpoint roots)";
    return false;
  }
  current = parsed;
  return true;
}

}  // namespace scaleguard::spank
