// `scaleguard policy check FILE`: validates a policy (its catalog and budgets), prints the
// effective policy; any error names file, line, key and a fix, and the exit code is 1.
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iostream>

#include "common.h"
#include "plugin_check.h"
#include "scaleguard/budget.h"
#include "scaleguard/budget_zone.h"
#include "verbs.h"

namespace scaleguard::cli {
namespace {

int run(int argc, char** argv) {
  const char* usage = "usage: scaleguard policy check [FILE] [--catalog FILE] [--plugin-version [--plugin SO]]";
  po::options_description desc("scaleguard policy options");
  desc.add_options()("help,h", "this help")
      ("catalog", po::value<std::string>(), "catalog file (default: the policy's `catalog =`)")
      ("plugin-version", "also ask the job_submit/scaleguard plugin installed (and the one slurmctld runs) "
                         "whether it loads the file: before an upgrade or a reload")
      ("plugin", po::value<std::string>(), "--plugin-version: the plugin .so to ask (default: slurmctld's PluginDir)")
      ("action", po::value<std::string>(), "check")
      ("file", po::value<std::string>(), "policy file (default $SCALEGUARD_POLICY or configs/policy.ini)");
  po::positional_options_description pos;
  pos.add("action", 1).add("file", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(desc).positional(pos).run(), vm);
  } catch (const po::error& e) {
    std::fprintf(stderr, "scaleguard policy: %s\n%s\n", e.what(), usage);
    return 2;
  }
  if (vm.count("help")) {
    std::cout << usage << "\n\n" << desc << "\n";
    return 0;
  }
  if (!vm.count("action") || vm["action"].as<std::string>() != "check") {
    std::fprintf(stderr, "%s\n", usage);
    return 2;
  }
  std::string path = vm.count("file") ? vm["file"].as<std::string>() : policy_path(vm);
  auto policy = load_policy(path, vm.count("catalog") ? vm["catalog"].as<std::string>() : "");
  if (!policy) {
    print_error("policy check", policy.error());
    return 1;
  }
  // Budgets live in the same file; budget/ reads their sections (load_policy skips them).
  auto budgets = budget::load_budgets(path, *policy.value());
  if (!budgets) {
    print_error("policy check", budgets.error());
    return 1;
  }
  // Budgets in a time zone: the tz database must have it (the sync asks it the same way);
  // their current periods come from it.
  const std::int64_t now = std::time(nullptr);
  auto zoned = budget::with_zone_boundaries(*budgets.value(), path, now, now);
  if (!zoned) {
    print_error("policy check", zoned.error());
    return 1;
  }
  const std::string budget_text = budget::describe(*zoned.value(), now);
  std::cout << describe(*policy.value()) << (budget_text.empty() ? "" : "\n" + budget_text) << "\nOK\n";
  if (vm.count("plugin-version"))
    return check_with_plugins(path, vm.count("catalog") ? vm["catalog"].as<std::string>() : "",
                              vm.count("plugin") ? vm["plugin"].as<std::string>() : "");
  return 0;
}

const bool registered = register_verb({"policy", "check a policy file and print the effective policy", run});

}  // namespace
}  // namespace scaleguard::cli
