// `scaleguard ckpt-interval`: the checkpoint interval from save time and MTBF (Young, Daly).
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common.h"
#include "verbs.h"

namespace scaleguard::cli {
namespace {

int run(int argc, char** argv) {
  po::options_description desc("scaleguard ckpt-interval options");
  desc.add_options()("help,h", "this help")
      ("save-seconds", po::value<std::string>()->required(), "seconds one checkpoint takes to write")
      ("mtbf-hours", po::value<std::string>()->required(), "MTBF of one node, hours")
      ("gpus", po::value<std::string>(), "GPUs in the job (default 1)")
      ("gpus-per-node", po::value<std::string>(), "GPUs per node (default 8)")
      ("restart-seconds", po::value<std::string>(), "requeue + reload time (default 300)")
      ("json", "machine-readable output");
  po::variables_map vm;
  const char* usage = "usage: scaleguard ckpt-interval --save-seconds S --mtbf-hours M [--gpus N] [--json]";
  if (auto rc = parse_args(argc, argv, desc, vm, usage)) return *rc;
  auto save = parse_count(vm["save-seconds"].as<std::string>());
  if (!save || save.value() > 86400 * 7) {
    std::fprintf(stderr, "scaleguard ckpt-interval: --save-seconds: expected seconds > 0 and at most a week\n");
    return 2;
  }
  auto mtbf = parse_hours(vm["mtbf-hours"].as<std::string>());
  if (!mtbf) {
    print_error("ckpt-interval", Error{mtbf.error().message, "", 0, "--mtbf-hours", mtbf.error().hint});
    return 2;
  }
  auto gpus = vm.count("gpus") ? int_option(vm, "gpus", 1, 1 << 20) : std::optional<int>(1);
  auto gpn = vm.count("gpus-per-node") ? int_option(vm, "gpus-per-node", 1, 64) : std::optional<int>(8);
  if (!gpus || !gpn) return 2;
  double restart = 300;
  if (vm.count("restart-seconds")) {
    auto r = parse_count(vm["restart-seconds"].as<std::string>());
    if (!r) {
      print_error("ckpt-interval", Error{r.error().message, "", 0, "--restart-seconds", r.error().hint});
      return 2;
    }
    restart = r.value();
  }
  const int nodes = (*gpus + *gpn - 1) / *gpn;
  const double mtbf_s = mtbf.value() * 3600 / nodes;
  const double young = young_interval(save.value(), mtbf_s);
  const double daly = young_daly_interval(save.value(), mtbf.value(), *gpus, *gpn);
  const double factor = failure_factor(daly, save.value(), restart, mtbf_s);
  if (vm.count("json")) {
    nlohmann::json j = {{"nodes", nodes}, {"job_mtbf_hours", mtbf_s / 3600}, {"young_s", young},
                        {"daly_s", daly}, {"interval_s", daly},
                        {"overhead", std::isfinite(factor) ? nlohmann::json(factor - 1) : nlohmann::json(nullptr)}};
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf("job: %d GPU(s) on %d node(s), job MTBF %.1f h, save %.0f s, restart %.0f s\n", *gpus, nodes,
              mtbf_s / 3600, save.value(), restart);
  std::printf("Young  sqrt(2*C*M)      = %.0f s (%.1f min)\n", young, young / 60);
  std::printf("Daly   (refined)        = %.0f s (%.1f min)  <- use this\n", daly, daly / 60);
  if (std::isfinite(factor))
    std::printf("expected overhead (checkpoints + lost work + restarts): %.1f%%\n", 100 * (factor - 1));
  else
    std::printf("expected overhead: unbounded -- failures come faster than the job can checkpoint and restart\n");
  return 0;
}

const bool registered = register_verb({"ckpt-interval", "checkpoint interval from save time and MTBF (Young/Daly)", run});

}  // namespace
}  // namespace scaleguard::cli
