// The planner against published training runs (docs/validation.md). Every run in
// bench/planner/validation/runs.csv is predicted through the planner's API with the shipped
// catalog and must stay inside the error band the doc reports; and each GPU type's catalog
// `efficiency` must still be the fit to that type's calibration runs. A change to the time
// model or to an `efficiency` line that breaks the calibration fails here.
//
// `ctest -R unit.Validation -V` prints the doc's table (the PredictsEveryRun test).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "scaleguard/catalog.h"
#include "scaleguard/decide.h"
#include "scaleguard/model.h"
#include "scaleguard/plan.h"

namespace sg = scaleguard;

namespace {

// The bands docs/validation.md reports; error = predicted / reported - 1.
constexpr double kSteadyBand = 0.30;       // every steady-state (bench) run, fit or held out
constexpr double kHeldOutMedian = 0.10;    // median |error| of the held-out bench runs
constexpr double kHeldOutMape = 0.10;      // mean |error| of held-out bench throughput (issue 16)
constexpr double kHeldOutGpuHoursMape = 0.15;  // mean |GPU-hours error| of every held-out run
constexpr double kWholeLow = -0.25;        // whole (e2e) runs, failure overhead included
constexpr double kWholeHigh = 0.55;
constexpr double kBeyondLow = -0.75;       // runs outside what the model represents
constexpr double kBeyondHigh = 2.00;
constexpr double kFitTolerance = 0.05;     // catalog efficiency vs the refit, relative

struct Run {
  std::string id, gpu_type, model, kind, set, source;
  int seq = 0, batch = 0, gpus = 0, gpus_per_node = 0;
  double network_gbps = 0;
  std::optional<int> tp, pp, dp, zero, micro;
  std::optional<sg::Recompute> recompute;
  bool dp_overlap = true;  // false: the gradient reduction starts after the backward pass
  double tokens = 0;
  double reported = 0;  // tokens per second per GPU
};

std::optional<int> opt_int(const std::string& field) {
  if (field == "-") return std::nullopt;
  return std::stoi(field);
}

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::stringstream in(line);
  for (std::string field; std::getline(in, field, sep);) out.push_back(field);
  return out;
}

const std::vector<Run>& runs() {
  static const std::vector<Run> all = [] {
    std::vector<Run> out;
    std::ifstream in(SCALEGUARD_SOURCE_DIR "/bench/planner/validation/runs.csv");
    if (!in) ADD_FAILURE() << "cannot read bench/planner/validation/runs.csv";
    bool header = true;
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] == '#') continue;
      if (header) { header = false; continue; }
      const auto f = split(line, ';');
      if (f.size() != 21) {
        ADD_FAILURE() << "runs.csv: 21 fields expected: " << line;
        continue;
      }
      Run r;
      r.id = f[0], r.gpu_type = f[1], r.model = f[2];
      r.seq = std::stoi(f[3]);
      r.batch = f[4] == "-" ? 0 : std::stoi(f[4]);
      r.gpus = std::stoi(f[5]);
      r.gpus_per_node = std::stoi(f[6]);
      r.network_gbps = std::stod(f[7]);
      r.tp = opt_int(f[8]), r.pp = opt_int(f[9]), r.dp = opt_int(f[10]);
      r.zero = opt_int(f[11]), r.micro = opt_int(f[12]);
      if (f[13] != "-") {
        auto rc = sg::parse_recompute(f[13]);
        if (rc) r.recompute = *rc;
        else ADD_FAILURE() << r.id << ": " << rc.error().str();
      }
      if (f[14] != "yes" && f[14] != "no") ADD_FAILURE() << r.id << ": dp_overlap is yes or no";
      r.dp_overlap = f[14] == "yes";
      r.kind = f[15];
      r.tokens = f[16] == "-" ? 0 : std::stod(f[16]);
      r.set = f[17];
      r.reported = std::stod(f[18]);
      r.source = f[20];
      out.push_back(r);
    }
    return out;
  }();
  return all;
}

const sg::Catalog& catalog() {
  static const sg::Catalog cat = [] {
    auto c = sg::load_catalog(SCALEGUARD_SOURCE_DIR "/configs/catalog.ini");
    if (!c) ADD_FAILURE() << c.error().str();
    return c ? c.value() : sg::Catalog{};
  }();
  return cat;
}

