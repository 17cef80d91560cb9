// `scaleguard calibrate`: a run's measured step time, communication and bubble (from
// scaleguard-run --metrics) next to the planner's prediction for the same layout on this
// hardware, and the efficiency / bandwidth utilization that would make them agree.
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common.h"
#include "scaleguard/calibrate.h"
#include "verbs.h"

namespace scaleguard::cli {
namespace {

constexpr long kMaxMetricsBytes = 256L << 20;

template <class... A>
std::string fmt(const char* format, A... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, format, args...);
  return buf;
}

std::optional<std::string> read_file(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    std::fprintf(stderr, "scaleguard calibrate: %s: not a readable file\n", path.c_str());
    return std::nullopt;
  }
  if (st.st_size > kMaxMetricsBytes) {
    std::fprintf(stderr, "scaleguard calibrate: %s: larger than 256 MiB; pass a shorter run\n", path.c_str());
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) {
    std::fprintf(stderr, "scaleguard calibrate: %s: cannot read\n", path.c_str());
    return std::nullopt;
  }
  return text.str();
}

// A positive number from option `name` (e.g. --peak-gflops), or a printed error.
std::optional<double> positive(const po::variables_map& vm, const char* name, double hi) {
  const std::string text = vm[name].as<std::string>();
  auto v = parse_count(text);
  if (!v || !(v.value() > 0 && v.value() <= hi)) {
    std::fprintf(stderr, "scaleguard calibrate: --%s=%s: expected a number above 0 and at most %g\n", name,
                 text.c_str(), hi);
    return std::nullopt;
  }
  return v.value();
}

std::string ms(double s) { return fmt("%.3f ms", s * 1e3); }
std::string pct(double f) { return fmt("%.1f%%", 100 * f); }
std::string ratio(double measured, double predicted) {
  return predicted > 0 ? fmt("%.2f", measured / predicted) : std::string("-");
}

