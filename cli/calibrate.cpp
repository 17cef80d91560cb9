// `scaleguard calibrate`: a run's measured step time, communication and bubble (from
// scaleguard-run --metrics) next to the planner's prediction for the same layout on this
// hardware, and the efficiency / bandwidth utilization that would make them agree.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <thread>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <cerrno>
#include <cstring>
#include <vector>

#include "common.h"
#include "scaleguard/calibrate.h"
#include "verbs.h"
#include "scaleguard/build_info.h"

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

bool which_host(const po::variables_map& vm) { return vm["hardware"].as<std::string>() == "host"; }

std::string ms(double s) { return fmt("%.3f ms", s * 1e3); }
std::string pct(double f) { return fmt("%.1f%%", 100 * f); }
std::string ratio(double measured, double predicted) {
  return predicted > 0 ? fmt("%.2f", measured / predicted) : std::string("-");
}

std::optional<double> peak_used(const Hardware& hw) { return hw.gpu.tflops_fp32 * 1e3; }

struct WriteSetup {
  std::vector<std::string> paths, digests;
  std::string out;
  bool force = false, host = false;
  std::string host_name;
  double peak_gflops = 0;
  std::optional<int> ranks_per_node;
  int skip = 1;
  bool json = false;
  int argc = 0;
  char** argv = nullptr;
};

std::string num(double v) { return fmt("%.6g", v); }


std::string layout_text(const RunInfo& r) {
  return fmt("tp=%d pp=%d dp=%d zero=%d micro_batch=%d global_batch=%d threads=%d", r.tp, r.pp, r.dp, r.zero,
             r.micro_batch, r.global_batch, std::max(1, r.threads));
}

// Writes `text` to `path` atomically: a temporary file beside it, fsync, then rename
// (--force) or link (fails when `path` exists: never clobbers).
bool write_atomically(const std::string& path, const std::string& text, bool force) {
  const std::string tmpl = path + ".tmp.XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  const int fd = mkstemp(name.data());
  if (fd < 0) {
    std::fprintf(stderr, "scaleguard calibrate: %s: cannot create a file beside it: %s\n", path.c_str(), std::strerror(errno));
    return false;
  }
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
    if (w <= 0) break;
    done += static_cast<size_t>(w);
  }
  const bool ok = done == text.size() && fchmod(fd, 0644) == 0 && fsync(fd) == 0;
  close(fd);
  int rc = -1;
  if (ok) rc = force ? std::rename(name.data(), path.c_str()) : link(name.data(), path.c_str());
  const int err = errno;
  unlink(name.data());  // after link: the temporary name; after rename: nothing left
  if (rc != 0) {
    if (ok && !force && err == EEXIST)
      std::fprintf(stderr, "scaleguard calibrate: %s exists; pass --force to replace it\n", path.c_str());
    else
      std::fprintf(stderr, "scaleguard calibrate: %s: cannot write: %s\n", path.c_str(), std::strerror(err));
    return false;
  }
  return true;
}

