// The calibration loop: a run's metrics file against evaluate() of the same layout.
#include "scaleguard/calibrate.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <chrono>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "scaleguard/text.h"

namespace scaleguard {

namespace {
using nlohmann::json;

Error bad(const std::string& source, int line, const std::string& field, const std::string& message,
          const std::string& hint = "") {
  return Error{message, source, line, field, hint};
}

// A whole number in [lo, hi] from the run line; an absent optional key is 0.
Result<int> run_int(const json& run, const char* key, int lo, int hi, bool required, const std::string& source) {
  if (!run.contains(key)) {
    if (!required) return 0;
    return bad(source, 1, std::string("run.") + key, "missing from the run line",
               "scaleguard-run --metrics writes it; is this file from it?");
  }
  const json& v = run[key];
  if (!v.is_number_integer() || v.get<long long>() < lo || v.get<long long>() > hi)
    return bad(source, 1, std::string("run.") + key,
               "expected a whole number from " + std::to_string(lo) + " to " + std::to_string(hi) + ", got " +
                   v.dump().substr(0, 60));
  return static_cast<int>(v.get<long long>());
}

// A fraction in [0, 1] from a step line (absent = 0).
Result<double> fraction(const json& line, const char* key, const std::string& source, int n) {
  if (!line.contains(key)) return 0.0;
  const json& v = line[key];
  if (!v.is_number() || !(v.get<double>() >= 0 && v.get<double>() <= 1))
    return bad(source, n, key, "expected a number from 0 to 1, got " + v.dump());
  return v.get<double>();
}

Result<RunInfo> parse_run(const json& run, const std::string& source) {
  RunInfo r;
  if (!run.is_object()) return bad(source, 1, "run", "expected an object");
  struct Field { const char* key; int* slot; int lo, hi; bool required; };
  const Field fields[] = {
      {"n_layer", &r.n_layer, 1, 100000, true},         {"n_head", &r.n_head, 1, 100000, true},
      {"n_embd", &r.n_embd, 1, 1 << 20, true},          {"seq_len", &r.seq_len, 1, 1 << 24, true},
      {"vocab_size", &r.vocab_size, 1, 1 << 24, true},  {"global_batch", &r.global_batch, 1, 1 << 24, true},
      {"micro_batch", &r.micro_batch, 1, 1 << 24, true}, {"tp", &r.tp, 1, 1024, true},
      {"pp", &r.pp, 1, 100000, true},                   {"dp", &r.dp, 1, 1 << 20, true},
      {"zero", &r.zero, 0, 3, false},                   {"micro_batches", &r.micro_batches, 0, 1 << 24, false},
      {"world", &r.world, 0, 1 << 24, false},           {"threads", &r.threads, 0, 4096, false},
  };
  for (const auto& f : fields) {
    auto v = run_int(run, f.key, f.lo, f.hi, f.required, source);
    if (!v) return v.error();
    *f.slot = v.value();
  }
  for (auto [key, slot] : {std::pair{"model", &r.model}, std::pair{"schedule", &r.schedule},
                           std::pair{"device", &r.device}}) {
    if (!run.contains(key)) continue;
    if (!run[key].is_string() || text::has_control(run[key].get<std::string>()) || run[key].get<std::string>().size() > 200)
      return bad(source, 1, key, "expected a short string, got " + run[key].dump().substr(0, 60));
    *slot = run[key].get<std::string>();
  }
  if (run.contains("params")) {
    if (!run["params"].is_number() || !(run["params"].get<double>() > 0 && run["params"].get<double>() < 1e15))
      return bad(source, 1, "params", "expected a parameter count above 0, got " + run["params"].dump());
    r.params = run["params"].get<double>();
  }
  if (run.contains("precision")) {
    auto p = run["precision"].is_string() ? parse_precision(run["precision"].get<std::string>())
                                          : Result<Precision>(Error{"expected a string", "", 0, "", ""});
    if (!p) return bad(source, 1, "precision", p.error().message, p.error().hint);
    r.precision = p.value();
  }
  if (run.contains("recompute")) {
    auto rc = run["recompute"].is_string() ? parse_recompute(run["recompute"].get<std::string>())
                                           : Result<Recompute>(Error{"expected a string", "", 0, "", ""});
    if (!rc) return bad(source, 1, "recompute", rc.error().message, rc.error().hint);
    r.recompute = rc.value();
  }
  if (r.world > 0 && r.world != r.tp * r.pp * r.dp)
    return bad(source, 1, "world", text::format("world %d != tp %d x pp %d x dp %d", r.world, r.tp, r.pp, r.dp));
  return r;
}

// The start of a line for a message: printable ASCII only (the file may be binary).
std::string excerpt(const std::string& line) {
  std::string out;
  for (char ch : line.substr(0, 60)) out += ch >= 0x20 && ch < 0x7f ? ch : '?';
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One register tile of C (4 x 16) += A (4 x k) * B (k x 16); vector lanes are left to the
// compiler (GCC/Clang vector extensions map to whatever SIMD the build targets).
typedef float v8 __attribute__((vector_size(32)));

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
void gemm_tiles(const float* a, const float* b, float* c, int n) {
  for (int i = 0; i < n; i += 4)
    for (int j = 0; j < n; j += 16) {
      v8 acc[4][2] = {};
      for (int k = 0; k < n; ++k) {
        v8 b0, b1;
        std::memcpy(&b0, b + k * n + j, sizeof b0);
        std::memcpy(&b1, b + k * n + j + 8, sizeof b1);
        for (int r = 0; r < 4; ++r) {
          const float x = a[(i + r) * n + k];
          acc[r][0] += x * b0;
          acc[r][1] += x * b1;
        }
      }
      for (int r = 0; r < 4; ++r) std::memcpy(c + (i + r) * n + j, acc[r], sizeof acc[r]);
    }
}
}  // namespace

Result<Metrics> parse_metrics(const std::string& text, const std::string& source) {
  Metrics m;
  bool have_run = false;
  json first_run;
  int n = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text::trim(text.substr(pos, end - pos));
    pos = end + 1;
    ++n;
    if (line.empty()) continue;
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      return bad(source, n, "", "not a JSON object: " + excerpt(line),
                 "a metrics file has one JSON object per line (scaleguard-run --metrics)");
    if (!have_run) {
      if (!j.contains("run"))
        return bad(source, n, "run", "the first line must be the run line {\"run\":{...}}",
                   "written first by scaleguard-run --metrics; the file may be cut or from another program");
      auto r = parse_run(j["run"], source);
      if (!r) {
        Error e = r.error();
        e.line = n;
        return e;
      }
      m.run = r.value();
      first_run = j["run"];
      have_run = true;
      continue;
    }
    if (j.contains("run")) {  // a resumed run appends its own run line: same configuration only
      for (const char* k : {"n_layer", "n_head", "n_embd", "seq_len", "vocab_size", "global_batch", "micro_batch",
                            "tp", "pp", "dp", "zero", "precision", "recompute"})
        if (j["run"].value(k, json()) != first_run.value(k, json()))
          return bad(source, n, std::string("run.") + k, "a second run line with a different configuration",
                     "calibrate one configuration per file");
      continue;
    }
    if (!j.contains("step_ms")) continue;  // other events (checkpoints, evaluation)
    StepSample s;
    const json& ms = j["step_ms"];
    if (!ms.is_number() || !(ms.get<double>() > 0 && ms.get<double>() < 1e9))
      return bad(source, n, "step_ms", "expected a positive number of milliseconds, got " + ms.dump());
    s.step_ms = ms.get<double>();
    if (j.contains("step") && j["step"].is_number_integer()) s.step = j["step"].get<long>();
    auto c = fraction(j, "comm_fraction", source, n);
    if (!c) return c.error();
    auto b = fraction(j, "bubble_fraction", source, n);
    if (!b) return b.error();
    s.comm_fraction = c.value();
    s.bubble_fraction = b.value();
    m.steps.push_back(s);
  }
  if (!have_run)
    return bad(source, 0, "run", "no run line: the file is empty", "pass the file scaleguard-run --metrics wrote");
  if (m.steps.empty())
    return bad(source, 0, "step_ms", "no step lines after the run line", "let the run train at least two steps");
  return m;
}

ProbeResult probe_host() {
  ProbeResult out;
  constexpr int n = 256;  // 3 x 256 KiB: fits in L2/L3, so this is arithmetic, not memory
  std::vector<float> a(n * n), b(n * n), c(n * n);
  for (int i = 0; i < n * n; ++i) a[i] = 1.0f + (i % 7) * 0.125f, b[i] = 1.0f - (i % 5) * 0.0625f;
  double best = 0;
  for (int round = 0; round < 5; ++round) {  // best of 5: the probe wants the rate, not the noise
    const auto t0 = std::chrono::steady_clock::now();
    gemm_tiles(a.data(), b.data(), c.data(), n);
    const double s = seconds_since(t0);
    if (s > 0) best = std::max(best, 2.0 * n * n * n / s);
  }
  out.gemm_flops_per_thread = c[n + 1] != 0 ? best : 0;  // c is read so the work is kept

  const size_t bytes = size_t(64) << 20;
  std::vector<char> src(bytes, 1), dst(bytes);
  double best_bw = 0;
  for (int round = 0; round < 3; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    const double s = seconds_since(t0);
    if (s > 0) best_bw = std::max(best_bw, bytes / s / 1e9);
    src[round] = dst[bytes - 1 - round];
  }
  out.copy_gb_s = best_bw;
  return out;
}

Hardware host_hardware(const HostHardware& h, const Assumptions& assume) {
  Hardware hw;
  hw.gpu.name = h.name;
  hw.gpu.memory_gib = 1 << 20;  // memory is not what calibration checks
  // One peak for every precision: the description is already "at the run's precision".
  hw.gpu.tflops_fp32 = hw.gpu.tflops_fp16 = hw.gpu.tflops_bf16 = h.peak_flops / 1e12;
  hw.gpu.nvlink_gb_s = 2 * h.link_gb_s;  // the planner takes NVLink as both directions together
  hw.gpu.efficiency = h.efficiency;
  hw.instance = h.name;
  hw.gpus_per_node = h.ranks_per_node > 0 ? h.ranks_per_node : 1 << 20;
  hw.network_gb_s = h.network_gb_s > 0 ? h.network_gb_s : h.link_gb_s;
  hw.assume = assume;
  return hw;
}

namespace {
struct RunSetup {
  Workload workload;
  Layout layout;
};
// The workload and layout of a run line, checked against the hardware.
Result<RunSetup> run_setup(const RunInfo& r, const Hardware& hw) {
  if (r.n_embd % r.n_head != 0 || r.n_head % r.tp != 0)
    return Error{text::format("n_embd %d, n_head %d and tp %d do not split into whole heads per rank", r.n_embd, r.n_head,
                              r.tp),
                 "", 0, "run", ""};
  if (r.pp > r.n_layer)
    return Error{text::format("pp %d > n_layer %d", r.pp, r.n_layer), "", 0, "run", ""};
  if (r.tp > hw.gpus_per_node)
    return Error{text::format("tp %d spans more than one node of %d rank(s)", r.tp, hw.gpus_per_node), "", 0,
                 "ranks-per-node", "tensor parallelism stays within a node; raise --ranks-per-node"};
  ModelSpec spec;
  spec.name = r.model.empty() ? "run" : r.model;
  spec.layers = r.n_layer, spec.hidden = r.n_embd, spec.heads = r.n_head, spec.seq = r.seq_len;
  spec.vocab = r.vocab_size;
  spec.params = r.params > 0 ? r.params : gpt_params(r.n_layer, r.n_embd, r.seq_len, r.vocab_size);
  spec.precision = r.precision;
  spec.optimizer = Optimizer::adam;
  return RunSetup{Workload{spec, double(r.global_batch) * r.seq_len, r.global_batch},
                  Layout{r.tp, r.pp, r.dp, r.zero, r.micro_batch, r.recompute}};
}
}  // namespace

Result<Plan> predict_run(const RunInfo& r, const Hardware& hw) {
  auto setup = run_setup(r, hw);
  if (!setup) return setup.error();
  return evaluate(setup.value().workload, hw, setup.value().layout);
}

Result<Calibration> calibrate(const Metrics& m, const Hardware& hw, int skip) {
  Calibration c;
  c.run = m.run;
  const RunInfo& r = m.run;
  if (skip < 0 || static_cast<size_t>(skip) >= m.steps.size())
    return Error{text::format("%zu step line(s), none left after skipping %d as warm-up", m.steps.size(), skip), "", 0,
                 "skip", "run more steps or lower --skip"};
  auto setup = run_setup(r, hw);
  if (!setup) return setup.error();
  const Workload& w = setup.value().workload;
  const ModelSpec& spec = w.model;
  c.layout = setup.value().layout;
  c.params = spec.params;
  c.predicted = evaluate(w, hw, c.layout);
  c.used_efficiency = hw.gpu.efficiency;

  std::vector<double> step, comm, bubble;
  for (size_t i = skip; i < m.steps.size(); ++i) {
    step.push_back(m.steps[i].step_ms / 1e3);
    comm.push_back(m.steps[i].comm_fraction);
    bubble.push_back(m.steps[i].bubble_fraction);
  }
  c.steps_skipped = skip;
  c.steps_used = static_cast<int>(step.size());
  c.measured_step_s = median(step);
  c.measured_comm_fraction = median(comm);
  c.measured_bubble_fraction = median(bubble);
  const Plan& p = c.predicted;
  // Both sides split a step the same way: compute, pipeline bubble, and communication =
  // whatever is neither (so feeding the prediction back in returns the same efficiency).
  // The planner's fixed per-step costs (optimizer update, host) count as compute: the
  // runner's communication timer does not see them.
  const double p_compute = p.compute_seconds + p.fixed_seconds;
  // The bubble idles the pipelined part of the step, not the fixed costs after it.
  const double p_bubble = p.bubble_fraction * (p.step_seconds - p.fixed_seconds) / p.step_seconds;
  c.predicted_comm_fraction = std::max(0.0, 1 - p_bubble - p_compute / p.step_seconds);
  double predicted_comm = c.predicted_comm_fraction * p.step_seconds;
  c.measured_compute_s = c.measured_step_s * (1 - c.measured_comm_fraction - c.measured_bubble_fraction);

  if (c.measured_compute_s > 0) {
    // Only the math scales with the efficiency; memory-bound work and the fixed per-step
    // costs take what they take.
    const double math = p.compute_seconds - p.memory_bound_seconds;
    const double other = p.memory_bound_seconds + p.fixed_seconds;
    c.implied_efficiency = c.measured_compute_s > other
                               ? hw.gpu.efficiency * math / (c.measured_compute_s - other)
                               : hw.gpu.efficiency * p_compute / c.measured_compute_s;
    // Bandwidth is compared at the implied efficiency: how much data-parallel traffic the
    // backward pass hides depends on how long the compute takes.
    Hardware at = hw;
    at.gpu.efficiency = c.implied_efficiency;
    const Plan q = evaluate(w, at, c.layout);
    predicted_comm = std::max(0.0, (1 - q.bubble_fraction) * (q.step_seconds - q.fixed_seconds) - q.compute_seconds);
  } else {
    c.notes.push_back("communication and bubble fill the whole measured step: no compute time left to calibrate");
  }
  const double measured_comm = c.measured_step_s * c.measured_comm_fraction;
  if (predicted_comm > 0 && measured_comm > 0)
    c.implied_bandwidth_utilization = hw.assume.bandwidth_utilization * predicted_comm / measured_comm;
  else if (predicted_comm > 0)
    c.notes.push_back("the run reported no communication time, so bandwidth is not calibrated");
  else if (measured_comm > 0 && p.dp_comm_seconds > 0)
    c.notes.push_back(text::format(
        "the planner hides this layout's %.3f ms of gradient transfer behind the backward pass, but the run "
        "waited %.3f ms per step: latency and synchronization the bandwidth model leaves out",
        p.dp_comm_seconds * 1e3, measured_comm * 1e3));
  else
    c.notes.push_back("this layout has no exposed communication in the planner, so bandwidth is not calibrated");
  if (c.steps_used < 5) c.notes.push_back(text::format("only %d step(s) measured: medians are noisy", c.steps_used));
  const int per_rank = (r.global_batch + r.dp - 1) / r.dp;
  if (r.micro_batches > 0 && r.micro_batches != (per_rank + r.micro_batch - 1) / r.micro_batch)
    c.notes.push_back(text::format("the run's %d micro-batches per step differ from global_batch / (dp x micro_batch) = %d",
                                   r.micro_batches, (per_rank + r.micro_batch - 1) / r.micro_batch));
  if (r.pp > 1 && !r.schedule.empty() && r.schedule != "1f1b")
    c.notes.push_back("schedule " + r.schedule + ": the planner's bubble (p-1)/(m+p-1) is the same for GPipe and 1F1B");
  return c;
}

std::string to_json(const Calibration& c) {
  const Plan& p = c.predicted;
  json j;
  j["run"] = {{"model", c.run.model}, {"tp", c.layout.tp}, {"pp", c.layout.pp}, {"dp", c.layout.dp},
              {"zero", c.layout.zero}, {"micro_batch", c.layout.micro_batch}, {"micro_batches", p.micro_batches},
              {"global_batch", p.global_batch}, {"params", c.params}};
  j["steps"] = {{"used", c.steps_used}, {"skipped", c.steps_skipped}};
  j["predicted"] = {{"step_seconds", p.step_seconds},
                    {"compute_seconds", p.compute_seconds},
                    {"memory_bound_seconds", p.memory_bound_seconds},
                    {"fixed_seconds", p.fixed_seconds},
                    {"comm_fraction", c.predicted_comm_fraction},
                    {"bubble_fraction", p.bubble_fraction},
                    {"efficiency", c.used_efficiency}};
  j["measured"] = {{"step_seconds", c.measured_step_s},
                   {"compute_seconds", c.measured_compute_s},
                   {"comm_fraction", c.measured_comm_fraction},
                   {"bubble_fraction", c.measured_bubble_fraction}};
  j["implied"] = {{"efficiency", c.implied_efficiency},
                  {"bandwidth_utilization",
                   c.implied_bandwidth_utilization > 0 ? json(c.implied_bandwidth_utilization) : json(nullptr)}};
  j["notes"] = c.notes;
  return j.dump(2);
}

// ---- scaleguard calibrate --write: the least-squares fit ----------------------------------

const char* fit_term_key(int term) {
  static const char* const keys[] = {"efficiency", "step_overhead_s", "comm_alpha_s", "comm_beta_gb_s"};
  return term >= 0 && term < kFitTerms ? keys[term] : "?";
}

double median_step_seconds(const Metrics& m, int skip) {
  std::vector<double> v;
  for (size_t i = std::max(0, skip); i < m.steps.size(); ++i) v.push_back(m.steps[i].step_ms / 1e3);
  return v.empty() ? 0 : median(v);
}

namespace {
// The fit's parameters are linear in the step time: theta = {1/efficiency, overhead s,
// alpha s, 1/beta s per GB}.
using Theta = std::array<double, kFitTerms>;

Hardware with_theta(const Hardware& hw, const Theta& t) {
  Hardware h = hw;
  h.gpu.efficiency = 1 / t[kEfficiency];
  h.gpu.step_overhead_s = t[kStepOverhead];
  h.gpu.comm_alpha_s = t[kCommAlpha];
  h.gpu.comm_beta_gb_s = t[kCommBeta] > 0 ? 1 / t[kCommBeta] : 1e12;  // 0 s/GB = unlimited
  return h;
}

// The catalog's values of the four terms for `hw` (what an undetermined term keeps).
Theta catalog_theta(const Hardware& hw) {
  const double link = hw.gpu.nvlink_gb_s > 0 ? hw.gpu.nvlink_gb_s : hw.gpu.pcie_gb_s;
  const double beta = hw.gpu.comm_beta_gb_s > 0 ? hw.gpu.comm_beta_gb_s : link / 2 * hw.assume.bandwidth_utilization;
  return {1 / hw.gpu.efficiency,
          hw.gpu.step_overhead_s >= 0 ? hw.gpu.step_overhead_s : hw.assume.step_overhead_s,
          hw.gpu.comm_alpha_s >= 0 ? hw.gpu.comm_alpha_s : hw.assume.collective_latency_intra_us * 1e-6,
          beta > 0 ? 1 / beta : 0};
}

// Solves the n x n system a x = b in place (Gaussian elimination, partial pivoting); false
// when singular.
bool solve(std::vector<std::vector<double>> a, std::vector<double> b, std::vector<double>& x) {
  const size_t n = b.size();
  for (size_t c = 0; c < n; ++c) {
    size_t piv = c;
    for (size_t r = c + 1; r < n; ++r)
      if (std::fabs(a[r][c]) > std::fabs(a[piv][c])) piv = r;
    if (!(std::fabs(a[piv][c]) > 1e-300)) return false;
    std::swap(a[c], a[piv]);
    std::swap(b[c], b[piv]);
    for (size_t r = c + 1; r < n; ++r) {
      const double f = a[r][c] / a[c][c];
      for (size_t k = c; k < n; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  x.assign(n, 0);
  for (size_t c = n; c-- > 0;) {
    double v = b[c];
    for (size_t k = c + 1; k < n; ++k) v -= a[c][k] * x[k];
    x[c] = v / a[c][c];
  }
  return true;
}
}  // namespace

namespace {
Result<FitResult> fit_linear(const std::vector<Metrics>& runs, const std::vector<std::string>& sources,
                             const Hardware& hw, int skip) {
  if (runs.empty()) return Error{"no runs to fit", "", 0, "metrics", "pass --metrics FILE, once per run"};
  const size_t n = runs.size();
  std::vector<double> measured(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string src = i < sources.size() ? sources[i] : "run " + std::to_string(i + 1);
    measured[i] = median_step_seconds(runs[i], skip);
    if (!(measured[i] > 0))
      return Error{text::format("%zu step line(s), none left after skipping %d as warm-up", runs[i].steps.size(), skip),
                   src, 0, "skip", "run more steps or lower --skip"};
    if (auto p = predict_run(runs[i].run, hw); !p) {
      Error e = p.error();
      e.file = src;
      return e;
    }
  }
  const Theta base = catalog_theta(hw);
  auto step = [&](size_t i, const Theta& t) { return predict_run(runs[i].run, with_theta(hw, t)).value().step_seconds; };
  // Finite-difference columns at theta (the step is linear in theta but for the overlap window).
  const Theta scale = {1.0, 1e-3, 1e-5, 1e-2};
  auto jacobian = [&](const Theta& t, std::vector<Theta>& J, std::vector<double>& f0) {
    J.assign(n, Theta{});
    f0.assign(n, 0);
    for (size_t i = 0; i < n; ++i) {
      f0[i] = step(i, t);
      for (int k = 0; k < kFitTerms; ++k) {
        Theta u = t;
        const double h = std::max(std::fabs(t[k]), scale[k]) * 1e-4;
        u[k] += h;
        J[i][k] = (step(i, u) - f0[i]) / h;
      }
    }
  };
  FitResult out;
  std::vector<Theta> J;
  std::vector<double> f0;
  jacobian(base, J, f0);

  // Which terms the runs determine: a column (relative residuals: rows / measured) that is
  // not, within 2 %, a combination of the columns before it.
  std::vector<std::vector<double>> basis;  // orthonormal, over runs
  bool multi_rank = false, comm_seen = false;
  for (size_t i = 0; i < n; ++i) multi_rank |= runs[i].run.tp * runs[i].run.pp * runs[i].run.dp > 1;
  for (int k = 0; k < kFitTerms; ++k) {
    std::vector<double> col(n);
    double norm = 0;
    for (size_t i = 0; i < n; ++i) col[i] = J[i][k] / measured[i] * std::max(std::fabs(base[k]), scale[k]), norm += col[i] * col[i];
    norm = std::sqrt(norm);
    if (k >= kCommAlpha && norm > 0) comm_seen = true;
    double left = norm;
    if (norm > 0) {
      for (const auto& q : basis) {
        double d = 0;
        for (size_t i = 0; i < n; ++i) d += q[i] * col[i];
        for (size_t i = 0; i < n; ++i) col[i] -= d * q[i];
      }
      left = 0;
      for (double v : col) left += v * v;
      left = std::sqrt(left);
    }
    if (norm > 0 && left > 0.02 * norm) {
      for (double& v : col) v /= left;
      basis.push_back(col);
      out.determined[k] = true;
    }
  }
  if (!out.determined[kEfficiency])
    return Error{"the runs do not determine the compute efficiency", "", 0, "efficiency", "fit runs that compute"};
  if (!out.determined[kStepOverhead])
    out.notes.push_back("step_overhead_s kept from the catalog: every run does the same work per step relative to its "
                        "other terms (fit runs with two global batch sizes)");
  if (!multi_rank)
    out.notes.push_back("comm_alpha_s and comm_beta_gb_s kept from the catalog: no multi-rank run, so no communication "
                        "to fit (add a ddp, pipeline or tensor run)");
  else if (!comm_seen)
    out.notes.push_back("comm_alpha_s and comm_beta_gb_s kept from the catalog: the planner sees no exposed "
                        "communication in these runs");
  else if (out.determined[kCommAlpha] != out.determined[kCommBeta])
    out.notes.push_back(std::string(out.determined[kCommAlpha] ? "comm_beta_gb_s" : "comm_alpha_s") +
                        " kept from the catalog: the runs' transfers do not tell latency and bandwidth apart (fit "
                        "runs whose messages differ in size and number, e.g. ddp and tensor)");
  else if (!out.determined[kCommAlpha])
    out.notes.push_back("comm_alpha_s and comm_beta_gb_s kept from the catalog: the runs do not tell communication "
                        "apart from compute");

  // Least squares with relative residuals and no term below 0: a few Gauss-Newton rounds,
  // each an exact non-negative solve over every subset of the determined terms (at most 16).
  Theta theta = base;
  bool clamped[kFitTerms] = {};
  for (int round = 0; round < 4; ++round) {
    jacobian(theta, J, f0);
    double best = std::numeric_limits<double>::infinity();
    Theta best_theta = theta;
    bool best_clamped[kFitTerms] = {};
    for (int mask = 1; mask < (1 << kFitTerms); ++mask) {
      if (!(mask & 1)) continue;  // the efficiency is always fitted
      bool ok = true;
      for (int k = 0; k < kFitTerms; ++k)
        if ((mask >> k & 1) && !out.determined[k]) ok = false;
      if (!ok) continue;
      std::vector<int> free;
      for (int k = 0; k < kFitTerms; ++k)
        if (mask >> k & 1) free.push_back(k);
      // Fixed terms: undetermined ones at the catalog's value, determined ones left out at 0.
      Theta fixed = theta;
      for (int k = 0; k < kFitTerms; ++k)
        if (!(mask >> k & 1)) fixed[k] = out.determined[k] ? 0 : base[k];
      // Residual target: measured - (f0 + J (fixed - theta)) over the free columns.
      const size_t m = free.size();
      std::vector<std::vector<double>> ata(m, std::vector<double>(m, 0));
      std::vector<double> atb(m, 0), x;
      std::vector<double> target(n);
      for (size_t i = 0; i < n; ++i) {
        double c0 = f0[i];
        for (int k = 0; k < kFitTerms; ++k) c0 += J[i][k] * ((mask >> k & 1) ? -theta[k] : fixed[k] - theta[k]);
        target[i] = measured[i] - c0;
        const double w = 1 / measured[i];
        for (size_t a = 0; a < m; ++a) {
          atb[a] += w * w * J[i][free[a]] * target[i];
          for (size_t b = 0; b < m; ++b) ata[a][b] += w * w * J[i][free[a]] * J[i][free[b]];
        }
      }
      if (!solve(ata, atb, x)) continue;
      Theta t = fixed;
      bool nonneg = true;
      for (size_t a = 0; a < m; ++a) {
        t[free[a]] = x[a];
        if (!(x[a] > 0) && !(free[a] != kEfficiency && x[a] == 0)) nonneg = false;
      }
      if (!nonneg) continue;
      double rss = 0;
      for (size_t i = 0; i < n; ++i) {
        double pred = target[i];
        for (size_t a = 0; a < m; ++a) pred -= J[i][free[a]] * x[a];
        rss += pred * pred / (measured[i] * measured[i]);
      }
      if (rss < best) {
        best = rss, best_theta = t;
        for (int k = 0; k < kFitTerms; ++k) best_clamped[k] = out.determined[k] && !(mask >> k & 1);
      }
    }
    if (!std::isfinite(best))
      return Error{"no non-negative fit: the runs' step times fall as their work grows", "", 0, "metrics",
                   "check the runs (one machine, quiet, the same threads per rank) and --skip"};
    theta = best_theta;
    std::copy(best_clamped, best_clamped + kFitTerms, clamped);
  }
  // A bandwidth clamped to "unlimited" is not a number to write: keep the catalog's, refit.
  if (clamped[kCommBeta]) {
    out.determined[kCommBeta] = false;
    out.notes.push_back("comm_beta_gb_s kept from the catalog: the transfers' sizes explain none of the measured "
                        "time (latency-bound)");
    // One more round with beta fixed at the catalog's value.
    Theta t = theta;
    t[kCommBeta] = base[kCommBeta];
    jacobian(t, J, f0);
    std::vector<int> free;
    for (int k = 0; k < kCommBeta; ++k)
      if (out.determined[k] && !clamped[k]) free.push_back(k);
    const size_t m = free.size();
    std::vector<std::vector<double>> ata(m, std::vector<double>(m, 0));
    std::vector<double> atb(m, 0), x;
    for (size_t i = 0; i < n; ++i) {
      double c0 = f0[i];
      for (int k : free) c0 -= J[i][k] * t[k];
      const double w = 1 / measured[i];
      for (size_t a = 0; a < m; ++a) {
        atb[a] += w * w * J[i][free[a]] * (measured[i] - c0);
        for (size_t b = 0; b < m; ++b) ata[a][b] += w * w * J[i][free[a]] * J[i][free[b]];
      }
    }
    if (solve(ata, atb, x)) {
      bool ok = true;
      for (double v : x) ok &= v >= 0;
      if (ok && x[0] > 0)
        for (size_t a = 0; a < m; ++a) t[free[a]] = x[a];
    }
    theta = t;
  }
  for (int k = 0; k < kFitTerms; ++k)
    if (out.determined[k] && clamped[k] && k != kCommBeta)
      out.notes.push_back(std::string(fit_term_key(k)) + " fitted at 0: the runs show no such cost");
  out.fitted = with_theta(hw, theta);
  if (!out.determined[kCommBeta] && hw.gpu.comm_beta_gb_s <= 0) out.fitted.gpu.comm_beta_gb_s = 0;  // the catalog's link
  if (!out.determined[kCommAlpha] && hw.gpu.comm_alpha_s < 0) out.fitted.gpu.comm_alpha_s = -1;
  if (!out.determined[kStepOverhead] && hw.gpu.step_overhead_s < 0) out.fitted.gpu.step_overhead_s = -1;
  out.value[kEfficiency] = 1 / theta[kEfficiency];
  out.value[kStepOverhead] = theta[kStepOverhead];
  out.value[kCommAlpha] = theta[kCommAlpha];
  out.value[kCommBeta] = theta[kCommBeta] > 0 ? 1 / theta[kCommBeta] : 0;
  double sq = 0;
  for (size_t i = 0; i < n; ++i) {
    const double p = predict_run(runs[i].run, out.fitted).value().step_seconds;
    out.measured_s.push_back(measured[i]);
    out.predicted_s.push_back(p);
    sq += (p / measured[i] - 1) * (p / measured[i] - 1);
  }
  out.rms_relative_error = std::sqrt(sq / n);
  return out;
}
}  // namespace

Result<FitResult> fit_calibration(const std::vector<Metrics>& runs, const std::vector<std::string>& sources,
                                  const Hardware& hw, int skip, bool fit_cores) {
  int lo = 1 << 30, hi = 0;
  for (const auto& m : runs) {
    const int ranks = std::min(m.run.tp * m.run.pp * m.run.dp, std::max(1, hw.gpus_per_node));
    lo = std::min(lo, ranks), hi = std::max(hi, ranks);
  }
  if (!fit_cores) return fit_linear(runs, sources, hw, skip);
  if (hi <= lo) {
    auto f = fit_linear(runs, sources, hw, skip);
    if (f) f.value().notes.push_back("cores not fitted: every run has the same number of ranks per host");
    return f;
  }
  // The step is not linear in the cores: a search over them (log grid from 1 to the most
  // ranks, then a finer one around the best), the linear fit inside. Cores at or above the most ranks any run had
  // mean "not shared" (the same as 0).
  Result<FitResult> best = fit_linear(runs, sources, hw, skip);  // not shared
  if (!best) return best;
  double best_c = 0;
  auto consider = [&](double c) {
    Hardware h = hw;
    h.gpu.cores = c;
    auto f = fit_linear(runs, sources, h, skip);
    if (f && f.value().rms_relative_error < best.value().rms_relative_error - 1e-12) best = f, best_c = c;
  };
  // At least one core: below it, every rank would be slowed alike, which is the efficiency.
  for (int i = 0; i <= 40; ++i) consider(std::pow(double(hi), i / 40.0));
  if (best_c > 0) {
    const double c0 = best_c;
    for (int i = -10; i <= 10; ++i) consider(std::max(1.0, c0 * std::pow(1.04, i / 2.0)));
  }
  FitResult out = best.value();
  if (best_c > 0 && best_c < hi) {
    out.cores_determined = true;
    out.cores = best_c;
    out.fitted.gpu.cores = best_c;
  } else {
    out.fitted.gpu.cores = 0;
    out.notes.push_back("cores not fitted: the runs show no slowdown from ranks sharing the host");
  }
  return out;
}

// SHA-256 (FIPS 180-4), for the provenance of the files a calibration read.
std::string sha256_hex(const std::string& bytes) {
  static const uint32_t k[64] = {
      0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
      0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
      0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
      0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
      0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
      0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
      0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
      0xc67178f2};
  uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::string msg = bytes;
  const uint64_t bits = uint64_t(bytes.size()) * 8;
  msg += '\x80';
  while (msg.size() % 64 != 56) msg += '\0';
  for (int i = 7; i >= 0; --i) msg += char((bits >> (8 * i)) & 0xff);
  auto rotr = [](uint32_t x, int n) { return (x >> n) | (x << (32 - n)); };
  for (size_t off = 0; off < msg.size(); off += 64) {
    uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = uint32_t(uint8_t(msg[off + 4 * i])) << 24 | uint32_t(uint8_t(msg[off + 4 * i + 1])) << 16 |
             uint32_t(uint8_t(msg[off + 4 * i + 2])) << 8 | uint32_t(uint8_t(msg[off + 4 * i + 3]));
    for (int i = 16; i < 64; ++i) {
      const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; ++i) {
      const uint32_t t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
      const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      hh = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
  }
  std::string out;
  for (uint32_t v : h) out += text::format("%08x", v);
  return out;
}

}  // namespace scaleguard