struct Prediction {
  bool ok = false;
  std::string error;
  sg::Plan plan;
  double tok_s_gpu = 0;
};

// The run on its own cluster (GPUs per node, node network). A layout the source gives in
// full is evaluated as it is; otherwise the planner picks the rest at the run's GPU count.
// Steady-state figures exclude failures; whole runs are the run's tokens over the planner's
// GPU-hours, failure overhead included. `efficiency` > 0 replaces the catalog's (the refit).
Prediction predict(const Run& r, double efficiency = 0, int max_zero_stage = 3) {
  Prediction out;
  auto fail = [&out](const std::string& why) { out.error = why; return out; };
  auto spec = sg::parse_model_spec(r.model + ",seq=" + std::to_string(r.seq), catalog());
  if (!spec) return fail(spec.error().str());
  auto hw = sg::hardware_for(catalog(), r.gpu_type, "", r.gpus_per_node);
  if (!hw) return fail(hw.error().str());
  hw.value().network_gb_s = r.network_gbps / 8;
  if (r.kind != "e2e") hw.value().node_mtbf_hours = 1e9;
  if (efficiency > 0) hw.value().gpu.efficiency = efficiency;
  if (!r.dp_overlap) hw.value().assume.comm_overlap = 0;
  const sg::Workload work{*spec, r.tokens > 0 ? r.tokens : 1e9, r.batch};
  if (r.tp && r.pp && r.dp && r.zero && r.micro && r.recompute) {
    out.plan = sg::evaluate(work, *hw, sg::Layout{*r.tp, *r.pp, *r.dp, *r.zero, *r.micro, *r.recompute});
  } else {
    sg::Pins pins;
    pins.tp = r.tp, pins.pp = r.pp, pins.dp = r.dp, pins.zero = r.zero;
    pins.micro_batch = r.micro, pins.recompute = r.recompute;
    sg::Goals goals;
    goals.max_zero_stage = max_zero_stage;
    goals.compare_rungs = false;
    auto plan = sg::best_plan_at(work, *hw, r.gpus, pins, goals);
    if (!plan) return fail(plan.error().str());
    out.plan = *plan;
  }
  out.ok = out.plan.step_seconds > 0 && std::isfinite(out.plan.gpu_hours);
  if (!out.ok) return fail("no finite prediction");
  out.tok_s_gpu = r.kind == "e2e"
                      ? r.tokens / (out.plan.gpu_hours * 3600)
                      : out.plan.global_batch * double(r.seq) / (out.plan.step_seconds * out.plan.gpus);
  return out;
}

double error_of(const Run& r) {
  const Prediction p = predict(r);
  EXPECT_TRUE(p.ok) << r.id << ": " << p.error;
  return p.ok ? p.tok_s_gpu / r.reported - 1.0 : INFINITY;
}

TEST(Validation, RunsCoverEveryCalibratedGpuTypeWithFitAndHeldOutRuns) {
  ASSERT_GE(runs().size(), 30u);
  std::map<std::string, std::pair<int, int>> per_type;  // fit, held-out steady-state runs
  for (const auto& r : runs()) {
    EXPECT_GT(r.reported, 0) << r.id;
    EXPECT_NE(catalog().find_gpu(r.gpu_type), nullptr) << r.id << ": " << r.gpu_type;
    EXPECT_TRUE(r.kind == "bench" || r.kind == "e2e" || r.kind == "beyond") << r.id;
    EXPECT_TRUE(r.set == "fit" || r.set == "check") << r.id;
    if (r.kind != "bench") {
      EXPECT_EQ(r.set, "check") << r.id << ": only steady-state runs calibrate";
    } else {
      (r.set == "fit" ? per_type[r.gpu_type].first : per_type[r.gpu_type].second)++;
    }
    if (r.kind == "e2e") {
      EXPECT_GT(r.tokens, 0) << r.id;
    }
  }
  for (const auto& [type, counts] : per_type) {
    EXPECT_GE(counts.first, 1) << type;
    EXPECT_GE(counts.second, 1) << type;
  }
}

