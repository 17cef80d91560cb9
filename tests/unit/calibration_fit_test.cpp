// `scaleguard calibrate --write`: the least-squares fit on synthetic metrics (runs the planner
// itself predicted at known parameters: the fit must recover them), the catalog override
// layered on the catalog (by load_catalog and by the policy), and override files it refuses.
// No timing here: the prediction-vs-measurement round trip is tests/cli/calibrate_write.bats.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "scaleguard/calibrate.h"
#include "test_support.h"

using namespace scaleguard;
using scaleguard::test::TempFile;

namespace {

// A host of 20 GFLOP/s and 5 GB/s per rank, predicted at efficiency 1 with no fitted terms.
Hardware bare_host() {
  HostHardware h;
  h.peak_flops = 20e9;
  h.link_gb_s = 5;
  h.efficiency = 1;
  return host_hardware(h, test::real_catalog().assumptions);
}

RunInfo run(int tp, int pp, int dp, int global_batch, int micro_batch) {
  RunInfo r;
  r.model = "gpt";
  r.n_layer = 4, r.n_head = 4, r.n_embd = 128, r.seq_len = 64, r.vocab_size = 256;
  r.global_batch = global_batch, r.micro_batch = micro_batch;
  r.tp = tp, r.pp = pp, r.dp = dp, r.world = tp * pp * dp, r.threads = 1;
  return r;
}

// A metrics file whose steps all take what `truth` predicts for the run.
Metrics synthetic(const RunInfo& r, const Hardware& truth, int steps = 6) {
  Metrics m;
  m.run = r;
  const double s = predict_run(r, truth).value().step_seconds;
  for (int i = 0; i < steps; ++i) m.steps.push_back(StepSample{i + 1, (i == 0 ? 3 : 1) * s * 1e3, 0, 0});
  return m;
}

Hardware truth_host() {
  Hardware t = bare_host();
  t.gpu.efficiency = 0.3;
  t.gpu.step_overhead_s = 0.02;
  t.gpu.comm_alpha_s = 5e-4;
  t.gpu.comm_beta_gb_s = 0.8;
  return t;
}

std::vector<Metrics> all_layouts(const Hardware& truth) {
  return {synthetic(run(1, 1, 1, 16, 16), truth), synthetic(run(1, 1, 1, 32, 16), truth),
          synthetic(run(1, 1, 2, 16, 8), truth),  synthetic(run(1, 2, 1, 16, 4), truth),
          synthetic(run(2, 1, 1, 16, 16), truth)};
}

void expect_near_rel(double got, double want, double rel, const char* what) {
  EXPECT_NEAR(got, want, std::fabs(want) * rel) << what;
}

const char* kOverride =
    "# a test override\n"
    "[calibration]\nwritten = 2026-12-03T22:40:00Z\nscaleguard_version = 0.1.0\ncommand = scaleguard calibrate\n"
    "[source 1]\nfile = run.jsonl\nsha256 = ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\n"
    "layout = tp=1 pp=1 dp=2\nsteps = 9\nmeasured_step_s = 0.1\nfitted_step_s = 0.1\n"
    "[gpu A100-80GB]\nefficiency = 0.4\nstep_overhead_s = 0.1\ncomm_alpha_s = 0.00002\ncomm_beta_gb_s = 80\n"
    "fitted = efficiency,step_overhead_s,comm_alpha_s,comm_beta_gb_s\nsources = 1\nrms_error = 0.02\n"
    "[host devvm]\npeak_gflops = 20\nlink_gb_s = 5\nranks_per_node = 2\nmemory_gib = 8\nefficiency = 2.5\n"
    "step_overhead_s = 0.03\n";

Error override_error(const std::string& text) {
  TempFile f(text, "cal.ini");
  Catalog cat = test::real_catalog();
  auto ok = apply_catalog_override(cat, f.path());
  EXPECT_FALSE(ok.ok()) << text;
  // A refused override leaves the catalog as it was.
  EXPECT_TRUE(cat.override_path.empty());
  EXPECT_EQ(cat.gpus.size(), test::real_catalog().gpus.size());
  EXPECT_DOUBLE_EQ(cat.find_gpu("A100-80GB")->efficiency, test::real_catalog().find_gpu("A100-80GB")->efficiency);
  return ok.ok() ? Error{} : ok.error();
}

}  // namespace

