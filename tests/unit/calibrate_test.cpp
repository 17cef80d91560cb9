// The calibration loop: metrics files as scaleguard-run writes them (good, malformed, cut),
// and the comparison with the planner (feeding a prediction back in returns its efficiency).
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "scaleguard/calibrate.h"
#include "test_support.h"

using namespace scaleguard;

namespace {

const char* kRun =
    R"({"run":{"model":"gpt","n_layer":4,"n_head":4,"n_embd":128,"seq_len":64,"vocab_size":256,"global_batch":16,)"
    R"("micro_batch":2,"micro_batches":4,"tp":1,"pp":2,"dp":2,"zero":0,"world":4,"threads":1,"params":830000,)"
    R"("schedule":"1f1b","device":"cpu"}})";

std::string step(int n, double ms, double comm, double bubble) {
  return nlohmann::json{{"step", n}, {"loss", 5.0}, {"step_ms", ms}, {"comm_fraction", comm}, {"bubble_fraction", bubble}}
             .dump() +
         "\n";
}

Error error_of(const std::string& text) {
  auto m = parse_metrics(text, "m.jsonl");
  EXPECT_FALSE(m.ok()) << text;
  return m.ok() ? Error{} : m.error();
}

HostHardware host(double gflops, double link, double efficiency = 1) {
  HostHardware h;
  h.peak_flops = gflops * 1e9;
  h.link_gb_s = link;
  h.efficiency = efficiency;
  return h;
}

}  // namespace

TEST(CalibrateMetrics, ReadsTheRunLineAndTheSteps) {
  const std::string text = std::string(kRun) + "\n" + step(1, 90, 0.2, 0.3) + "{\"event\":\"checkpoint\",\"step\":1}\n\n" +
                           step(2, 50, 0.1, 0.2) + kRun + "\n" /* a resume: same configuration */ + step(3, 52, 0.1, 0.2);
  auto m = parse_metrics(text, "m.jsonl");
  ASSERT_TRUE(m.ok()) << m.error().str();
  const RunInfo& r = m.value().run;
  EXPECT_EQ(r.model, "gpt");
  EXPECT_EQ(r.n_layer, 4);
  EXPECT_EQ(r.n_embd, 128);
  EXPECT_EQ(r.pp, 2);
  EXPECT_EQ(r.dp, 2);
  EXPECT_EQ(r.micro_batches, 4);
  EXPECT_EQ(r.threads, 1);
  EXPECT_DOUBLE_EQ(r.params, 830000);
  EXPECT_EQ(r.precision, Precision::fp32);  // the runner trains in fp32 unless the line says otherwise
  EXPECT_EQ(r.recompute, Recompute::none);
  ASSERT_EQ(m.value().steps.size(), 3u);  // the checkpoint event and the blank line are not steps
  EXPECT_DOUBLE_EQ(m.value().steps[1].step_ms, 50);
  EXPECT_DOUBLE_EQ(m.value().steps[2].bubble_fraction, 0.2);
}