// The table's layout column: "tp x pp x dp, ZeRO, micro-batch, recompute".
static std::string layout_cell(const sg::Layout& l) {
  char cell[96];
  std::snprintf(cell, sizeof cell, "%dx%dx%d, z%d, %d, %s", l.tp, l.pp, l.dp, l.zero, l.micro_batch,
                sg::to_string(l.recompute));
  return cell;
}

// Prints the table of docs/validation.md (run, layout, memory, reported, predicted, error).
TEST(Validation, PredictsEveryRun) {
  std::printf("| run | GPU | GPUs | layout tp x pp x dp, ZeRO, micro-batch, recompute | fits (GiB/GPU) "
              "| kind | set | reported tok/s/GPU | predicted | error | planner MFU |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& r : runs()) {
    const Prediction p = predict(r);
    EXPECT_TRUE(p.ok) << r.id << ": " << p.error;
    if (!p.ok) continue;
    std::printf("| %s | %s | %d | %s | %s (%.0f) | %s | %s | %.1f | %.1f | %+.0f%% | %.0f%% |\n",
                r.id.c_str(), r.gpu_type.c_str(), r.gpus, layout_cell(p.plan.layout).c_str(),
                p.plan.fits ? "yes" : "no", p.plan.memory.total() / (1 << 30),
                r.kind.c_str(), r.set.c_str(), r.reported, p.tok_s_gpu, 100 * (p.tok_s_gpu / r.reported - 1),
                100 * p.plan.mfu);
  }
}

// docs/validation.md's results table is this planner's output: the layout it picks for each
// run and its prediction (within 0.5%, the table's rounding). Without this, a change to the
// search (issue 27's ZeRO-3 moved Llama 2 70B from tp=8 to tp=2, +12% to +34%) left the
// page reporting figures the code no longer gives.
TEST(Validation, DocResultsTableIsTheCurrentOutput) {
  std::ifstream in(SCALEGUARD_SOURCE_DIR "/docs/validation.md");
  ASSERT_TRUE(in) << "cannot read docs/validation.md";
  std::map<std::string, std::vector<std::string>> doc_rows;  // run id -> cells
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| ", 0) != 0) continue;
    auto cells = split(line, '|');
    for (auto& c : cells) {
      c.erase(0, c.find_first_not_of(' '));
      c.erase(c.find_last_not_of(' ') + 1);
    }
    if (cells.size() >= 12) doc_rows.emplace(cells[1], cells);
  }
  const char* regenerate = "; regenerate the table with ctest -R unit.Validation.PredictsEveryRun -V";
  for (const auto& r : runs()) {
    const auto row = doc_rows.find(r.id);
    if (row == doc_rows.end()) {
      ADD_FAILURE() << r.id << ": not in docs/validation.md's results table" << regenerate;
      continue;
    }
    const Prediction p = predict(r);
    if (!p.ok) continue;  // PredictsEveryRun reports it
    EXPECT_EQ(row->second[4], layout_cell(p.plan.layout)) << r.id << regenerate;
    const double doc_predicted = std::stod(row->second[9]);
    EXPECT_NEAR(doc_predicted / p.tok_s_gpu, 1.0, 0.005)
        << r.id << ": doc " << doc_predicted << ", planner " << p.tok_s_gpu << regenerate;
  }
}

// Issue 27: the ZeRO-3 memory model (gathered blocks and root, prefetch, fragmentation) against
// runs that happened: every published FSDP/ZeRO-3 layout in runs.csv ran, so the model must
// not put it more than 2% over the device (well inside its own 10% fragmentation slack). Two
// activation-bound runs without recompute land just over (mosaic-1b-h100, micro-batch 20,
// 81.1 of 80 GiB, over before issue 27 as well; mosaic-3b-a100-40, 40.5 of 40 GiB): the
// count pins that no other layout crosses.
TEST(Validation, EveryPublishedZeroThreeLayoutFitsWithinTwoPercent) {
  int n = 0, fit = 0;
  for (const auto& r : runs()) {
    if (!r.zero || *r.zero != 3) continue;
    const Prediction p = predict(r);
    ASSERT_TRUE(p.ok) << r.id << ": " << p.error;
    EXPECT_GT(p.plan.memory.gathered, 0) << r.id;
    const double used = p.plan.memory.total() / (p.plan.gpu_memory_gib * (1 << 30));
    EXPECT_LE(used, 1.02) << r.id << ": " << p.plan.memory.total() / (1 << 30) << " GiB";
    ++n;
    if (p.plan.fits) ++fit;
    else std::printf("published ZeRO-3 layout predicted %.1f%% over the device: %s\n", 100 * (used - 1), r.id.c_str());
  }
  EXPECT_GE(n, 18);
  EXPECT_GE(fit, n - 2);
}