TEST(CalibrationFit, RecoversKnownParametersFromEveryLayout) {
  const Hardware truth = truth_host();
  const auto runs = all_layouts(truth);
  auto fit = fit_calibration(runs, {}, bare_host(), 1);
  ASSERT_TRUE(fit.ok()) << fit.error().str();
  const FitResult& f = fit.value();
  for (int k = 0; k < kFitTerms; ++k) EXPECT_TRUE(f.determined[k]) << fit_term_key(k);
  expect_near_rel(f.value[kEfficiency], 0.3, 1e-4, "efficiency");
  expect_near_rel(f.value[kStepOverhead], 0.02, 1e-3, "step_overhead_s");
  expect_near_rel(f.value[kCommAlpha], 5e-4, 1e-3, "comm_alpha_s");
  expect_near_rel(f.value[kCommBeta], 0.8, 1e-3, "comm_beta_gb_s");
  EXPECT_LT(f.rms_relative_error, 1e-6);
  EXPECT_TRUE(f.notes.empty());
  // The fitted hardware predicts every run (the same function plan and decide() use).
  for (size_t i = 0; i < runs.size(); ++i) expect_near_rel(f.predicted_s[i], f.measured_s[i], 1e-6, "run");
}

TEST(CalibrationFit, RecoversAGpuTypesTermsOverTheCatalogsModel) {
  // A catalog GPU (memory-bound work modelled, hbm_gb_s > 0): the fit moves only what it fits.
  auto hw = hardware_for(test::real_catalog(), "A100-80GB", "", 0);
  ASSERT_TRUE(hw.ok());
  Hardware truth = hw.value();
  truth.gpu.efficiency = 0.45, truth.gpu.step_overhead_s = 0.004, truth.gpu.comm_alpha_s = 2e-5;
  truth.gpu.comm_beta_gb_s = 90;
  std::vector<Metrics> runs;
  for (auto [tp, pp, dp, b, mb] : {std::array{1, 1, 1, 8, 8}, std::array{1, 1, 1, 32, 8}, std::array{1, 1, 4, 32, 8},
                                   std::array{2, 1, 1, 8, 8}, std::array{1, 2, 2, 32, 2}}) {
    RunInfo r = run(tp, pp, dp, b, mb);
    r.n_embd = 1024, r.n_head = 16, r.n_layer = 8, r.seq_len = 1024, r.vocab_size = 50304;
    r.precision = Precision::bf16;
    runs.push_back(synthetic(r, truth));
  }
  auto fit = fit_calibration(runs, {}, hw.value(), 1);
  ASSERT_TRUE(fit.ok()) << fit.error().str();
  expect_near_rel(fit.value().value[kEfficiency], 0.45, 1e-3, "efficiency");
  expect_near_rel(fit.value().value[kStepOverhead], 0.004, 1e-2, "step_overhead_s");
  expect_near_rel(fit.value().value[kCommAlpha], 2e-5, 1e-2, "comm_alpha_s");
  expect_near_rel(fit.value().value[kCommBeta], 90, 1e-2, "comm_beta_gb_s");
}

TEST(CalibrationFit, NoMultiRankRunKeepsTheCatalogsCommunicationAndSaysSo) {
  const Hardware truth = truth_host();
  const std::vector<Metrics> runs = {synthetic(run(1, 1, 1, 16, 16), truth), synthetic(run(1, 1, 1, 32, 16), truth)};
  auto fit = fit_calibration(runs, {}, bare_host(), 1);
  ASSERT_TRUE(fit.ok()) << fit.error().str();
  const FitResult& f = fit.value();
  EXPECT_TRUE(f.determined[kEfficiency]);
  EXPECT_TRUE(f.determined[kStepOverhead]);
  EXPECT_FALSE(f.determined[kCommAlpha]);
  EXPECT_FALSE(f.determined[kCommBeta]);
  expect_near_rel(f.value[kEfficiency], 0.3, 1e-4, "efficiency");
  expect_near_rel(f.value[kStepOverhead], 0.02, 1e-3, "step_overhead_s");
  ASSERT_EQ(f.notes.size(), 1u);
  EXPECT_NE(f.notes[0].find("no multi-rank run"), std::string::npos) << f.notes[0];
  // The kept terms stay the catalog's: no latency set, the link's bandwidth.
  EXPECT_LT(f.fitted.gpu.comm_alpha_s, 0);
  EXPECT_EQ(f.fitted.gpu.comm_beta_gb_s, 0);
}