int run(int argc, char** argv) {
  po::options_description desc("scaleguard calibrate options");
  desc.add_options()("help,h", "this help")
      ("metrics", po::value<std::string>()->required(), "metrics file of a run (scaleguard-run --metrics FILE)")
      ("hardware", po::value<std::string>()->default_value("host"),
       "host (this machine: probed or described by the flags below), or a catalog GPU or instance type")
      ("peak-gflops", po::value<std::string>(), "host: peak GFLOP/s per rank (default: probe rate x the run's threads)")
      ("link-gb-s", po::value<std::string>(), "host: rank-to-rank bandwidth, GB/s one way (default: probed memory copy)")
      ("network-gb-s", po::value<std::string>(), "host: node network GB/s for multi-node runs (default: the link's)")
      ("ranks-per-node", po::value<std::string>(), "ranks per node (host default: all on one node)")
      ("efficiency", po::value<std::string>(), "efficiency of the prediction (host default 1 = at peak)")
      ("skip", po::value<std::string>()->default_value("1"), "warm-up steps to leave out")
      ("catalog", po::value<std::string>(), "catalog file (default $SCALEGUARD_CATALOG or configs/catalog.ini)")
      ("json", "machine-readable output");
  po::variables_map vm;
  const char* usage =
      "usage: scaleguard calibrate --metrics FILE [--hardware host|GPU-TYPE|INSTANCE] [--peak-gflops G]\n"
      "                            [--link-gb-s B] [--network-gb-s B] [--ranks-per-node N] [--efficiency E]\n"
      "                            [--skip N] [--catalog FILE] [--json]";
  if (auto rc = parse_args(argc, argv, desc, vm, usage)) return *rc;
  auto skip = int_option(vm, "skip", 0, 1000000);
  if (!skip) return 2;
  std::optional<int> rpn;
  if (vm.count("ranks-per-node") && !(rpn = int_option(vm, "ranks-per-node", 1, 4096))) return 2;
  std::optional<double> peak, link, network, efficiency;
  if (vm.count("peak-gflops") && !(peak = positive(vm, "peak-gflops", 1e9))) return 2;
  if (vm.count("link-gb-s") && !(link = positive(vm, "link-gb-s", 1e6))) return 2;
  if (vm.count("network-gb-s") && !(network = positive(vm, "network-gb-s", 1e6))) return 2;
  if (vm.count("efficiency") && !(efficiency = positive(vm, "efficiency", 10))) return 2;

  auto catalog = load_catalog(catalog_path(vm));
  if (!catalog) return print_error("calibrate", catalog.error()), 1;
  const std::string path = vm["metrics"].as<std::string>();
  auto text = read_file(path);
  if (!text) return 1;
  auto metrics = parse_metrics(*text, path);
  if (!metrics) return print_error("calibrate", metrics.error()), 1;
  const RunInfo& r = metrics.value().run;

  const std::string which = vm["hardware"].as<std::string>();
  Hardware hw;
  std::string described;
  if (which == "host") {
    HostHardware host;
    const int threads = r.threads > 0 ? r.threads : 1;
    std::string peak_from, link_from;
    if (!peak || !link) {
      const ProbeResult probe = probe_host();
      if (!peak) {
        peak = probe.gemm_flops_per_thread * threads / 1e9;
        peak_from = fmt(" (probe: fp32 GEMM %.1f GFLOP/s per thread x %d thread(s))",
                                 probe.gemm_flops_per_thread / 1e9, threads);
      }
      if (!link) link = probe.copy_gb_s, link_from = " (probe: memory copy)";
    }
    if (!(*peak > 0) || !(*link > 0)) {
      std::fprintf(stderr, "scaleguard calibrate: the probe measured nothing; pass --peak-gflops and --link-gb-s\n");
      return 1;
    }
    host.peak_flops = *peak * 1e9;
    host.link_gb_s = *link;
    host.network_gb_s = network.value_or(0);
    host.ranks_per_node = rpn.value_or(0);
    host.efficiency = efficiency.value_or(1);
    hw = host_hardware(host, catalog.value().assumptions);
    described = fmt("host: peak %.1f GFLOP/s per rank%s, link %.1f GB/s%s", *peak, peak_from.c_str(), *link,
                             link_from.c_str());
  } else {
    const bool is_instance = catalog.value().find_instance(which) != nullptr;
    auto h = hardware_for(catalog.value(), is_instance ? "" : which, is_instance ? which : "", rpn.value_or(0));
    if (!h) {
      std::fprintf(stderr, "scaleguard calibrate: --hardware=%s: %s (hint: host, or a GPU or instance type of %s%s)\n",
                   which.c_str(), h.error().message.c_str(), catalog_path(vm).c_str(),
                   h.error().hint.rfind("did you mean", 0) == 0 ? ("; " + h.error().hint).c_str() : "");
      return 2;
    }
    hw = h.value();
    if (efficiency) hw.gpu.efficiency = *efficiency;
    if (network) hw.network_gb_s = *network;
    if (peak || link) {
      std::fprintf(stderr, "scaleguard calibrate: --peak-gflops and --link-gb-s describe --hardware host only\n");
      return 2;
    }
    described = hw.gpu.name + " (" + hw.instance + ") from the catalog";
  }
  described += fmt(", prediction at efficiency %.2f", hw.gpu.efficiency);

  auto cal = calibrate(metrics.value(), hw, *skip);
  if (!cal) return print_error("calibrate", cal.error()), 1;
  const Calibration& c = cal.value();
  if (vm.count("json")) {
    std::cout << to_json(c) << "\n";
    return 0;
  }
  const Plan& p = c.predicted;
  std::printf("run: %s, %.3g parameters (%d layers x %d hidden, %d heads, seq %d, vocab %d)\n",
              r.model.empty() ? "model" : r.model.c_str(), c.params, r.n_layer, r.n_embd, r.n_head, r.seq_len,
              r.vocab_size);
  std::printf("layout: tp=%d pp=%d dp=%d zero=%d, %d micro-batch(es) of %d per rank, global batch %d\n", c.layout.tp,
              c.layout.pp, c.layout.dp, c.layout.zero, p.micro_batches, c.layout.micro_batch, p.global_batch);
  std::printf("hardware: %s\n", described.c_str());
  std::printf("steps: median of %d (first %d left out as warm-up)\n\n", c.steps_used, c.steps_skipped);
  std::printf("  %-22s %14s %14s %10s\n", "", "predicted", "measured", "meas/pred");
  std::printf("  %-22s %14s %14s %10s\n", "step time", ms(p.step_seconds).c_str(), ms(c.measured_step_s).c_str(),
              ratio(c.measured_step_s, p.step_seconds).c_str());
  std::printf("  %-22s %14s %14s %10s\n", "compute", ms(p.compute_seconds).c_str(), ms(c.measured_compute_s).c_str(),
              ratio(c.measured_compute_s, p.compute_seconds).c_str());
  std::printf("  %-22s %14s %14s\n", "communication share", pct(c.predicted_comm_fraction).c_str(),
              pct(c.measured_comm_fraction).c_str());
  std::printf("  %-22s %14s %14s\n\n", "pipeline bubble", pct(p.bubble_fraction).c_str(),
              pct(c.measured_bubble_fraction).c_str());
  if (c.implied_efficiency > 0)
    std::printf("implied efficiency: %.3g  (catalog: `efficiency = %.2g` in this hardware's [gpu ...] section)\n",
                c.implied_efficiency, c.implied_efficiency);
  if (c.implied_bandwidth_utilization > 0)
    std::printf("implied bandwidth_utilization: %.3g  (catalog [assumptions]; now %.2f)\n",
                c.implied_bandwidth_utilization, hw.assume.bandwidth_utilization);
  for (const auto& n : c.notes) std::printf("note: %s\n", n.c_str());
  if (which != "host" && r.device == "cpu")
    std::printf("note: the run trained on CPU ranks but is compared with %s GPUs\n", hw.gpu.name.c_str());
  return 0;
}

const bool registered =
    register_verb({"calibrate", "compare a run's measured step time with the planner's prediction", run});

}  // namespace
}  // namespace scaleguard::cli
