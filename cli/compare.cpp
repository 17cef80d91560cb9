// `scaleguard compare`: one GPU versus the distributed plan, side by side.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>
#include <utility>
#include <nlohmann/json.hpp>

#include "common.h"
#include "scaleguard/text.h"
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
      "                          [--policy FILE --partition P] [--gpus N (default: one full node)] [--spot] [--json]";
  if (auto rc = parse_args(argc, argv, desc, vm, usage)) return *rc;
  auto setup = plan_setup("compare", vm);
  if (!setup) return 2;
  auto& s = *setup;
  const int n = s.gpus > 0 ? s.gpus : std::min(s.hardware.gpus_per_node, s.max_gpus());
  if (n < 2) {
    print_error("compare", Error{"nothing to compare on one GPU", "", 0, "gpus", "pass --gpus N with N >= 2"});
    return 2;
  }
  // The answer: the same plans as `scaleguard plan` and `decide` make for this job and batch
  // (issue 37: one answer from every verb).
  auto one = best_plan_at(s.workload, s.hardware, 1, Pins{}, s.goals);
  auto many = best_plan_at(s.workload, s.hardware, n, s.pins, s.goals);
  if (!many) {
    print_error("compare", many.error());
    return 1;
  }
  const Plan& m = many.value();
  // A second scenario, not the answer: per step, as `scaleguard probe` and the seed's 2-GPU
  // micro-benchmark measure it -- the plan's per-GPU micro-batch with every step all-reduced
  // (global batch = dp x micro-batch). Shown when the batch is the default and the plan
  // accumulates (which hides communication behind the other micro-batches).
  std::optional<Plan> step_one, step_many;
  if (one && m.micro_batches > 1 && m.layout.pp == 1 && s.workload.batch_law_tokens > 0) {
    Workload w = s.workload;
    w.global_batch = m.layout.dp * m.layout.micro_batch;
    w.batch_law_tokens = 0;
    Pins same = s.pins;
    same.micro_batch = m.layout.micro_batch;
    Pins one_pins;
    one_pins.micro_batch = m.layout.micro_batch;
    auto a = best_plan_at(w, s.hardware, 1, one_pins, s.goals);
    auto b = best_plan_at(w, s.hardware, n, same, s.goals);
    if (a && b) step_one = a.value(), step_many = b.value();
  }
  // Speedup and scaling efficiency against one GPU (when the model fits one).
  const double speedup = one ? one.value().wall_hours / m.wall_hours : 0;
  const double efficiency = one ? speedup / m.gpus : 0;
  const double step_speedup = step_one ? step_one->wall_hours / step_many->wall_hours : 0;
  std::string verdict;
  if (!one) {
    verdict = "the model does not fit one GPU: " + std::string(to_string(m.strategy)) + " on " + std::to_string(m.gpus) +
              " GPUs is needed";
  } else if (one.value().gpu_hours < s.goals.distributed_min_gpu_hours) {
    verdict = "use 1 GPU: " + std::to_string(static_cast<long>(one.value().gpu_hours + 0.5)) + " GPU-hours is below the " +
              text::num(s.goals.distributed_min_gpu_hours, 0) + " GPU-hour break-even (distributed_min_gpu_hours)";
  } else if (one.value().wall_hours <= s.goals.single_gpu_max_hours) {
    verdict = "use 1 GPU: it finishes within " + text::num(s.goals.single_gpu_max_hours, 0) + " h (single_gpu_max_hours)";
  } else if (m.gpus == 2 && speedup < s.goals.min_doubling_speedup) {
    verdict = "use 1 GPU: 2 GPUs speed it up less than " + text::num(s.goals.min_doubling_speedup) + "x";
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
    j["basis"] = "plan";
    if (s.partition) j["partition"] = s.partition->name;
    if (step_one)
      j["second_scenario"] = {{"what", "per step, as scaleguard probe measures it: every step all-reduced, no accumulation"},
                              {"global_batch", step_many->global_batch},
                              {"micro_batch", step_many->layout.micro_batch},
                              {"single_wall_hours", step_one->wall_hours},
                              {"wall_hours", step_many->wall_hours},
                              {"gpu_hours", step_many->gpu_hours},
                              {"speedup", step_speedup},
                              {"comm_ratio", step_many->comm_ratio}};
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf("%s (%.3g parameters, %.3g tokens) on %s (%s%s)\n", s.workload.model.name.c_str(),
              s.workload.model.params, s.workload.tokens, s.hardware.gpu.name.c_str(), s.hardware.instance.c_str(),
              s.partition ? (", partition " + s.partition->name).c_str() : "");
  std::printf("global batch %d sequences, as plan and decide use it\n\n", m.global_batch);
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
  if (m.has_spot_price && std::isfinite(m.cost_spot) && (!one || std::isfinite(o.cost_spot)))
    row("$ spot", o.cost_spot, m.cost_spot, "%.2f");
  else
    std::printf("%-16s %12s %12s\n", "$ spot", one ? spot_cost_text(o).c_str() : "does not fit", spot_cost_text(m).c_str());
  row("MFU", o.mfu, m.mfu, "%.3f");
  row("comm ratio", o.comm_ratio, m.comm_ratio, "%.3f");
  if (one) std::printf("%-16s %12s %12.2fx\n%-16s %12s %12.0f%%\n", "speedup", "1x", speedup, "efficiency", "100%",
                       100 * efficiency);
  if (step_one)
    std::printf("\nSecond scenario, not the plan: per step, as scaleguard probe measures it (micro-batch %d per GPU,\n"
                "every step all-reduced, global batch %d): %d GPUs take %.2f h for one GPU's %.2f h: %.2fx,\n"
                "comm ratio %.3f. The plan above accumulates %d micro-batches per all-reduce.\n",
                step_many->layout.micro_batch, step_many->global_batch, step_many->gpus, step_many->wall_hours,
                step_one->wall_hours, step_speedup, step_many->comm_ratio, m.micro_batches);
  std::printf("\nverdict: %s\n", verdict.c_str());
  return 0;
}

const bool registered = register_verb({"compare", "one GPU vs the distributed plan: hours, GPU-hours, cost", run});

}  // namespace
}  // namespace scaleguard::cli