TEST(CalibrationFit, OneAmountOfWorkCannotSeparateOverheadFromEfficiency) {
  auto fit = fit_calibration({synthetic(run(1, 1, 1, 16, 16), truth_host())}, {}, bare_host(), 1);
  ASSERT_TRUE(fit.ok()) << fit.error().str();
  EXPECT_TRUE(fit.value().determined[kEfficiency]);
  EXPECT_FALSE(fit.value().determined[kStepOverhead]);
  bool said = false;
  for (const auto& n : fit.value().notes) said |= n.find("step_overhead_s kept from the catalog") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(CalibrationFit, SameSizedTransfersCannotSeparateLatencyFromBandwidth) {
  const Hardware truth = truth_host();
  // ddp runs of one model: one all-reduce of the same bytes each step.
  const std::vector<Metrics> runs = {synthetic(run(1, 1, 1, 16, 16), truth), synthetic(run(1, 1, 1, 32, 16), truth),
                                     synthetic(run(1, 1, 2, 16, 8), truth), synthetic(run(1, 1, 2, 32, 16), truth)};
  auto fit = fit_calibration(runs, {}, bare_host(), 1);
  ASSERT_TRUE(fit.ok()) << fit.error().str();
  EXPECT_NE(fit.value().determined[kCommAlpha], fit.value().determined[kCommBeta]);
  bool said = false;
  for (const auto& n : fit.value().notes) said |= n.find("do not tell latency and bandwidth apart") != std::string::npos;
  EXPECT_TRUE(said);
  EXPECT_LT(fit.value().rms_relative_error, 1e-6);  // one of them absorbs the communication exactly
}

TEST(CalibrationFit, RefusesRunsWithoutStepsAndNoRuns) {
  EXPECT_FALSE(fit_calibration({}, {}, bare_host(), 1).ok());
  Metrics m = synthetic(run(1, 1, 1, 16, 16), truth_host(), 1);
  auto fit = fit_calibration({m}, {"one-step.jsonl"}, bare_host(), 1);
  ASSERT_FALSE(fit.ok());
  EXPECT_EQ(fit.error().file, "one-step.jsonl");
  EXPECT_EQ(fit.error().field, "skip");
}

TEST(CalibrationFit, Sha256) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex(std::string(1000, 'a')), "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

TEST(CatalogOverride, LayersGpuTermsAndAddsAHost) {
  TempFile f(kOverride, "cal.ini");
  auto cat = load_catalog(test::catalog_file(), f.path());
  ASSERT_TRUE(cat.ok()) << cat.error().str();
  const Catalog& c = cat.value();
  EXPECT_EQ(c.override_path, f.path());
  const GpuType* a100 = c.find_gpu("a100_80gb");  // aliases still work
  ASSERT_NE(a100, nullptr);
  EXPECT_DOUBLE_EQ(a100->efficiency, 0.4);
  EXPECT_DOUBLE_EQ(a100->step_overhead_s, 0.1);
  EXPECT_DOUBLE_EQ(a100->comm_alpha_s, 2e-5);
  EXPECT_DOUBLE_EQ(a100->comm_beta_gb_s, 80);
  EXPECT_DOUBLE_EQ(a100->hbm_gb_s, test::real_catalog().find_gpu("A100-80GB")->hbm_gb_s);  // the rest untouched
  EXPECT_EQ(a100->calibrated_by, f.path());
  const GpuType* h100 = c.find_gpu("H100-80GB");
  ASSERT_NE(h100, nullptr);
  EXPECT_TRUE(h100->calibrated_by.empty());
  EXPECT_LT(h100->step_overhead_s, 0);

  // The planner uses it: the fitted overhead is in every step.
  auto before = hardware_for(test::real_catalog(), "A100-80GB", "", 0);
  auto after = hardware_for(c, "A100-80GB", "", 0);
  ASSERT_TRUE(before.ok() && after.ok());
  ModelSpec m = parse_model_spec("350M", c).value();
  const Workload w{m, 1e9, 256};
  const Layout l{1, 1, 8, 0, 4, Recompute::none};
  const Plan p0 = evaluate(w, before.value(), l), p1 = evaluate(w, after.value(), l);
  EXPECT_NEAR(p1.fixed_seconds - p0.fixed_seconds, 0.1 - test::real_catalog().assumptions.step_overhead_s, 1e-12);
  EXPECT_GT(p1.compute_seconds, p0.compute_seconds);  // efficiency 0.4 < the catalog's

  // The host is a GPU type and an instance of its name.
  auto host = hardware_for(c, "devvm", "", 0);
  ASSERT_TRUE(host.ok()) << host.error().str();
  EXPECT_EQ(host.value().gpus_per_node, 2);
  EXPECT_DOUBLE_EQ(host.value().gpu.tflops_fp32, 0.02);
  EXPECT_DOUBLE_EQ(host.value().gpu.tflops_bf16, 0.02);
  EXPECT_DOUBLE_EQ(host.value().gpu.efficiency, 2.5);
  EXPECT_DOUBLE_EQ(host.value().gpu.nvlink_gb_s, 10);
  EXPECT_DOUBLE_EQ(host.value().gpu.memory_gib, 8);
  EXPECT_DOUBLE_EQ(host.value().gpu.step_overhead_s, 0.03);
  EXPECT_LT(host.value().gpu.comm_alpha_s, 0);  // not fitted: the catalog's latency
}

TEST(CatalogOverride, ThePolicyLayersItForDecide) {
  TempFile cal("[gpu A100-40GB]\nefficiency = 0.4\n", "cal.ini");
  TempFile pol("calibration = " + cal.path() + "\n" + test::policy_text(), "policy.ini");
  auto p = load_policy(pol.path());
  ASSERT_TRUE(p.ok()) << p.error().str();
  EXPECT_EQ(p.value()->catalog.override_path, cal.path());
  // Partitions resolve their GPU type after the override: decide() plans with it.
  bool seen = false;
  for (const auto& part : p.value()->partitions)  // p4d.24xlarge: A100-40GB, calibrated below
    if (part.gpu.name == "A100-40GB") {
      seen = true;
      EXPECT_DOUBLE_EQ(part.gpu.efficiency, 0.4);
    }
  EXPECT_TRUE(seen);
  EXPECT_NE(describe(*p.value()).find("calibration " + cal.path()), std::string::npos);
  // The caller's calibration argument wins over the policy's key; a bad one is the policy's error.
  TempFile bad("[gpu NoSuchGPU]\nefficiency = 0.5\n", "bad.ini");
  auto q = load_policy(pol.path(), "", bad.path());
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.error().file, bad.path());
  // Without the key, nothing is layered.
  TempFile plain(test::policy_text(), "policy.ini");
  auto r = load_policy(plain.path());
  ASSERT_TRUE(r.ok()) << r.error().str();
  EXPECT_TRUE(r.value()->catalog.override_path.empty());
}