int write_calibration(const std::vector<Metrics>& runs, const Hardware& hw, const Catalog& catalog, const WriteSetup& ws) {
  struct stat st {};
  if (!ws.force && stat(ws.out.c_str(), &st) == 0) {
    std::fprintf(stderr, "scaleguard calibrate: %s exists; pass --force to replace it\n", ws.out.c_str());
    return 1;
  }
  auto fit = fit_calibration(runs, ws.paths, hw, ws.skip, ws.host);
  if (!fit) return print_error("calibrate", fit.error()), 1;
  const FitResult& f = fit.value();
  if (!(f.value[kEfficiency] >= 0.001 && f.value[kEfficiency] <= 1000)) {
    std::fprintf(stderr,
                 "scaleguard calibrate: the fitted efficiency %.3g of %s's peak is outside 0.001-1000: are the runs "
                 "from this hardware (a CPU run against a GPU type)? Nothing written\n",
                 f.value[kEfficiency], hw.gpu.name.c_str());
    return 1;
  }
  std::string name = hw.gpu.name;
  if (ws.host) {
    name = ws.host_name;
    if (name.empty()) {
      char host[256] = {};
      gethostname(host, sizeof host - 1);
      name = host[0] ? host : "host";
    }
    if (name.find_first_of(" \t[]#=") != std::string::npos || name.size() > 64) {
      std::fprintf(stderr, "scaleguard calibrate: --host-name=%s: a short name without spaces, brackets, # or =\n",
                   name.c_str());
      return 2;
    }
  }
  std::string text = "# Catalog override written by `scaleguard calibrate --write` (docs/calibration.md).\n"
                     "# Layer it on the catalog: --calibration FILE, $SCALEGUARD_CALIBRATION, or\n"
                     "# `calibration = FILE` in the policy (decide() and the job_submit plugin).\n\n";
  std::string command;
  for (int i = 0; i < ws.argc; ++i) command += (i ? " " : "") + std::string(ws.argv[i]);
  for (char& ch : command)
    if (ch == '\n' || ch == '#') ch = ' ';
  text += "[calibration]\nwritten = " + utc_text(std::time(nullptr)) + "\nscaleguard_version = " + build_version() + "\n";
  text += "command = scaleguard " + command + "\n\n";
  std::string sources;
  for (size_t i = 0; i < runs.size(); ++i) {
    text += fmt("[source %zu]\n", i + 1);
    text += "file = " + ws.paths[i] + "\nsha256 = " + ws.digests[i] + "\nlayout = " + layout_text(runs[i].run) + "\n";
    text += fmt("steps = %zu (first %d left out)\n", runs[i].steps.size() - std::min<size_t>(ws.skip, runs[i].steps.size()),
                ws.skip);
    text += "measured_step_s = " + num(f.measured_s[i]) + "\nfitted_step_s = " + num(f.predicted_s[i]) + "\n\n";
    sources += (i ? "," : "") + std::to_string(i + 1);
  }
  std::string fitted;
  for (int k = 0; k < kFitTerms; ++k)
    if (f.determined[k]) fitted += (fitted.empty() ? "" : ",") + std::string(fit_term_key(k));
  if (ws.host) {
    text += "[host " + name + "]\n";
    const double link = hw.gpu.nvlink_gb_s / 2;
    int rpn = ws.ranks_per_node.value_or(0);
    if (rpn <= 0) {
      rpn = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
      for (const auto& m : runs) rpn = std::max(rpn, m.run.tp * m.run.pp * m.run.dp);
    }
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    const double mem_gib = pages > 0 && page > 0 ? double(pages) * page / (1024.0 * 1024 * 1024) / rpn : 64;
    text += "peak_gflops = " + num(ws.peak_gflops) + "\nlink_gb_s = " + num(link) + "\n";
    if (hw.network_gb_s > 0 && hw.network_gb_s != link) text += "network_gb_s = " + num(hw.network_gb_s) + "\n";
    text += fmt("ranks_per_node = %d\n", rpn) + "memory_gib = " + num(std::max(1.0, mem_gib)) + "\n";
    if (f.cores_determined) text += "cores = " + num(f.cores) + "\n";
  } else {
    text += "[gpu " + name + "]\n";
  }
  text += "efficiency = " + num(f.value[kEfficiency]) + "\n";
  if (f.determined[kStepOverhead]) text += "step_overhead_s = " + num(f.value[kStepOverhead]) + "\n";
  if (f.determined[kCommAlpha]) text += "comm_alpha_s = " + num(f.value[kCommAlpha]) + "\n";
  if (f.determined[kCommBeta]) text += "comm_beta_gb_s = " + num(f.value[kCommBeta]) + "\n";
  if (f.cores_determined) fitted += ",cores";
  text += "fitted = " + fitted + "\nsources = " + sources + "\nrms_error = " + num(f.rms_relative_error) + "\n";

  // What we write must load: layer it on the catalog it was fitted against before keeping it.
  {
    const std::string probe_path = ws.out + ".check.tmp";
    Catalog check = catalog;
    std::string err;
    if (write_atomically(probe_path, text, true)) {
      auto ok = apply_catalog_override(check, probe_path);
      if (!ok) err = ok.error().str();
      unlink(probe_path.c_str());
    } else {
      return 1;
    }
    if (!err.empty()) {
      std::fprintf(stderr, "scaleguard calibrate: internal error: the override does not load: %s\n", err.c_str());
      return 1;
    }
  }
  if (!write_atomically(ws.out, text, ws.force)) return 1;

  if (ws.json) {
    std::printf("{\"file\":\"%s\",\"section\":\"%s %s\",\"rms_error\":%.6g,\"terms\":{", ws.out.c_str(),
                ws.host ? "host" : "gpu", name.c_str(), f.rms_relative_error);
    for (int k = 0; k < kFitTerms; ++k)
      std::printf("%s\"%s\":%s", k ? "," : "", fit_term_key(k), f.determined[k] ? num(f.value[k]).c_str() : "null");
    std::printf("},\"runs\":[");
    for (size_t i = 0; i < runs.size(); ++i)
      std::printf("%s{\"file\":\"%s\",\"measured_step_s\":%.6g,\"fitted_step_s\":%.6g}", i ? "," : "",
                  ws.paths[i].c_str(), f.measured_s[i], f.predicted_s[i]);
    std::printf("]}\n");
    return 0;
  }
  std::printf("fitted %zu run(s) on %s -> [%s %s] in %s\n\n", runs.size(), hw.gpu.name.c_str(), ws.host ? "host" : "gpu",
              name.c_str(), ws.out.c_str());
  std::printf("  %-36s %12s %12s %8s\n", "run (layout)", "measured", "fitted", "error");
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunInfo& r = runs[i].run;
    std::printf("  %-36s %12s %12s %7.1f%%\n", fmt("%s (tp%d pp%d dp%d, batch %d)", ws.paths[i].substr(ws.paths[i].find_last_of('/') + 1).c_str(), r.tp, r.pp, r.dp, r.global_batch).c_str(),
                ms(f.measured_s[i]).c_str(), ms(f.predicted_s[i]).c_str(),
                100 * (f.predicted_s[i] / f.measured_s[i] - 1));
  }
  std::printf("\n");
  std::printf("  efficiency       %s\n", num(f.value[kEfficiency]).c_str());
  std::printf("  step_overhead_s  %s%s\n", num(f.value[kStepOverhead]).c_str(), f.determined[kStepOverhead] ? "" : "  (catalog's)");
  std::printf("  comm_alpha_s     %s%s\n", num(f.value[kCommAlpha]).c_str(), f.determined[kCommAlpha] ? "" : "  (catalog's)");
  std::printf("  comm_beta_gb_s   %s%s\n", num(f.value[kCommBeta]).c_str(), f.determined[kCommBeta] ? "" : "  (catalog's)");
  if (ws.host) std::printf("  cores            %s\n", f.cores_determined ? num(f.cores).c_str() : "- (not shared)");
  std::printf("  rms error        %.1f%%\n", 100 * f.rms_relative_error);
  for (const auto& n : f.notes) std::printf("note: %s\n", n.c_str());
  return 0;
}