TEST(Validation, SteadyStateRunsStayWithinTheReportedBand) {
  for (const auto& r : runs()) {
    if (r.kind == "bench") {
      EXPECT_LE(std::fabs(error_of(r)), kSteadyBand) << r.id;
    }
  }
}

TEST(Validation, HeldOutSteadyStateMedianErrorIsTheReportedOne) {
  std::vector<double> abs_err;
  for (const auto& r : runs())
    if (r.kind == "bench" && r.set == "check") abs_err.push_back(std::fabs(error_of(r)));
  ASSERT_GE(abs_err.size(), 5u);
  std::sort(abs_err.begin(), abs_err.end());
  const size_t n = abs_err.size();
  const double median = n % 2 ? abs_err[n / 2] : (abs_err[n / 2 - 1] + abs_err[n / 2]) / 2;
  EXPECT_LE(median, kHeldOutMedian);
}

// Issue 16: on published runs the planner was not fitted on, throughput MAPE <= 10% (the
// held-out steady-state runs) and GPU-hours MAPE <= 15% (every held-out run: a steady-state
// run's GPU-hours for a token count are tokens / throughput; a whole run's are as published).
TEST(Validation, HeldOutMeanAbsolutePercentageErrors) {
  double tput = 0, hours = 0, whole = 0;
  int n_tput = 0, n_hours = 0, n_whole = 0;
  for (const auto& r : runs()) {
    if (r.set != "check" || r.kind == "beyond") continue;
    const double err = error_of(r);
    const double hours_err = std::fabs(1 / (1 + err) - 1);  // GPU-hours scale as 1/throughput
    hours += hours_err, ++n_hours;
    if (r.kind == "bench") tput += std::fabs(err), ++n_tput;
    if (r.kind == "e2e") whole += hours_err, ++n_whole;
  }
  ASSERT_GE(n_tput, 10);
  ASSERT_GE(n_whole, 5);
  std::printf("held-out throughput MAPE %.1f%% (%d runs), GPU-hours MAPE %.1f%% (%d runs; whole runs alone "
              "%.1f%%, %d)\n",
              100 * tput / n_tput, n_tput, 100 * hours / n_hours, n_hours, 100 * whole / n_whole, n_whole);
  EXPECT_LE(tput / n_tput, kHeldOutMape);
  EXPECT_LE(hours / n_hours, kHeldOutGpuHoursMape);
}

// Issue 29: MAPE per group, fitted and unfitted rows apart. Steady-state throughput must be
// within 10% in both the fit and the held-out group (and the pinned Megatron layouts within
// 5%); whole runs are reported (their GPU-hours bound is the 15% of the test above: issue 29
// item 2, GPU-hours of full runs within 10%, is not done); `beyond` rows are reported only.
// ctest runs this as `validation.mape` (label validation).
TEST(Validation, MapePerGroup) {
  struct Group {
    explicit Group(const char* label) : name(label) {}
    const char* name;
    double sum = 0;
    int n = 0;
    double worst = 0;
    std::string worst_id;
  };
  Group fit{"steady-state throughput, fit rows"}, held{"steady-state throughput, held-out rows"},
      megatron{"pinned Megatron-LM layouts (narayanan2021, korthikanti2022)"},
      whole{"whole runs, GPU-hours (held out)"}, beyond{"beyond the model (reported only)"};
  for (const auto& r : runs()) {
    const double err = error_of(r);
    const bool pinned_megatron = r.kind == "bench" && (r.id.rfind("meg21-", 0) == 0 || r.id.rfind("korth-", 0) == 0);
    std::vector<Group*> in;
    if (r.kind == "bench") in.push_back(r.set == "fit" ? &fit : &held);
    if (pinned_megatron) in.push_back(&megatron);
    if (r.kind == "beyond") in.push_back(&beyond);
    const double e = r.kind == "e2e" ? std::fabs(1 / (1 + err) - 1) : std::fabs(err);
    if (r.kind == "e2e") in.push_back(&whole);
    for (Group* g : in) {
      g->sum += e, ++g->n;
      if (e > g->worst) g->worst = e, g->worst_id = r.id;
    }
  }
  std::printf("| group | rows | MAPE | worst |\n|---|---|---|---|\n");
  for (const Group* g : {&fit, &held, &megatron, &whole, &beyond})
    std::printf("| %s | %d | %.1f%% | %.0f%% (%s) |\n", g->name, g->n, g->n ? 100 * g->sum / g->n : 0.0,
                100 * g->worst, g->worst_id.c_str());
  ASSERT_GE(fit.n, 5);
  ASSERT_GE(held.n, 5);
  EXPECT_LE(fit.sum / fit.n, 0.10) << fit.name;
  EXPECT_LE(held.sum / held.n, 0.10) << held.name;
  EXPECT_LE(megatron.sum / megatron.n, 0.05) << megatron.name;
}

