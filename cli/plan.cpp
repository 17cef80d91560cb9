// `scaleguard plan`: the best plan for a model on a GPU type (or the pinned layout evaluated).
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common.h"
#include "verbs.h"

namespace scaleguard::cli {
namespace {

int run(int argc, char** argv) {
  po::options_description desc("scaleguard plan options");
  desc.add_options()("help,h", "this help");
  add_workload_options(desc);
  po::variables_map vm;
  const char* usage =
      "usage: scaleguard plan --model SPEC (--tokens N | --single-gpu-hours H) [--policy F --partition P | --gpu-type T | --instance I]\n"
      "                       [--gpus N] [--tp --pp --dp --zero --micro-batch --recompute] [--spot] [--json]";
  if (auto rc = parse_args(argc, argv, desc, vm, usage)) return *rc;
  auto setup = plan_setup("plan", vm);
  if (!setup) return 2;
  auto& s = *setup;
  auto plan = s.gpus > 0 ? best_plan_at(s.workload, s.hardware, s.gpus, s.pins, s.goals)
                         : choose_plan(s.workload, s.hardware, s.pins, s.goals);
  if (!plan) {
    if (vm.count("json"))
      std::cout << nlohmann::json{{"fits", false}, {"error", plan.error().message}, {"hint", plan.error().hint}}.dump()
                << "\n";
    print_error("plan", plan.error());
    return 1;
  }
  const Plan& p = plan.value();
  if (vm.count("json")) {
    // The plan, plus the model's exact parameter count and architecture (what
    // scaleguard-run builds for the same shape: tests/runner/llama_strategies.sh).
    nlohmann::json j = nlohmann::json::parse(to_json(p));
    j["params"] = static_cast<long long>(std::llround(s.workload.model.params));
    j["arch"] = s.workload.model.arch;
    if (s.partition) j["partition"] = s.partition->name;
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::printf("%s (%.3g parameters, %.3g tokens) on %s (%s%s%s)\n", s.workload.model.name.c_str(),
              s.workload.model.params, s.workload.tokens, s.hardware.gpu.name.c_str(), s.hardware.instance.c_str(),
              s.hardware.spot ? ", spot" : "",
              s.partition ? (", partition " + s.partition->name + " of " + s.policy->path).c_str() : "");
  std::printf("strategy %s: %d GPU(s) on %d node(s)\n", to_string(p.strategy), p.gpus, p.nodes);
  for (const auto& r : p.reasons) std::printf("  - %s\n", r.c_str());
  return 0;
}

const bool registered = register_verb({"plan", "best plan (strategy, GPUs, hours, cost) for a model", run});

}  // namespace
}  // namespace scaleguard::cli
