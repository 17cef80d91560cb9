// Helpers shared by the verbs: config paths, option parsing, error printing.
#pragma once
#include <boost/program_options.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "scaleguard/catalog.h"
#include "scaleguard/decide.h"
#include "scaleguard/plan.h"
#include "scaleguard/policy.h"

namespace scaleguard::cli {

namespace po = boost::program_options;

// --policy, else $SCALEGUARD_POLICY, else build_config_dir()/policy.ini (same for catalog).
std::string policy_path(const po::variables_map& vm);
std::string catalog_path(const po::variables_map& vm);
// `given`, else $ENV, else build_config_dir()/fallback ("" when fallback is nullptr).
std::string config_file(const std::string& given, const char* env, const char* fallback);
// --calibration, else $SCALEGUARD_CALIBRATION, else "" (no catalog override).
std::string calibration_path(const po::variables_map& vm);

// Parses argv against `desc`; prints help (returns 0) or a usage error (returns 2);
// nullopt means "go on".
std::optional<int> parse_args(int argc, char** argv, const po::options_description& desc,
                              po::variables_map& vm, const char* usage);

// A whole number in [lo, hi] from option `name`, or a printed error.
std::optional<int> int_option(const po::variables_map& vm, const char* name, int lo, int hi);
void print_error(const char* verb, const Error& e);

// The options describing a workload and hardware (plan and compare share them).
void add_workload_options(po::options_description& desc);
struct PlanSetup {
  Catalog catalog;
  Workload workload;
  Hardware hardware;
  Pins pins;
  Goals goals;
  int gpus = 0;  // 0 = let the planner choose
  // Under a policy (--policy, $SCALEGUARD_POLICY, or the installed one when no --instance or
  // --gpu-type is given): the partition whose hardware, rules and limits the plan follows,
  // as decide() plans for a job there (issue 37).
  std::shared_ptr<const Policy> policy;
  const Partition* partition = nullptr;
  int max_gpus() const;  // what the partition allows (max_nodes x GPUs per node), else goals.max_gpus
};
// Builds the setup from the options; prints the error and returns nullopt on bad input.
std::optional<PlanSetup> plan_setup(const char* verb, const po::variables_map& vm);
// Seconds since the epoch as UTC text in a strftime format, e.g. "%Y-%m-%dT%H:%M:%SZ".
std::string utc_text(std::int64_t t, const char* format = "%Y-%m-%dT%H:%M:%SZ");

}  // namespace scaleguard::cli