TEST(Validation, WholeRunsStayWithinTheReportedBand) {
  for (const auto& r : runs()) {
    if (r.kind != "e2e") continue;
    const double err = error_of(r);
    EXPECT_GE(err, kWholeLow) << r.id;
    EXPECT_LE(err, kWholeHigh) << r.id;
  }
}

TEST(Validation, RunsBeyondTheModelStayWithinTheReportedBand) {
  for (const auto& r : runs()) {
    if (r.kind != "beyond") continue;
    const double err = error_of(r);
    EXPECT_GE(err, kBeyondLow) << r.id;
    EXPECT_LE(err, kBeyondHigh) << r.id;
  }
}

// Refits each GPU type's efficiency on its fit runs (e <- e * geomean(reported/predicted);
// communication and bubbles do not scale with e, so iterate to the fixed point) and checks
// that the catalog holds that value.
TEST(Validation, CatalogEfficiencyIsTheFitToTheCalibrationRuns) {
  std::map<std::string, double> fitted;
  for (const auto& r : runs())
    if (r.set == "fit") fitted[r.gpu_type] = catalog().find_gpu(r.gpu_type)->efficiency;
  ASSERT_FALSE(fitted.empty());
  for (int iter = 0; iter < 8; ++iter) {
    for (auto& [type, eff] : fitted) {
      double sum = 0;
      int n = 0;
      for (const auto& r : runs()) {
        if (r.set != "fit" || r.gpu_type != type) continue;
        const Prediction p = predict(r, eff);
        ASSERT_TRUE(p.ok) << r.id << ": " << p.error;
        sum += std::log(r.reported / p.tok_s_gpu), ++n;
      }
      eff *= std::exp(sum / n);
    }
  }
  for (const auto& [type, eff] : fitted) {
    std::printf("fitted efficiency %s = %.3f (catalog %.3f)\n", type.c_str(), eff,
                catalog().find_gpu(type)->efficiency);
    EXPECT_NEAR(catalog().find_gpu(type)->efficiency / eff, 1.0, kFitTolerance)
        << type << ": set `efficiency = " << eff << "` in configs/catalog.ini and rerun";
  }
}

}  // namespace

// Issue 37, item 7: the planner's own choice against the layouts the authors chose. For every
// published multi-GPU run of the sources the issue names (Megatron-LM 2019 and 2021,
// Korthikanti et al. 2022, Llama 3 405B) whose GPU count, batch and tp x pp x dp are stated,
// the free search (best_plan_at at the run's GPU count and batch, nothing pinned, the default
// goals) is put beside the published layout (predict(): evaluated as published, the
// unpublished micro-batch chosen by the planner). Published MFU = the reported throughput in
// the planner's model-FLOP count (6P + 12slh per token, no recompute), so an MFU error is the
// throughput error of that layout. Fails when the free choice is predicted slower than the
// published layout, or when either is off the published MFU by more than 10%, except for the
// rows below, which docs/validation.md ("Free choice against published layouts") explains;
// they keep a band of their own so that they cannot drift unnoticed.
struct ChoiceRow {
  const Run* run = nullptr;
  Prediction published, free, framework;
  std::string framework_limits;
  double published_mfu = 0;
  double published_err() const { return published.tok_s_gpu / run->reported - 1; }
  double free_err() const { return free.tok_s_gpu / run->reported - 1; }
};

