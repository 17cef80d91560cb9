// The planner's calibration loop: a training run's measured step time, communication share
// and pipeline bubble (scaleguard-run --metrics) against the planner's prediction for the
// same configuration on the same hardware, and the efficiency that would make them agree.
#pragma once
#include <string>
#include <vector>

#include "scaleguard/plan.h"
#include "scaleguard/result.h"

namespace scaleguard {

// The first line of a metrics file: {"run":{...}} (runner/src/train/trainer.cpp, log_run()).
struct RunInfo {
  std::string model;
  int n_layer = 0, n_head = 0, n_embd = 0, seq_len = 0, vocab_size = 0;
  int global_batch = 0, micro_batch = 0, micro_batches = 0;
  int tp = 1, pp = 1, dp = 1, zero = 0, world = 0, threads = 0;
  double params = 0;
  std::string schedule;           // pipeline schedule (1f1b, gpipe), "none" without pp
  std::string device;             // "cpu" or "cuda"
  Precision precision = Precision::fp32;
  Recompute recompute = Recompute::none;  // activation recompute: full repeats the forward (more FLOPs)
};

struct StepSample {
  long step = 0;
  double step_ms = 0, comm_fraction = 0, bubble_fraction = 0;
};

struct Metrics {
  RunInfo run;
  std::vector<StepSample> steps;  // in file order
};

// Reads a metrics file (JSON lines): the run line first, then step lines; lines without
// "step_ms" (e.g. checkpoint events) are skipped. Errors name the file, line and field.
Result<Metrics> parse_metrics(const std::string& text, const std::string& source);

// What the hardware the run used can do, per rank (one rank = one "GPU" to the planner).
struct HostHardware {
  std::string name = "host";
  double peak_flops = 0;          // FLOP/s per rank at the run's precision
  double link_gb_s = 0;           // rank-to-rank bandwidth inside a node, one direction, GB/s
  double network_gb_s = 0;        // node network, GB/s (multi-node runs)
  int ranks_per_node = 0;         // 0 = all ranks on one node
  double efficiency = 1;          // the prediction's efficiency (1 = at peak)
  std::string source;             // where the numbers came from, for the report
};

// A small built-in probe of this machine: an fp32 matrix-multiply rate on one thread and a
// memory copy bandwidth. It runs ~0.3 s; its numbers vary with load and are reported, never
// compared against thresholds.
struct ProbeResult {
  double gemm_flops_per_thread = 0;
  double copy_gb_s = 0;
};
ProbeResult probe_host();

// The planner's hardware for a host description (a GpuType named after it, priced at 0).
Hardware host_hardware(const HostHardware&, const Assumptions&);

// Measured medians next to the prediction.
struct Calibration {
  RunInfo run;
  Layout layout;
  double params = 0;                       // the run's parameter count (else the GPT formula's)
  int steps_used = 0, steps_skipped = 0;
  Plan predicted;                          // evaluate() of the run's layout on the hardware
  double used_efficiency = 0;              // the efficiency the prediction used
  double measured_step_s = 0;              // median step time
  double measured_comm_fraction = 0;       // median communication share of a step
  double measured_bubble_fraction = 0;     // median pipeline bubble
  double predicted_comm_fraction = 0;      // exposed communication / step
  double measured_compute_s = 0;           // step x (1 - comm - bubble)
  double implied_efficiency = 0;           // the efficiency at which predicted compute = measured
  double implied_bandwidth_utilization = 0;  // 0 when there is no communication to compare
  std::vector<std::string> notes;          // caveats (few steps, communication not measured, ...)
};
// Compares the run with the planner on `hw`. skip = warm-up steps left out. Errors when
// the run line cannot describe a valid layout or no steps remain.
Result<Calibration> calibrate(const Metrics&, const Hardware& hw, int skip);

std::string to_json(const Calibration&);

// The planner's step for a run's layout on `hw` (the workload and layout calibrate() uses).
Result<Plan> predict_run(const RunInfo&, const Hardware& hw);
// The median step time (seconds) after `skip` warm-up steps; 0 when none remain.
double median_step_seconds(const Metrics&, int skip);

// `scaleguard calibrate --write`: least squares over several runs of
//   step = compute / efficiency + step_overhead_s + comm_alpha_s x hops + bytes / comm_beta_gb_s
// (the planner's own evaluate(), so pipeline bubbles and overlap are the planner's), relative
// residuals, no term below 0. A term the runs cannot determine (no multi-rank run: no
// communication terms; one amount of work per step: no overhead; transfers all of one size:
// latency and bandwidth not told apart) keeps the catalog's value, with a note saying why.
enum FitTerm { kEfficiency = 0, kStepOverhead = 1, kCommAlpha = 2, kCommBeta = 3, kFitTerms = 4 };
const char* fit_term_key(int term);  // "efficiency", "step_overhead_s", "comm_alpha_s", "comm_beta_gb_s"
struct FitResult {
  Hardware fitted;                 // `hw` with the fitted (and kept) terms set on its GpuType
  bool determined[kFitTerms] = {};
  double value[kFitTerms] = {};    // efficiency, seconds, seconds, GB/s
  std::vector<double> measured_s, predicted_s;  // per run, median measured vs calibrated planner
  double rms_relative_error = 0;
  std::vector<std::string> notes;  // terms kept from the catalog and why
  bool cores_determined = false;   // fit_cores: the host's shared cores (GpuType::cores)
  double cores = 0;
};
// `runs` with their sources (for messages). Errors: no runs, a run the planner cannot lay out,
// no step after skip, or an efficiency the runs cannot determine.
// fit_cores (a measured host): also the cores the ranks share, searched in one dimension
// around the linear fit; it needs runs with different ranks per host.
Result<FitResult> fit_calibration(const std::vector<Metrics>& runs, const std::vector<std::string>& sources,
                                  const Hardware& hw, int skip, bool fit_cores = false);

// SHA-256 of a byte string, 64 lower-case hex digits (provenance of the fitted files).
std::string sha256_hex(const std::string& bytes);

}  // namespace scaleguard