TEST(CatalogOverride, RefusesBadFiles) {
  Error e = override_error("[gpu A100-80GBX]\nefficiency = 0.4\n");
  EXPECT_NE(e.message.find("not in the catalog"), std::string::npos) << e.str();
  EXPECT_NE(e.hint.find("A100-80GB"), std::string::npos) << e.str();
  e = override_error("[gpu A100-80GB]\nefficiency = 0.4\nbandwidth = 3\n");
  EXPECT_NE(e.str().find("bandwidth"), std::string::npos) << e.str();
  EXPECT_EQ(e.line, 3);
  e = override_error("[gpu A100-80GB]\nefficiency = -1\n");
  EXPECT_NE(e.str().find("efficiency"), std::string::npos) << e.str();
  e = override_error("[gpu A100-80GB]\nefficiency = 0.4\n[partition x]\ninstance = p4d.24xlarge\n");
  EXPECT_NE(e.message.find("unknown section kind 'partition'"), std::string::npos) << e.str();
  e = override_error("[host devvm]\npeak_gflops = 20\nlink_gb_s = 5\nranks_per_node = 2\n");
  EXPECT_NE(e.message.find("needs its efficiency"), std::string::npos) << e.str();
  e = override_error("[host devvm]\nlink_gb_s = 5\nranks_per_node = 2\nefficiency = 1\n");
  EXPECT_NE(e.str().find("peak_gflops"), std::string::npos) << e.str();
  e = override_error("[host p4d.24xlarge]\npeak_gflops = 20\nlink_gb_s = 5\nranks_per_node = 2\nefficiency = 1\n");
  EXPECT_NE(e.message.find("has the name of"), std::string::npos) << e.str();
  e = override_error("[source 1]\nfile = a.jsonl\nsha256 = xyz\n[gpu A100-80GB]\nefficiency = 0.4\n");
  EXPECT_NE(e.message.find("SHA-256"), std::string::npos) << e.str();
  e = override_error("[calibration]\nwritten = now\n");
  EXPECT_NE(e.message.find("changes nothing"), std::string::npos) << e.str();
  e = override_error("[gpu A100-80GB]\nefficiency = 0.4\nefficiency = 0.5\n");
  EXPECT_NE(e.message.find("twice"), std::string::npos) << e.str();
  auto missing = load_catalog(test::catalog_file(), "/nonexistent/cal.ini");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().file, "/nonexistent/cal.ini");
}

TEST(CatalogOverride, TheShippedSampleLoads) {
  auto cat = load_catalog(test::catalog_file(), test::source("configs/calibration-devvm.ini"));
  ASSERT_TRUE(cat.ok()) << cat.error().str();
  const GpuType* host = cat.value().find_gpu("devvm");
  ASSERT_NE(host, nullptr);
  EXPECT_GT(host->efficiency, 0);
  EXPECT_GE(host->step_overhead_s, 0);
  EXPECT_GE(host->comm_alpha_s, 0);
  EXPECT_GT(host->comm_beta_gb_s, 0);
  EXPECT_NE(cat.value().find_instance("devvm"), nullptr);
}