constexpr double kChoiceMfuBand = 0.10;
// Rows that cannot meet 10% (nothing is fitted to them; docs/validation.md, "Free choice
// against published layouts", says why). Each keeps a band of its own, so it cannot drift
// unnoticed; a band left at 0, 0 means the 10% check applies to that layout.
struct KnownMiss {
  const char* id;
  double pub_low, pub_high;    // the published layout's MFU error
  double free_low, free_high;  // the free choice's MFU error
  const char* why;
};
constexpr const char* kNotRun = "the free choice is a layout the authors did not run; its error is the planner's predicted gain over theirs";
const KnownMiss kKnownMisses[] = {
    {"meg21-1.7b", 0, 0, 0.25, 0.40, kNotRun},
    {"meg21-18.4b", 0, 0, 0.40, 0.60, kNotRun},
    {"meg21-39.1b", 0, 0, 0.10, 0.25, kNotRun},
    {"meg21-145.6b", 0, 0, 0.30, 0.50, kNotRun},
    {"meg21-1t", 0, 0, 0.25, 0.45, kNotRun},
    {"llama3-405b-8k", -0.65, -0.45, -0.40, -0.20, "interleaved 1F1B and context parallelism are not modelled"},
    {"llama3-405b-16k", -0.70, -0.55, -0.55, -0.35, "interleaved 1F1B and context parallelism are not modelled"},
    {"meg19-8.3b", 0.05, 0.15, 0.60, 0.80, "published +11% (V100, Megatron 2019); the free choice pipelines, which Megatron 2019 could not"},
};
const KnownMiss* known_miss(const std::string& id) {
  for (const auto& k : kKnownMisses)
    if (id == k.id) return &k;
  return nullptr;
}

std::vector<ChoiceRow> choice_rows() {
  std::vector<ChoiceRow> out;
  for (const auto& r : runs()) {
    const bool named_source = r.source == "megatron2019" || r.source == "narayanan2021" ||
                              r.source == "korthikanti2022" || r.source == "llama3";
    if (!named_source || r.gpus < 2 || r.batch <= 0 || !r.tp || !r.pp || !r.dp) continue;
    ChoiceRow row;
    row.run = &r;
    row.published = predict(r);
    Run free_run = r;
    free_run.tp = free_run.pp = free_run.dp = free_run.zero = free_run.micro = std::nullopt;
    free_run.recompute = std::nullopt;
    row.free = predict(free_run);
    // The same free search limited to what the run's software could execute.
    Run fw = free_run;
    int max_zero = 3;
    if (r.source == "megatron2019") {
      fw.pp = 1, fw.recompute = sg::Recompute::full, max_zero = 0;
      row.framework_limits = "pp 1, full recompute, no ZeRO";
    } else if (r.source == "narayanan2021") {
      fw.recompute = sg::Recompute::full, max_zero = 0;
      row.framework_limits = "full recompute, no ZeRO";
    } else if (r.source == "korthikanti2022") {
      max_zero = 0;
      row.framework_limits = "no ZeRO";
    } else {
      max_zero = 2;
      row.framework_limits = "ZeRO <= 2";
    }
    row.framework = predict(fw, 0, max_zero);
    if (row.published.ok) row.published_mfu = row.published.plan.mfu * r.reported / row.published.tok_s_gpu;
    out.push_back(row);
  }
  return out;
}

