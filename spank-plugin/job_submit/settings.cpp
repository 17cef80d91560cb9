#include "settings.h"

#include <cstdlib>
#include <fstream>

#include "scaleguard/metrics.h"
#include "text.h"

namespace sg_slurm {
namespace {

std::string dir_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string resolve(const std::string& path, const std::string& base_dir) {
  return path.empty() || path[0] == '/' ? path : base_dir + "/" + path;
}

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

}  // namespace

scaleguard::Result<Settings> load_settings(const std::string& slurm_conf_path) {
  using scaleguard::Error;
  Settings s;
  if (const char* env = std::getenv("SCALEGUARD_JOB_SUBMIT_CONF"); env && *env) {
    s.file = env;
  } else if (!slurm_conf_path.empty()) {
    s.file = dir_of(slurm_conf_path) + "/job_submit_scaleguard.conf";
  } else {
    return Error{"cannot locate job_submit_scaleguard.conf", "", 0, "",
                 "set SCALEGUARD_JOB_SUBMIT_CONF in slurmctld's environment"};
  }
  std::ifstream in(s.file);
  if (!in) {
    return Error{"cannot read the settings file", s.file, 0, "",
                 "write 'policy=/path/to/policy.ini' there (see configs/slurm/README.md)"};
  }
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    line = trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    auto eq = line.find('=');
    if (eq == std::string::npos)
      return Error{"expected key=value", s.file, n, "", "e.g. policy=/etc/slurm/policy.ini"};
    std::string key = trim(line.substr(0, eq)), value = trim(line.substr(eq + 1));
    if (value.empty() || value.size() > kMaxValue || has_control(value))
      return Error{"empty or invalid value", s.file, n, key, "give a file path"};
    if (key == "policy") {
      s.policy = resolve(value, dir_of(s.file));
    } else if (key == "catalog") {
      s.catalog = resolve(value, dir_of(s.file));
    } else if (key == "metrics_file") {
      if (std::string why = scaleguard::metrics::check_textfile_path(value); !why.empty())
        return Error{"metrics_file " + why, s.file, n, key, "e.g. /var/lib/prometheus/node-exporter/scaleguard.prom"};
      s.metrics_file = value;
    } else if (key == "metrics_interval") {
      if (value.size() > 4 || value.find_first_not_of("0123456789") != std::string::npos || std::stoi(value) < 1 ||
          std::stoi(value) > 3600)
        return Error{"metrics_interval must be whole seconds from 1 to 3600", s.file, n, key, "e.g. 15"};
      s.metrics_interval_s = std::stoi(value);
    } else {
      return Error{"unknown key '" + key + "'", s.file, n, key, "known keys: policy, catalog, metrics_file, metrics_interval"};
    }
  }
  if (s.policy.empty())
    return Error{"no policy= line", s.file, 0, "policy", "add policy=/path/to/policy.ini"};
  return s;
}

}  // namespace sg_slurm
