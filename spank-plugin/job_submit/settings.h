// job_submit_scaleguard.conf: where the plugin finds its policy. key=value lines, '#'
// comments; keys `policy` (required), `catalog` (optional override of the policy's),
// `metrics_file` and `metrics_interval` (Prometheus textfile; off without metrics_file).
// Found at $SCALEGUARD_JOB_SUBMIT_CONF, else beside slurm.conf.
#pragma once
#include <string>

#include "scaleguard/result.h"

namespace sg_slurm {

struct Settings {
  std::string file;     // the settings file itself (for messages)
  std::string policy;   // absolute, or relative to the settings file's directory
  std::string catalog;  // empty = the catalog the policy names
  std::string metrics_file;   // absolute *.prom path for the node exporter; empty = no metrics
  int metrics_interval_s = 15;   // how often the metrics thread rewrites it
};

// `slurm_conf_path`: slurmctld's slurm.conf (may be empty when unknown).
scaleguard::Result<Settings> load_settings(const std::string& slurm_conf_path);

}  // namespace sg_slurm
