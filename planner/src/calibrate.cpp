// The calibration loop: a run's metrics file against evaluate() of the same layout.
#include "scaleguard/calibrate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "text.h"

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
                            "tp", "pp", "dp", "zero"})
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

Result<Calibration> calibrate(const Metrics& m, const Hardware& hw, int skip) {
  Calibration c;
  c.run = m.run;
  const RunInfo& r = m.run;
  if (skip < 0 || static_cast<size_t>(skip) >= m.steps.size())
    return Error{text::format("%zu step line(s), none left after skipping %d as warm-up", m.steps.size(), skip), "", 0,
                 "skip", "run more steps or lower --skip"};
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
  c.layout = Layout{r.tp, r.pp, r.dp, r.zero, r.micro_batch, Recompute::none};
  const Workload w{spec, double(r.global_batch) * r.seq_len, r.global_batch};
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

}  // namespace scaleguard