int run(int argc, char** argv) {
  po::options_description desc("scaleguard calibrate options");
  desc.add_options()("help,h", "this help")
      ("metrics", po::value<std::vector<std::string>>()->required(),
       "metrics file of a run (scaleguard-run --metrics FILE); with --write, repeat it once per run")
      ("hardware", po::value<std::string>()->default_value("host"),
       "host (this machine: probed or described by the flags below), or a catalog GPU or instance type")
      ("peak-gflops", po::value<std::string>(), "host: peak GFLOP/s per rank (default: probe rate x the run's threads)")
      ("link-gb-s", po::value<std::string>(), "host: rank-to-rank bandwidth, GB/s one way (default: probed memory copy)")
      ("network-gb-s", po::value<std::string>(), "host: node network GB/s for multi-node runs (default: the link's)")
      ("ranks-per-node", po::value<std::string>(), "ranks per node (host default: all on one node)")
      ("efficiency", po::value<std::string>(), "efficiency of the prediction (host default 1 = at peak)")
      ("skip", po::value<std::string>()->default_value("1"), "warm-up steps to leave out")
      ("catalog", po::value<std::string>(), "catalog file (default $SCALEGUARD_CATALOG or configs/catalog.ini)")
      ("calibration", po::value<std::string>(),
       "catalog override layered on the catalog (default $SCALEGUARD_CALIBRATION)")
      ("write", po::value<std::string>(),
       "fit efficiency, step overhead and communication latency/bandwidth over the runs and write them to this "
       "catalog override file")
      ("force", "with --write: replace an existing file")
      ("host-name", po::value<std::string>(), "with --write --hardware host: the [host NAME] (default: this host's name)")
      ("json", "machine-readable output");
  po::variables_map vm;
  const char* usage =
      "usage: scaleguard calibrate --metrics FILE [--hardware host|GPU-TYPE|INSTANCE] [--peak-gflops G]\n"
      "                            [--link-gb-s B] [--network-gb-s B] [--ranks-per-node N] [--efficiency E]\n"
      "                            [--skip N] [--catalog FILE] [--calibration FILE] [--json]\n"
      "       scaleguard calibrate --write FILE [--force] --metrics RUN1 --metrics RUN2 ... [hardware options]";
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

  const std::vector<std::string> paths = vm["metrics"].as<std::vector<std::string>>();
  const bool write = vm.count("write") > 0;
  if (paths.size() > 1 && !write) {
    std::fprintf(stderr, "scaleguard calibrate: several --metrics files are fitted together with --write FILE; "
                         "compare one run at a time without it\n");
    return 2;
  }
  if (!write && (vm.count("force") || vm.count("host-name"))) {
    std::fprintf(stderr, "scaleguard calibrate: --force and --host-name go with --write\n");
    return 2;
  }
  auto catalog = load_catalog(catalog_path(vm), calibration_path(vm));
  if (!catalog) return print_error("calibrate", catalog.error()), 1;
  std::vector<Metrics> runs;
  std::vector<std::string> digests;
  for (const auto& path : paths) {
    auto text = read_file(path);
    if (!text) return 1;
    auto m = parse_metrics(*text, path);
    if (!m) return print_error("calibrate", m.error()), 1;
    runs.push_back(std::move(m).value());
    digests.push_back(sha256_hex(*text));
  }
  const std::string path = paths.front();
  const Metrics& first = runs.front();
  const RunInfo& r = first.run;
  for (size_t i = 1; i < runs.size(); ++i)
    if (which_host(vm) && std::max(1, runs[i].run.threads) != std::max(1, r.threads)) {
      std::fprintf(stderr, "scaleguard calibrate: %s runs %d thread(s) per rank, %s %d: a host's peak per rank "
                           "depends on it; fit runs with the same --threads\n",
                   paths[i].c_str(), std::max(1, runs[i].run.threads), path.c_str(), std::max(1, r.threads));
      return 1;
    }

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
  if (write) {
    WriteSetup ws{paths, digests, vm["write"].as<std::string>(), vm.count("force") > 0, which == "host",
                  vm.count("host-name") ? vm["host-name"].as<std::string>() : "", *peak_used(hw), rpn, *skip,
                  vm.count("json") > 0, argc, argv};
    return write_calibration(runs, hw, catalog.value(), ws);
  }

  auto cal = calibrate(first, hw, *skip);
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
  if (which != "host" && r.device == "cpu" && hw.gpu.calibrated_by.empty())
    std::printf("note: the run trained on CPU ranks but is compared with %s GPUs\n", hw.gpu.name.c_str());
  return 0;
}

const bool registered =
    register_verb({"calibrate", "compare a run's measured step time with the planner's prediction", run});

}  // namespace
}  // namespace scaleguard::cli