TEST(Validation, FreeChoiceAgainstPublishedLayouts) {
  const auto rows = choice_rows();
  ASSERT_GE(rows.size(), 10u);
  std::printf("| run | GPUs | batch | published MFU | published layout | its tok/s/GPU | its MFU (error) "
              "| free choice | its tok/s/GPU | its MFU (error) | free / published |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& row : rows) {
    const auto& r = *row.run;
    ASSERT_TRUE(row.published.ok) << r.id << ": " << row.published.error;
    ASSERT_TRUE(row.free.ok) << r.id << ": " << row.free.error;
    std::printf("| %s | %d | %d | %.1f%% | %s | %.1f | %.1f%% (%+.1f%%) | %s | %.1f | %.1f%% (%+.1f%%) | %.3f |\n",
                r.id.c_str(), r.gpus, r.batch, 100 * row.published_mfu, layout_cell(row.published.plan.layout).c_str(),
                row.published.tok_s_gpu, 100 * row.published.plan.mfu, 100 * row.published_err(),
                layout_cell(row.free.plan.layout).c_str(), row.free.tok_s_gpu, 100 * row.free.plan.mfu,
                100 * row.free_err(), row.free.tok_s_gpu / row.published.tok_s_gpu);
    std::printf("|   (%s) | | | | | | | %s | %.1f | %.1f%% (%+.1f%%) | %.3f |\n", row.framework_limits.c_str(),
                layout_cell(row.framework.plan.layout).c_str(), row.framework.tok_s_gpu, 100 * row.framework.plan.mfu,
                100 * (row.framework.tok_s_gpu / r.reported - 1), row.framework.tok_s_gpu / row.published.tok_s_gpu);
    EXPECT_EQ(row.free.plan.global_batch, r.batch) << r.id << ": the free choice must keep the run's batch";
    EXPECT_GE(row.free.tok_s_gpu, row.published.tok_s_gpu * (1 - 1e-9))
        << r.id << ": the free choice " << layout_cell(row.free.plan.layout) << " is predicted slower than the published "
        << layout_cell(row.published.plan.layout);
    EXPECT_GE(row.framework.tok_s_gpu, row.published.tok_s_gpu * (1 - 1e-9))
        << r.id << ": the free choice within " << row.framework_limits << " is predicted slower than the published layout";
    const KnownMiss* k = known_miss(r.id);
    auto check = [&](const char* which, double err, double low, double high) {
      if (low == 0 && high == 0) {
        EXPECT_LE(std::fabs(err), kChoiceMfuBand) << r.id << ": " << which << "'s MFU error";
      } else {
        EXPECT_GE(err, low) << r.id << ": " << which << " (" << k->why << ")";
        EXPECT_LE(err, high) << r.id << ": " << which << " (" << k->why << ")";
      }
    };
    check("the published layout", row.published_err(), k ? k->pub_low : 0, k ? k->pub_high : 0);
    check("the free choice", row.free_err(), k ? k->free_low : 0, k ? k->free_high : 0);
  }
}

// docs/validation.md's "Free choice against published layouts" table is the current output.
TEST(Validation, DocChoiceTableIsTheCurrentOutput) {
  std::ifstream in(SCALEGUARD_SOURCE_DIR "/docs/validation.md");
  ASSERT_TRUE(in) << "cannot read docs/validation.md";
  std::map<std::string, std::vector<std::string>> doc_rows;  // run id -> cells of the choice table
  bool in_section = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("## ", 0) == 0 || line.rfind("### ", 0) == 0)
      in_section = line.find("Free choice against published layouts") != std::string::npos;
    if (!in_section || line.rfind("| ", 0) != 0) continue;
    auto cells = split(line, '|');
    for (auto& c : cells) {
      c.erase(0, c.find_first_not_of(' '));
      c.erase(c.find_last_not_of(' ') + 1);
    }
    if (cells.size() >= 12) doc_rows.emplace(cells[1], cells);
  }
  const char* regenerate = "; regenerate it with ctest -R validation.choices -V";
  for (const auto& row : choice_rows()) {
    const auto doc = doc_rows.find(row.run->id);
    if (doc == doc_rows.end()) {
      ADD_FAILURE() << row.run->id << ": not in docs/validation.md's free-choice table" << regenerate;
      continue;
    }
    if (!row.published.ok || !row.free.ok) continue;
    EXPECT_EQ(doc->second[5], layout_cell(row.published.plan.layout)) << row.run->id << regenerate;
    EXPECT_EQ(doc->second[8], layout_cell(row.free.plan.layout)) << row.run->id << regenerate;
    EXPECT_NEAR(std::stod(doc->second[9]) / row.free.tok_s_gpu, 1.0, 0.005) << row.run->id << regenerate;
    EXPECT_NEAR(std::stod(doc->second[6]) / row.published.tok_s_gpu, 1.0, 0.005) << row.run->id << regenerate;
  }
}
