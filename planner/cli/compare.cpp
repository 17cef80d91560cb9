// `scaleguard compare`: one GPU versus the distributed plan, side by side.
#include <cstdio>
#include <iostream>
#include <optional>
#include <utility>
#include <nlohmann/json.hpp>

#include "common.h"
#include "verbs.h"

namespace scaleguard::cli {
namespace {

int run(int argc, char** argv) {
  po::options_description desc("scaleguard compare options");
  desc.add_options()("help,h", "this help");
  add_workload_options(desc);
  po::variables_map vm;
  const char* usage =
      "usage: scaleguard compare --model SPEC (--tokens N | --single-gpu-hours H) (--gpu-type T | --instance I)\n"
      "                          [--gpus N (default: one full node)] [--spot] [--json]";
  if (auto rc = parse_args(argc, argv, desc, vm, usage)) return *rc;
  auto setup = plan_setup("compare", vm);
  if (!setup) return 2;
  auto& s = *setup;
  const int n = s.gpus > 0 ? s.gpus : s.hardware.gpus_per_node;
  if (n < 2) {
    print_error("compare", Error{"nothing to compare on one GPU", "", 0, "gpus", "pass --gpus N with N >= 2"});
    return 2;
  }
  auto one = best_plan_at(s.workload, s.hardware, 1, Pins{}, s.goals);
  auto many = best_plan_at(s.workload, s.hardware, n, s.pins, s.goals);
  if (!many) {
    print_error("compare", many.error());
    return 1;
  }
  const Plan& m = many.value();
  // Speedup and scaling efficiency against one GPU (when the model fits one).
  const double speedup = one ? one.value().wall_hours / m.wall_hours : 0;
  const double efficiency = one ? speedup / m.gpus : 0;
  // The same run without gradient accumulation (global batch = data-parallel ranks x
  // micro-batch): by default the planner accumulates many micro-batches per all-reduce, which
  // hides communication; a user who trains without accumulation pays it every micro-batch.
  std::optional<std::pair<Plan, double>> no_accumulation;
  if (one && m.micro_batches > 1 && s.workload.global_batch == 0) {
    Workload w = s.workload;
    w.global_batch = m.layout.dp * m.layout.micro_batch;
    Pins same = s.pins;
    same.micro_batch = m.layout.micro_batch;
    Pins one_pins;
    one_pins.micro_batch = m.layout.micro_batch;
    auto one_small = best_plan_at(w, s.hardware, 1, one_pins, s.goals);
    auto many_small = best_plan_at(w, s.hardware, n, same, s.goals);
    if (one_small && many_small)
      no_accumulation.emplace(many_small.value(), one_small.value().wall_hours / many_small.value().wall_hours);
  }
  std::string verdict;
  if (!one) {
    verdict = "the model does not fit one GPU: " + std::string(to_string(m.strategy)) + " on " + std::to_string(m.gpus) +
              " GPUs is needed";
  } else if (one.value().gpu_hours < s.goals.distributed_min_gpu_hours) {
    verdict = "use 1 GPU: " + std::to_string(static_cast<long>(one.value().gpu_hours + 0.5)) +
              " GPU-hours is below the ~100 GPU-hour break-even";
  } else if (one.value().wall_hours <= s.goals.single_gpu_max_hours) {
    verdict = "use 1 GPU: it finishes within 24 h";
  } else if (m.gpus == 2 && speedup < s.goals.min_doubling_speedup) {
    verdict = "use 1 GPU: 2 GPUs speed it up less than " + std::to_string(s.goals.min_doubling_speedup).substr(0, 3) + "x";
  } else {
    verdict = "distribute: one GPU would take " + std::to_string(static_cast<long>(one.value().wall_hours)) + " h";
  }
  if (vm.count("json")) {
    nlohmann::json j;
    j["single"] = one ? nlohmann::json::parse(to_json(one.value())) : nlohmann::json(nullptr);
    j["distributed"] = nlohmann::json::parse(to_json(m));
    j["speedup"] = speedup;
    j["efficiency"] = efficiency;
    j["verdict"] = verdict;
    if (no_accumulation)
      j["without_accumulation"] = {{"global_batch", no_accumulation->first.global_batch},
                                   {"speedup", no_accumulation->second},
                                   {"comm_ratio", no_accumulation->first.comm_ratio}};
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf("%s (%.3g parameters, %.3g tokens) on %s (%s)\n\n", s.workload.model.name.c_str(),
              s.workload.model.params, s.workload.tokens, s.hardware.gpu.name.c_str(), s.hardware.instance.c_str());
  std::printf("%-16s %12s %12s\n", "", "1 GPU", (std::to_string(m.gpus) + " GPUs").c_str());
  auto row = [&](const char* name, double a, double b, const char* fmt) {
    char x[32] = "does not fit", y[32];
    if (one) std::snprintf(x, sizeof x, fmt, a);
    std::snprintf(y, sizeof y, fmt, b);
    std::printf("%-16s %12s %12s\n", name, x, y);
  };
  const Plan none;
  const Plan& o = one ? one.value() : none;
  std::printf("%-16s %12s %12s\n", "strategy", one ? to_string(o.strategy) : "-", to_string(m.strategy));
  row("wall hours", o.wall_hours, m.wall_hours, "%.2f");
  row("GPU-hours", o.gpu_hours, m.gpu_hours, "%.1f");
  row("$ on-demand", o.cost_on_demand, m.cost_on_demand, "%.2f");
  row("$ spot", o.cost_spot, m.cost_spot, "%.2f");
  row("MFU", o.mfu, m.mfu, "%.3f");
  row("comm ratio", o.comm_ratio, m.comm_ratio, "%.3f");
  if (one) std::printf("%-16s %12s %12.2fx\n%-16s %12s %12.0f%%\n", "speedup", "1x", speedup, "efficiency", "100%",
                       100 * efficiency);
  if (no_accumulation)
    std::printf("\n%d micro-batches per GPU share each gradient all-reduce (global batch %d). Without\n"
                "accumulation (global batch %d) the speedup would be %.2fx, comm ratio %.3f: measure before\n"
                "scaling out (scaleguard probe).\n",
                m.micro_batches, m.global_batch, no_accumulation->first.global_batch, no_accumulation->second,
                no_accumulation->first.comm_ratio);
  std::printf("\nverdict: %s\n", verdict.c_str());
  return 0;
}

const bool registered = register_verb({"compare", "one GPU vs the distributed plan: hours, GPU-hours, cost", run});

}  // namespace
}  // namespace scaleguard::cli