TEST(CalibrateMetrics, MalformedFilesAreClearErrors) {
  // Empty, and cut before the first step.
  EXPECT_NE(error_of("").message.find("no run line"), std::string::npos);
  EXPECT_NE(error_of(std::string(kRun) + "\n").message.find("no step lines"), std::string::npos);
  // The run line missing: the file starts with steps (an old runner, or a cut file).
  Error e = error_of(step(1, 50, 0.1, 0) + step(2, 50, 0.1, 0));
  EXPECT_NE(e.message.find("first line must be the run line"), std::string::npos) << e.str();
  EXPECT_EQ(e.line, 1);
  // Not JSON, with the line number.
  e = error_of(std::string(kRun) + "\n" + step(1, 50, 0, 0) + "{\"step\":2,\"step_ms\":5\n");
  EXPECT_EQ(e.line, 3) << e.str();
  EXPECT_NE(e.message.find("not a JSON object"), std::string::npos);
  EXPECT_EQ(error_of("[1,2,3]\n").line, 1);
  // Run fields: missing, wrong type, out of range, inconsistent.
  EXPECT_EQ(error_of(R"({"run":{"n_head":4}})" "\n").field, "run.n_layer");
  std::string r = kRun;
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = r;
    t.replace(t.find(from), from.size(), to);
    return t + "\n" + step(1, 50, 0, 0);
  };
  EXPECT_EQ(error_of(with(R"("tp":1)", R"("tp":"1")")).field, "run.tp");
  EXPECT_EQ(error_of(with(R"("tp":1)", R"("tp":0)")).field, "run.tp");
  EXPECT_EQ(error_of(with(R"("n_layer":4)", R"("n_layer":4.5)")).field, "run.n_layer");
  EXPECT_EQ(error_of(with(R"("zero":0)", R"("zero":7)")).field, "run.zero");
  EXPECT_EQ(error_of(with(R"("world":4)", R"("world":3)")).field, "world");
  EXPECT_EQ(error_of(with(R"("params":830000)", R"("params":-1)")).field, "params");
  EXPECT_EQ(error_of(with(R"("model":"gpt")", R"("model":"a\nb")")).field, "model");
  EXPECT_EQ(error_of(with(R"("device":"cpu")", R"("device":"cpu","recompute":"sometimes")")).field, "recompute");
  EXPECT_EQ(error_of(with(R"("device":"cpu")", R"("device":"cpu","recompute":1)")).field, "recompute");
  // Step fields.
  e = error_of(std::string(kRun) + "\n" + step(1, -5, 0, 0));
  EXPECT_EQ(e.field, "step_ms");
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(error_of(std::string(kRun) + "\n" + R"({"step_ms":"fast"})" "\n").field, "step_ms");
  EXPECT_EQ(error_of(std::string(kRun) + "\n" + step(1, 50, 1.5, 0)).field, "comm_fraction");
  EXPECT_EQ(error_of(std::string(kRun) + "\n" + step(1, 50, 0, -0.1)).field, "bubble_fraction");
  // A second run line of another configuration.
  e = error_of(std::string(kRun) + "\n" + step(1, 50, 0, 0) + with(R"("pp":2)", R"("pp":4)"));
  EXPECT_EQ(e.field, "run.pp");
  EXPECT_EQ(e.line, 3);
}

TEST(Calibrate, ThePredictionFedBackReturnsItsEfficiency) {
  // Predict the run at efficiency 0.4, write those numbers as the "measurement", and the
  // calibration must find 0.4 again, and the catalog's bandwidth utilization.
  auto m = parse_metrics(std::string(kRun) + "\n" + step(1, 1, 0, 0), "m.jsonl").value();
  const Hardware at40 = host_hardware(host(20, 0.05, 0.4), Assumptions{});
  auto predicted = calibrate(m, at40, 0);
  ASSERT_TRUE(predicted.ok()) << predicted.error().str();
  const Calibration& p = predicted.value();
  EXPECT_EQ(p.predicted.micro_batches, 4);
  EXPECT_NEAR(p.predicted.bubble_fraction, 1.0 / 5, 1e-12);  // (p-1)/(m+p-1), pp=2, m=4
  EXPECT_GT(p.predicted_comm_fraction, 0);                    // 0.05 GB/s: comm is exposed
  m.steps.clear();
  for (int i = 1; i <= 6; ++i)
    m.steps.push_back(StepSample{i, p.predicted.step_seconds * 1e3 * (i == 1 ? 3 : 1), p.predicted_comm_fraction,
                                 p.predicted.bubble_fraction});
  auto back = calibrate(m, host_hardware(host(20, 0.05, 1), Assumptions{}), 1);
  ASSERT_TRUE(back.ok()) << back.error().str();
  EXPECT_EQ(back.value().steps_used, 5);  // the slow warm-up step is left out
  EXPECT_NEAR(back.value().implied_efficiency, 0.4, 1e-6);
  EXPECT_NEAR(back.value().implied_bandwidth_utilization, Assumptions{}.bandwidth_utilization, 1e-6);
  // Compute twice as slow as predicted: half the efficiency.
  for (auto& s : m.steps) s.step_ms *= 2;
  EXPECT_NEAR(calibrate(m, host_hardware(host(20, 0.05, 1), Assumptions{}), 1).value().implied_efficiency, 0.2, 1e-6);
}

