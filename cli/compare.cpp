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
  // Per step, as `scaleguard probe` and the seed's 2-GPU micro-benchmark measure it: when the
  // user pinned no global batch and the plan is data parallel, compare both sides at the
  // plan's per-GPU micro-batch with every step all-reduced (global batch = dp x micro-batch).
  // The planner's default global batch (0.5M tokens) accumulates many micro-batches per
  // all-reduce, which hides communication; that plan is shown beside it, not as the headline.
  std::optional<Plan> accumulated;
  double accumulated_one_hours = 0;
  double tokens = s.workload.tokens;
  if (one && many.value().micro_batches > 1 && many.value().layout.pp == 1 && s.workload.global_batch == 0) {
    const Plan& m = many.value();
    Workload w = s.workload;
    w.global_batch = m.layout.dp * m.layout.micro_batch;
    Pins same = s.pins;
    same.micro_batch = m.layout.micro_batch;
    Pins one_pins;
    one_pins.micro_batch = m.layout.micro_batch;
    auto one_step = best_plan_at(w, s.hardware, 1, one_pins, s.goals);
    auto many_step = best_plan_at(w, s.hardware, n, same, s.goals);
    if (one_step && many_step) {
      accumulated = m;
      accumulated_one_hours = one.value().wall_hours;
      // "--single-gpu-hours H": the user's one-GPU run takes H; here that run is the per-step one.
      if (vm.count("single-gpu-hours")) {
        const double f = one.value().train_hours / one_step.value().train_hours;
        scale_work(one_step.value(), f);
        scale_work(many_step.value(), f);
        tokens *= f;
      }
      one = one_step;
      many = many_step;
    }
  }
  const Plan& m = many.value();
  // Speedup and scaling efficiency against one GPU (when the model fits one).
  const double speedup = one ? one.value().wall_hours / m.wall_hours : 0;
  const double efficiency = one ? speedup / m.gpus : 0;
  const double accumulated_speedup = accumulated ? accumulated_one_hours / accumulated->wall_hours : 0;
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
    j["basis"] = accumulated ? "per_step" : "plan";
    if (accumulated)
      j["with_accumulation"] = {{"global_batch", accumulated->global_batch},
                                {"micro_batches", accumulated->micro_batches},
                                {"wall_hours", accumulated->wall_hours},
                                {"gpu_hours", accumulated->gpu_hours},
                                {"tokens", s.workload.tokens},
                                {"single_wall_hours", accumulated_one_hours},
                                {"speedup", accumulated_speedup},
                                {"comm_ratio", accumulated->comm_ratio}};
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf("%s (%.3g parameters, %.3g tokens) on %s (%s)\n", s.workload.model.name.c_str(),
              s.workload.model.params, tokens, s.hardware.gpu.name.c_str(), s.hardware.instance.c_str());
  if (accumulated)
    std::printf("per step, as scaleguard probe measures it: micro-batch %d per GPU, every step all-reduced\n",
                m.layout.micro_batch);
  std::printf("\n");
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
  if (accumulated)
    std::printf("\nWith gradient accumulation to the default global batch of %d sequences (%d micro-batches\n"
                "per GPU share each all-reduce, %.3g tokens) %d GPUs would take %.2f h for one GPU's %.2f h:\n"
                "%.2fx, comm ratio %.3f. Measure before scaling out (scaleguard probe).\n",
                accumulated->global_batch, accumulated->micro_batches, s.workload.tokens, accumulated->gpus,
                accumulated->wall_hours, accumulated_one_hours, accumulated_speedup, accumulated->comm_ratio);
  std::printf("\nverdict: %s\n", verdict.c_str());
  return 0;
}

const bool registered = register_verb({"compare", "one GPU vs the distributed plan: hours, GPU-hours, cost", run});

}  // namespace
}  // namespace scaleguard::cli
