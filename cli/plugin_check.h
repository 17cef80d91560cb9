// `scaleguard policy check --plugin-version`: does a policy suit the job_submit/scaleguard
// plugin that is installed, and the one slurmctld is running? (docs/admin-guide.md, "Upgrades")
#pragma once
#include <string>

namespace scaleguard::cli {

// Prints what each plugin says of the file; returns 0 when every plugin found loads it, 1 when
// one does not (or cannot be asked). `plugin`: the .so to ask ("" = job_submit_scaleguard.so in
// slurmctld's PluginDir, from `scontrol show config`).
int check_with_plugins(const std::string& policy, const std::string& catalog, const std::string& plugin);

}  // namespace scaleguard::cli