TEST(Calibrate, ARecomputedRunIsPredictedWithItsExtraForward) {
  // The runner's run line says how it trained; a run with full recompute repeats the
  // forward, so its prediction (and the efficiency fitted from it) must count that work.
  std::string full = kRun;
  full.replace(full.find(R"("device":"cpu")"), 14, R"("device":"cpu","precision":"bf16","recompute":"full")");
  auto plain = parse_metrics(std::string(kRun) + "\n" + step(1, 50, 0.1, 0.2), "m.jsonl");
  auto recomputed = parse_metrics(full + "\n" + step(1, 50, 0.1, 0.2), "m.jsonl");
  ASSERT_TRUE(plain.ok() && recomputed.ok());
  EXPECT_EQ(recomputed.value().run.recompute, Recompute::full);
  EXPECT_EQ(recomputed.value().run.precision, Precision::bf16);
  const Hardware hw = host_hardware(host(20, 5), Assumptions{});
  auto a = predict_run(plain.value().run, hw);
  auto b = predict_run(recomputed.value().run, hw);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(b.value().layout.recompute, Recompute::full);
  EXPECT_GT(b.value().compute_seconds, 1.2 * a.value().compute_seconds);
  // A resume that changes how it trains is another configuration.
  std::string only_recompute = kRun;
  only_recompute.replace(only_recompute.find(R"("device":"cpu")"), 14, R"("device":"cpu","recompute":"full")");
  Error e = error_of(std::string(kRun) + "\n" + step(1, 50, 0, 0) + only_recompute + "\n");
  EXPECT_EQ(e.field, "run.recompute");
}

TEST(Calibrate, UnusableRunsAreErrorsNotCrashes) {
  auto m = parse_metrics(std::string(kRun) + "\n" + step(1, 50, 0.1, 0.2), "m.jsonl").value();
  const Hardware hw = host_hardware(host(20, 5), Assumptions{});
  EXPECT_FALSE(calibrate(m, hw, 1).ok());  // the only step is warm-up
  EXPECT_FALSE(calibrate(m, hw, -1).ok());
  EXPECT_TRUE(calibrate(m, hw, 0).ok());
  Metrics heads = m;
  heads.run.n_head = 3;  // 128 is not 3 whole heads
  EXPECT_FALSE(calibrate(heads, hw, 0).ok());
  Metrics deep = m;
  deep.run.pp = 8;  // more stages than 4 layers
  EXPECT_FALSE(calibrate(deep, hw, 0).ok());
  // All of the step is communication and bubble: nothing to calibrate, said in a note.
  Metrics busy = m;
  busy.steps[0].comm_fraction = 0.6, busy.steps[0].bubble_fraction = 0.4;
  auto c = calibrate(busy, hw, 0);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.value().implied_efficiency, 0);
  EXPECT_FALSE(c.value().notes.empty());
  EXPECT_NO_THROW(nlohmann::json::parse(to_json(c.value())));
}

TEST(Calibrate, TheProbeMeasuresSomething) {
  const ProbeResult p = probe_host();
  EXPECT_GT(p.gemm_flops_per_thread, 0);
  EXPECT_GT(p.copy_gb_s, 0);
  EXPECT_TRUE(std::isfinite(p.gemm_flops_per_thread) && std::isfinite(p.copy_gb_s));
}
