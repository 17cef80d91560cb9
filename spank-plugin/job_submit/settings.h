// job_submit_scaleguard.conf: where the plugin finds its policy. key=value lines, '#'
// comments; keys `policy` (required) and `catalog` (optional override of the policy's).
// Found at $SCALEGUARD_JOB_SUBMIT_CONF, else beside slurm.conf.
#pragma once
#include <string>

#include "scaleguard/result.h"

namespace sg_slurm {

struct Settings {
  std::string file;     // the settings file itself (for messages)
  std::string policy;   // absolute, or relative to the settings file's directory
  std::string catalog;  // empty = the catalog the policy names
};

// `slurm_conf_path`: slurmctld's slurm.conf (may be empty when unknown).
scaleguard::Result<Settings> load_settings(const std::string& slurm_conf_path);

}  // namespace sg_slurm
