// `scaleguard plan`: the best plan for a model on a GPU type (or the pinned layout evaluated).
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common.h"
#include "scaleguard/text.h"
#include "verbs.h"

namespace scaleguard::cli {
namespace {

int run(int argc, char** argv) {
  po::options_description desc("scaleguard plan options");
  desc.add_options()("help,h", "this help")
      ("spare-nodes", po::value<std::string>(),
       "nodes held idle for in-job restarts (--train-spare-nodes): planned without, their GPU-hours and cost shown");
  add_workload_options(desc);
  po::variables_map vm;
  const char* usage =
      "usage: scaleguard plan --model SPEC (--tokens N | --single-gpu-hours H) [--policy F --partition P | --gpu-type T | --instance I]\n"
      "                       [--gpus N] [--spare-nodes N] [--tp --pp --dp --zero --micro-batch --recompute] [--spot] [--json]";
  if (auto rc = parse_args(argc, argv, desc, vm, usage)) return *rc;
  auto setup = plan_setup("plan", vm);
  if (!setup) return 2;
  auto& s = *setup;
  int spares = 0;
  if (vm.count("spare-nodes")) {
    auto v = int_option(vm, "spare-nodes", 0, kMaxSpareNodes);
    if (!v) return 2;
    spares = *v;
  }
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
  // The spares (whole nodes of the partition's hardware) sit idle for the plan's wall time.
  const int spare_gpus = spares * s.hardware.gpus_per_node;
  const double spare_hours = spare_gpus * p.wall_hours;
  const double spare_cost = spare_hours * (s.hardware.spot ? s.hardware.spot_gpu_hour : s.hardware.on_demand_gpu_hour);
  if (vm.count("json")) {
    // The plan, plus the model's exact parameter count and architecture (what
    // scaleguard-run builds for the same shape: tests/runner/llama_strategies.sh).
    nlohmann::json j = nlohmann::json::parse(to_json(p));
    j["params"] = static_cast<long long>(std::llround(s.workload.model.params));
    j["arch"] = s.workload.model.arch;
    if (s.partition) j["partition"] = s.partition->name;
    if (spares > 0) {
      j["spare_nodes"] = spares;
      j["spare_gpus"] = spare_gpus;
      j["spare_gpu_hours"] = spare_hours;
      j["spare_cost"] = spare_cost;
    }
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::printf("%s (%.3g parameters, %.3g tokens) on %s (%s%s%s)\n", s.workload.model.name.c_str(),
              s.workload.model.params, s.workload.tokens, s.hardware.gpu.name.c_str(), s.hardware.instance.c_str(),
              s.hardware.spot ? ", spot" : "",
              s.partition ? (", partition " + s.partition->name + " of " + s.policy->path).c_str() : "");
  std::printf("strategy %s: %d GPU(s) on %d node(s)\n", to_string(p.strategy), p.gpus, p.nodes);
  for (const auto& r : p.reasons) std::printf("  - %s\n", r.c_str());
  if (spares > 0) {
    const double total = (s.hardware.spot ? p.cost_spot : p.cost_on_demand) + spare_cost;
    std::printf("spares: %d node(s), %d GPU(s) held idle for in-job restarts over the plan's %s h: +%s GPU-hours, ~%s %s; "
                "in all %d GPU(s): %s GPU-hours, ~%s\n",
                spares, spare_gpus, text::num(p.wall_hours, 2).c_str(), text::num(spare_hours, 1).c_str(),
                text::money(spare_cost).c_str(), s.hardware.spot ? "spot" : "on-demand", p.gpus + spare_gpus,
                text::num(p.gpu_hours + spare_hours, 1).c_str(), text::money(total).c_str());
  }
  return 0;
}

const bool registered = register_verb({"plan", "best plan (strategy, GPUs, hours, cost) for a model", run});

}  // namespace
}  // namespace scaleguard::cli
