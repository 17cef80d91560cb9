// decide(): the seed scenarios from the cost articles, every rule with every action, and
// bad input -- always a Decision, never a crash.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "scaleguard/decide.h"
#include "scaleguard/policy.h"
#include "scaleguard/report.h"
#include "test_support.h"

using namespace scaleguard;
using namespace scaleguard::test;

namespace {

JobRequest job(int gpus, const std::string& model = "", double single_gpu_hours = 0, const std::string& partition = "") {
  JobRequest j;
  j.gpus_total = gpus;
  j.model = model;
  j.single_gpu_hours = single_gpu_hours;
  j.partition = partition;
  j.time_limit_min = 7 * 24 * 60;
  return j;
}

std::string env(const Decision& d, const std::string& name) {
  for (const auto& [k, v] : d.plan_env)
    if (k == name) return v;
  return "";
}

nlohmann::json plan_of(const Decision& d) { return nlohmann::json::parse(d.plan_json); }

const Policy& shipped() {
  static auto p = load_policy(source("configs/policy.ini"));
  if (!p) ADD_FAILURE() << p.error().str();
  return *p.value();
}

}  // namespace

// Seed 000: "350M parameter LLM ... 8 GPUs finished in 1.5 hours. Single GPU took 11 hours
// ... Single GPU cost: $11 (spot). Distributed cost: $48." -> refused, use 1 GPU.
TEST(Seed, ThreeFiftyMOnEightA100sIsRefusedWithTheCostComparison) {
  const Decision d = decide(job(8, "350M", 11), shipped());
  EXPECT_EQ(d.action, Action::reject);
  EXPECT_TRUE(fired(d, "distributed_min_gpu_hours"));
  EXPECT_TRUE(fired(d, "single_gpu_max_hours"));
  EXPECT_NE(d.message.find("single GPU 11 h for ~$14 on spot"), std::string::npos) << d.message;
  EXPECT_NE(d.message.find("use 1 GPU"), std::string::npos);
  EXPECT_NE(d.message.find("--gpus=1"), std::string::npos);
  EXPECT_NE(d.summary.find("reject"), std::string::npos);
  // The requested 8-GPU plan: near the seed's 1.5 h and $48 on demand (p4d $32.77/h).
  const auto p = plan_of(d);
  EXPECT_EQ(p["gpus"], 8);
  EXPECT_EQ(p["strategy"], "ddp");
  EXPECT_NEAR(p["wall_hours"].get<double>(), 1.45, 0.15);
  EXPECT_NEAR(p["cost_usd"]["on_demand"].get<double>(), 46, 4);
}

TEST(Seed, ThreeFiftyMOnOneGpuIsAccepted) {
  JobRequest j = job(1, "350M", 11);
  j.time_limit_min = 13 * 60;
  const Decision d = decide(j, shipped());
  EXPECT_EQ(d.action, Action::accept) << d.message;
  EXPECT_TRUE(d.rules.empty());
  EXPECT_EQ(env(d, "SCALEGUARD_STRATEGY"), "single");
  EXPECT_EQ(env(d, "SCALEGUARD_GPUS"), "1");
  // 11 h at p4d's $9.83/8 spot and $32.77/8 on demand, plus a fraction of a percent for failures.
  const auto p = plan_of(d);
  EXPECT_NEAR(p["cost_usd"]["spot"].get<double>(), 11 * 9.83 / 8, 0.2);
  EXPECT_NEAR(p["cost_usd"]["on_demand"].get<double>(), 11 * 32.77 / 8, 0.5);
}

TEST(Seed, ThreeFiftyMRewrittenToOneGpuWhenThePolicySaysRewrite) {
  auto pol = load(policy_text("distributed_min_gpu_hours = 100 rewrite\nsingle_gpu_max_hours = 24 rewrite\n"));
  const Decision d = decide(job(8, "350M", 11), *pol);
  EXPECT_EQ(d.action, Action::rewrite) << d.message;
  ASSERT_TRUE(d.rewrite.gpus_total.has_value());
  EXPECT_EQ(*d.rewrite.gpus_total, 1);
  EXPECT_EQ(d.rewrite.nodes.value_or(0), 1);
  // The one-GPU plan's 11.0 h plus 10%, in whole minutes.
  ASSERT_TRUE(d.rewrite.time_limit_min.has_value());
  EXPECT_NEAR(*d.rewrite.time_limit_min, 11.04 * 66, 10);
  EXPECT_EQ(env(d, "SCALEGUARD_STRATEGY"), "single");
  EXPECT_EQ(env(d, "SCALEGUARD_GPUS"), "1");
}

// Seed 000: "13B ... couldn't hold it [on one GPU] even with activation checkpointing.
// We needed at least 4 H100s."
TEST(Seed, ThirteenBOnOneH100IsRefusedAndAskedForFour) {
  JobRequest j = job(1, "13B,recompute=full", 0, "h100");
  j.tokens = 100e9;
  const Decision d = decide(j, *load(policy_text()));
  EXPECT_EQ(d.action, Action::reject);
  EXPECT_TRUE(fired(d, "must_fit_memory"));
  EXPECT_NE(d.message.find("--gpus=4"), std::string::npos) << d.message;
  EXPECT_NE(d.summary.find("[must_fit_memory]: use "), std::string::npos) << d.summary;
  EXPECT_NE(d.summary.find("gpus=4"), std::string::npos) << d.summary;
  JobRequest four = j;
  four.gpus_total = 4;
  four.model = "13B";
  const Decision ok = decide(four, *load(policy_text()));
  EXPECT_FALSE(fired(ok, "must_fit_memory")) << ok.message;
  const auto p = plan_of(ok);
  EXPECT_TRUE(p["fits"].get<bool>());
  EXPECT_NE(p["strategy"], "ddp");
}

// Seed 000: "a 100M parameter BERT-like model across 2 GPUs ... Single GPU was faster."
TEST(Seed, HundredMBertOnTwoGpusStaysSingle) {
  JobRequest j = job(2, "100M,seq=512");
  j.tokens = 5e9;
  const Decision d = decide(j, shipped());
  EXPECT_EQ(d.action, Action::reject);
  EXPECT_TRUE(fired(d, "distributed_min_gpu_hours"));
  EXPECT_NE(d.message.find("--gpus=1"), std::string::npos);
}

// Seed 000: "Single p3 (V100): 40 hours, $122 on-demand. Distributed on 4 V100s
// (p3.8xlarge): 12 hours, $147." Adam's 16 B/param fill a 16 GB V100 before any
// activations, so the 1B run is planned with SGD (12 B/param).
TEST(Seed, OneBAtFortyHoursOnAV100StaysSingle) {
  auto pol = load(policy_text());
  JobRequest one = job(1, "1B,optimizer=sgd", 40, "v100x1");
  one.time_limit_min = 45 * 60;
  const Decision d1 = decide(one, *pol);
  EXPECT_NE(d1.action, Action::reject) << d1.message;
  const auto p1 = plan_of(d1);
  EXPECT_EQ(p1["strategy"], "single");
  EXPECT_NEAR(p1["gpu_hours"].get<double>(), 40, 0.5);
  EXPECT_NEAR(p1["cost_usd"]["on_demand"].get<double>(), 122.4, 1.5);  // 40 h x $3.06
  // Asked on 4 V100s: 40 GPU-hours < 100, so one GPU it is; 4 GPUs never cost less.
  const Decision d4 = decide(job(4, "1B,optimizer=sgd", 40, "v100x4"), *pol);
  EXPECT_EQ(d4.action, Action::reject);
  EXPECT_TRUE(fired(d4, "distributed_min_gpu_hours"));
  EXPECT_GE(plan_of(d4)["cost_usd"]["on_demand"].get<double>(), p1["cost_usd"]["on_demand"].get<double>() - 0.5);
  // With Adam the model does not fit the V100 at all.
  const Decision adam = decide(job(1, "1B", 40, "v100x1"), *pol);
  EXPECT_EQ(adam.action, Action::reject);
  EXPECT_TRUE(fired(adam, "must_fit_memory"));
}

// Seed 000: "If a single GPU would take two weeks, distributed might take two days."
TEST(Seed, OneBAtTwoWeeksIsDistributed) {
  const Decision single = decide(job(1, "1B", 336), shipped());
  EXPECT_TRUE(fired(single, "consider_distributed_hours")) << single.message;
  EXPECT_NE(single.message.find("--gpus=16"), std::string::npos) << single.message;
  auto pol = load(policy_text("consider_distributed_hours = 72 rewrite\n"));
  const Decision rw = decide(job(1, "1B", 336), *pol);
  EXPECT_EQ(rw.action, Action::rewrite);
  EXPECT_GT(rw.rewrite.gpus_total.value_or(1), 1);
  EXPECT_EQ(rw.rewrite.nodes.value_or(0), (rw.rewrite.gpus_total.value_or(1) + 7) / 8);
  EXPECT_LE(plan_of(rw)["wall_hours"].get<double>(), 24);
  // Asked on 8 GPUs it is accepted as distributed (with checkpointing added).
  const Decision eight = decide(job(8, "1B", 336), shipped());
  EXPECT_FALSE(fired(eight, "distributed_min_gpu_hours"));
  EXPECT_FALSE(fired(eight, "single_gpu_max_hours"));
  EXPECT_EQ(env(eight, "SCALEGUARD_STRATEGY"), "ddp");
  EXPECT_EQ(env(eight, "SCALEGUARD_DP"), "8");
}

TEST(Rules, OneGpuType) {
  JobRequest j = job(1);
  j.time_limit_min = 60;
  j.gpu_type = "v100";
  Decision d = decide(j, shipped());
  EXPECT_EQ(d.action, Action::reject);
  EXPECT_TRUE(fired(d, "one_gpu_type"));
  j.gpu_type = "a100,v100";
  EXPECT_TRUE(fired(decide(j, shipped()), "one_gpu_type"));
  j.gpu_type = "a100";
  EXPECT_EQ(decide(j, shipped()).action, Action::accept);
}

TEST(Rules, MultiNodeOnlyOnFastFabric) {
  JobRequest j = job(16, "", 0, "eth");
  j.nodes_min = 2;
  j.time_limit_min = 24 * 60;
  auto pol = load(policy_text());
  Decision d = decide(j, *pol);
  EXPECT_EQ(d.action, Action::reject);
  EXPECT_TRUE(fired(d, "multi_node_fabric"));
  auto rw = load(policy_text("multi_node_fabric = rewrite\n"));
  Decision r = decide(j, *rw);
  EXPECT_EQ(r.action, Action::rewrite);
  // Partition od has the same p4d nodes on EFA: the job moves there, nodes unchanged.
  EXPECT_EQ(r.rewrite.partition.value_or(""), "od");
  EXPECT_FALSE(r.rewrite.nodes.has_value());
  EXPECT_NE(d.message.find("--partition=od"), std::string::npos) << d.message;
  // Without such a partition it shrinks to one node.
  auto alone = load(policy_text("multi_node_fabric = rewrite\n",
                                "[partition eth]\ninstance = p4d.24xlarge\nfabric = ethernet\ndefault = yes\n"));
  Decision one = decide(j, *alone);
  EXPECT_EQ(one.action, Action::rewrite);
  EXPECT_EQ(one.rewrite.nodes.value_or(0), 1);
  EXPECT_EQ(one.rewrite.gpus_total.value_or(0), 8);
  j.partition = "od";  // EFA: fine
  EXPECT_FALSE(fired(decide(j, *pol), "multi_node_fabric"));
}

TEST(Rules, WithoutIntentTheRequestIsJudged) {
  JobRequest j = job(8);
  j.time_limit_min = 60;  // 8 GPU-hours
  Decision d = decide(j, shipped());
  EXPECT_EQ(d.action, Action::reject);
  EXPECT_TRUE(fired(d, "distributed_min_gpu_hours"));
  EXPECT_NE(d.message.find("8 GPUs x 1 h = 8 GPU-hours"), std::string::npos) << d.message;
  j.time_limit_min = 0;  // unset: the partition's default (1 h) applies
  EXPECT_TRUE(fired(decide(j, shipped()), "distributed_min_gpu_hours"));
  auto pol = load(policy_text("distributed_min_gpu_hours = 100 rewrite\n"));
  j.time_limit_min = 60;
  Decision r = decide(j, *pol);
  EXPECT_EQ(r.action, Action::rewrite);
  EXPECT_EQ(r.rewrite.gpus_total.value_or(0), 1);
  EXPECT_EQ(r.rewrite.time_limit_min.value_or(0), 528);  // 8 h + 10%
  j.time_limit_min = 24 * 60;  // 192 GPU-hours: allowed, must checkpoint
  Decision big = decide(j, shipped());
  EXPECT_EQ(big.action, Action::rewrite);
  EXPECT_TRUE(fired(big, "checkpoint_required_gpu_hours"));
  EXPECT_TRUE(big.rewrite.requeue);
  EXPECT_EQ(big.rewrite.signal_before_s, 300);
  EXPECT_EQ(env(big, "SCALEGUARD_GPUS"), "8");
}

TEST(Rules, MaxJobGpuHours) {
  auto pol = load(policy_text("max_job_gpu_hours = 100 reject\ncheckpoint_required_gpu_hours = off\n"));
  JobRequest j = job(8);
  j.time_limit_min = 48 * 60;
  Decision d = decide(j, *pol);
  EXPECT_EQ(d.action, Action::reject);
  EXPECT_TRUE(fired(d, "max_job_gpu_hours"));
  Decision i = decide(job(8, "1B", 336), *pol);
  EXPECT_TRUE(fired(i, "max_job_gpu_hours"));
  EXPECT_EQ(i.action, Action::reject);
}

TEST(Rules, MaxCommRatioCapsTheGpuCount) {
  // Any exposed communication above 0.0001 of compute fires (beyond the model's 10% band);
  // 16 GPUs span two nodes.
  auto pol = load(policy_text("max_comm_ratio = 0.0001 rewrite\n"));
  JobRequest j = job(16, "1B", 336);
  Decision d = decide(j, *pol);
  ASSERT_TRUE(fired(d, "max_comm_ratio")) << d.message;
  EXPECT_EQ(d.action, Action::rewrite);
  EXPECT_LT(d.rewrite.gpus_total.value_or(16), 16);
  EXPECT_LE(plan_of(d)["comm_ratio"].get<double>(), 0.0001);
  auto warn = load(policy_text("max_comm_ratio = 0.0001 warn\n"));
  Decision w = decide(j, *warn);
  EXPECT_TRUE(fired(w, "max_comm_ratio"));
  EXPECT_FALSE(w.rewrite.gpus_total.has_value());
}

TEST(Rules, MinDoublingSpeedup) {
  // No doubling can speed up 2.5x: the rule halves the request.
  auto pol = load(policy_text("min_doubling_speedup = 2.5 rewrite\n"));
  Decision d = decide(job(8, "1B", 336), *pol);
  ASSERT_TRUE(fired(d, "min_doubling_speedup")) << d.message;
  EXPECT_EQ(d.rewrite.gpus_total.value_or(0), 4);
  auto rej = load(policy_text("min_doubling_speedup = 2.5 reject\n"));
  EXPECT_EQ(decide(job(8, "1B", 336), *rej).action, Action::reject);
  // The default 1.5 holds for a well-fed ddp job inside a node.
  EXPECT_FALSE(fired(decide(job(8, "1B", 336), shipped()), "min_doubling_speedup"));
}

TEST(Rules, CheckpointRequiredAboveGpuHoursAndAlwaysOnSpot) {
  JobRequest j = job(1, "350M", 11, "gpu-spot");
  j.time_limit_min = 13 * 60;
  Decision d = decide(j, shipped());
  EXPECT_TRUE(fired(d, "checkpoint_required_gpu_hours"));
  EXPECT_EQ(d.action, Action::rewrite);
  EXPECT_TRUE(d.rewrite.requeue);
  EXPECT_GT(std::stol(env(d, "SCALEGUARD_CKPT_INTERVAL_S")), 0);
  j.partition = "gpu-od";
  EXPECT_FALSE(fired(decide(j, shipped()), "checkpoint_required_gpu_hours"));
  j.ckpt_dir = "/scratch/me/run1";
  j.ckpt_interval_min = 15;
  Decision withdir = decide(j, shipped());
  EXPECT_EQ(env(withdir, "SCALEGUARD_CKPT_DIR"), "/scratch/me/run1");
  EXPECT_EQ(env(withdir, "SCALEGUARD_CKPT_INTERVAL_S"), "900");
}

TEST(Rules, TimeLimitMustCoverThePlan) {
  JobRequest j = job(1, "350M", 11);
  j.time_limit_min = 60;
  Decision d = decide(j, shipped());
  EXPECT_EQ(d.action, Action::warn);
  EXPECT_TRUE(fired(d, "time_limit_fits"));
  auto pol = load(policy_text("time_limit_fits = rewrite\n"));
  Decision r = decide(j, *pol);
  EXPECT_EQ(r.action, Action::rewrite);
  EXPECT_NEAR(r.rewrite.time_limit_min.value_or(0), 11.04 * 66, 10);
}

// --train-eval-every/--train-eval-tokens: the evaluations' forward passes are part of the
// job's hours, so the time limit that covered the training alone no longer does.
TEST(Rules, EvaluationCountsInTheJobsHours) {
  JobRequest j = job(1, "350M");
  j.tokens = 1.2e9;
  j.time_limit_min = 12 * 60;
  const Decision plain = decide(j, shipped());
  EXPECT_EQ(plain.action, Action::accept) << plain.message;
  j.eval_interval = 100;
  j.eval_tokens = 20e6;
  const Decision evaluated = decide(j, shipped());
  EXPECT_EQ(evaluated.action, Action::warn) << evaluated.message;
  EXPECT_TRUE(fired(evaluated, "time_limit_fits"));
  const auto p0 = plan_of(plain), p1 = plan_of(evaluated);
  EXPECT_EQ(p0["evaluations"].get<double>(), 0);
  EXPECT_EQ(p1["evaluations"].get<double>(), std::floor(p1["steps"].get<double>() / 100));
  EXPECT_GT(p1["eval_hours"].get<double>(), 0.5);
  EXPECT_NEAR(p1["gpu_hours"].get<double>() - p0["gpu_hours"].get<double>(), p1["eval_hours"].get<double>(), 0.01);
  EXPECT_NE(evaluated.message.find(" evaluations of 2e+07 tokens: "), std::string::npos) << evaluated.message;

  JobRequest half = j;  // one without the other is a mistake, not "no evaluation"
  half.eval_tokens = 0;
  Decision d = decide(half, shipped());
  EXPECT_EQ(d.action, Action::reject);
  EXPECT_NE(d.message.find("--train-eval-every and --train-eval-tokens go together"), std::string::npos) << d.message;
  half = j;
  half.eval_interval = double(kMaxEvalEvery) * 2;
  EXPECT_EQ(decide(half, shipped()).action, Action::reject);
  JobRequest no_model = job(1);
  no_model.eval_interval = 100;
  no_model.eval_tokens = 20e6;
  d = decide(no_model, shipped());
  EXPECT_EQ(d.action, Action::reject);
  EXPECT_NE(d.message.find("evaluation given without a model"), std::string::npos) << d.message;
}

TEST(Rules, OffMeansOff) {
  auto pol = load(policy_text("distributed_min_gpu_hours = off\nsingle_gpu_max_hours = off\n"));
  Decision d = decide(job(8, "350M", 11), *pol);
  EXPECT_FALSE(fired(d, "distributed_min_gpu_hours"));
  EXPECT_FALSE(fired(d, "single_gpu_max_hours"));
  EXPECT_NE(d.action, Action::reject);
}

TEST(Rules, PerPartitionOverride) {
  // The shipped gpu-spot partition only warns about small multi-GPU jobs.
  JobRequest j = job(8, "350M", 11, "gpu-spot");
  Decision d = decide(j, shipped());
  EXPECT_TRUE(fired(d, "distributed_min_gpu_hours"));
  EXPECT_NE(d.action, Action::reject);
}

TEST(Decide, PlanEnvironmentCarriesTheLayout) {
  JobRequest j = job(8, "1B", 336);
  j.strategy = "tensor";
  Decision d = decide(j, shipped());
  EXPECT_EQ(env(d, "SCALEGUARD_STRATEGY"), "tensor");
  for (const char* k : {"SCALEGUARD_TP", "SCALEGUARD_PP", "SCALEGUARD_DP", "SCALEGUARD_ZERO", "SCALEGUARD_MICRO_BATCH",
                        "SCALEGUARD_GPUS", "SCALEGUARD_NODES", "SCALEGUARD_CKPT_INTERVAL_S"})
    EXPECT_FALSE(env(d, k).empty()) << k;
  EXPECT_EQ(std::stoi(env(d, "SCALEGUARD_TP")) * std::stoi(env(d, "SCALEGUARD_PP")) * std::stoi(env(d, "SCALEGUARD_DP")), 8);
  // The batch split and the bucket other trainers follow (the SPANK plugin's plan file).
  EXPECT_GE(std::stoi(env(d, "SCALEGUARD_ACCUMULATION")), 1);
  EXPECT_EQ(env(d, "SCALEGUARD_BUCKET_MB"), "25");  // the catalog's DDP bucket
  for (const auto& [k, v] : d.plan_env) {
    EXPECT_EQ(v.find_first_of(" \n="), std::string::npos) << k << "=" << v;
  }
}

// The summary goes into the Slurm job comment; `scaleguard report` reads comm= and ckpt= back
// from it (its comm_heavy flag and checkpoint-aware waste), so the two must agree.
TEST(Decide, SummaryCarriesCommRatioAndCheckpointIntervalForTheReport) {
  JobRequest j = job(8, "1B", 336);
  j.strategy = "tensor";
  const Decision d = decide(j, shipped());
  const auto note = report::parse_plan_note(d.summary);
  ASSERT_TRUE(note.present) << d.summary;
  EXPECT_EQ(note.strategy, "tensor") << d.summary;
  EXPECT_EQ(note.gpus, 8);
  EXPECT_NEAR(note.comm_ratio, plan_of(d)["comm_ratio"].get<double>(), 5e-4) << d.summary;
  EXPECT_GT(note.comm_ratio, 0) << d.summary;  // tensor parallel always communicates
  EXPECT_EQ(note.ckpt_interval_s, std::stol(env(d, "SCALEGUARD_CKPT_INTERVAL_S"))) << d.summary;
  // A pinned --train-ckpt-interval is what the job runs with, so it is what the summary says.
  j.ckpt_interval_min = 15;
  EXPECT_NE(decide(j, shipped()).summary.find(" ckpt=900s"), std::string::npos);
  // A refused job's summary describes the plan to run instead (one GPU: no communication).
  const Decision refused = decide(job(8, "350M", 11), shipped());
  EXPECT_NE(refused.summary.find("use single gpus=1 nodes=1"), std::string::npos) << refused.summary;
  EXPECT_NE(refused.summary.find(" comm=0 ckpt="), std::string::npos) << refused.summary;
  EXPECT_EQ(report::parse_plan_note(refused.summary).comm_ratio, 0);
}

TEST(Decide, JsonIsWellFormed) {
  Decision d = decide(job(8, "350M", 11), shipped());
  auto j = nlohmann::json::parse(to_json(d));
  EXPECT_EQ(j["action"], "reject");
  EXPECT_EQ(j["rules"][0]["id"], "distributed_min_gpu_hours");
  EXPECT_EQ(j["plan"]["gpus"], 8);
  for (const char* k : {"strategy", "tp", "pp", "dp", "zero", "micro_batch", "recompute", "gpus", "nodes", "fits",
                        "memory_per_gpu_gib", "step_seconds", "tflops_per_gpu", "mfu", "comm_ratio", "bubble_fraction",
                        "wall_hours", "gpu_hours", "cost_usd", "reasons"})
    EXPECT_TRUE(j["plan"].contains(k)) << k;
  EXPECT_TRUE(j["plan"]["cost_usd"].contains("spot"));
}

TEST(Decide, SameRequestSameDecision) {
  const JobRequest j = job(8, "350M", 11);
  const Decision a = decide(j, shipped()), b = decide(j, shipped());
  EXPECT_EQ(a.message, b.message);
  EXPECT_EQ(a.plan_json, b.plan_json);
  EXPECT_EQ(to_json(a), to_json(b));
}

TEST(BadInput, NeverACrashAlwaysAClearDecision) {
  struct Case { JobRequest job; const char* words; };
  std::vector<Case> cases;
  auto add = [&](JobRequest j, const char* words) { cases.push_back({std::move(j), words}); };
  JobRequest j = job(8, "1e30", 0);
  j.tokens = 1e9;
  add(j, "absurd");
  j.model = "layers=0,hidden=10";
  add(j, "--train-model");
  j.model = std::string(1 << 20, 'x');
  add(j, "malformed");
  j.model = "350M\nforged";
  add(j, "malformed");
  j.model = "";
  add(j, "without a model");
  j = job(8, "350M");
  j.tokens = std::numeric_limits<double>::quiet_NaN();
  add(j, "out of range");
  j.tokens = -1;
  add(j, "out of range");
  j = job(8, "350M", 11);
  j.strategy = "warp-drive";
  add(j, "unknown strategy");
  j = job(0, "350M", 11);
  add(j, "without GPUs");
  j = job(1 << 30);
  add(j, "absurd");
  for (const auto& c : cases) {
    const Decision d = decide(c.job, shipped());
    EXPECT_EQ(d.action, Action::reject) << c.words;
    EXPECT_NE(d.message.find(c.words), std::string::npos) << "expected '" << c.words << "' in: " << d.message;
    EXPECT_LT(d.message.size(), 2000u);
  }
}

TEST(BadInput, UngovernedPartitionsAndCpuJobsPass) {
  JobRequest j = job(8);
  j.partition = "cpu";
  Decision d = decide(j, shipped());
  EXPECT_EQ(d.action, Action::accept);
  EXPECT_NE(d.summary.find("not governed"), std::string::npos);
  EXPECT_EQ(decide(job(0), shipped()).action, Action::accept);
  // A comma list is judged in each partition: refused in gpu-od (8 GPU-hours < 100), only
  // warned in gpu-spot, so the job is kept where it is accepted and the list rewritten.
  j.partition = "gpu-od,gpu-spot";
  j.time_limit_min = 60;
  Decision both = decide(j, shipped());
  EXPECT_EQ(both.action, Action::rewrite);
  EXPECT_EQ(both.rewrite.partition.value_or(""), "gpu-spot");
  j.partition = "gpu-od,gpu-od";
  EXPECT_EQ(decide(j, shipped()).action, Action::reject);
}

TEST(BadInput, GpuCountFromEveryTresForm) {
  JobRequest j;
  j.time_limit_min = 60;
  j.gpus_per_node = 4;
  j.nodes_min = 2;
  EXPECT_NE(decide(j, shipped()).summary.find("8 GPU(s)"), std::string::npos);
  JobRequest t;
  t.time_limit_min = 60;
  t.gpus_per_task = 2;
  t.ntasks = 3;
  EXPECT_NE(decide(t, shipped()).summary.find("6 GPU(s)"), std::string::npos);
}

TEST(Rules, AWarningCapGrantsTheWholeJob) {
  // Issue 36, class 3: a cap that only warns leaves the job whole; budgets are charged all of it
  // (was min(job, cap): 2,688 GPU-hours granted as 150).
  auto pol = load(policy_text("max_job_gpu_hours = 150 warn\n"));
  JobRequest j = job(8);
  j.time_limit_min = 14 * 24 * 60;
  Decision d = decide(j, *pol);
  EXPECT_TRUE(fired(d, "max_job_gpu_hours")) << d.message;
  EXPECT_NE(d.action, Action::reject) << d.message;
  EXPECT_FALSE(d.rewrite.time_limit_min.has_value()) << d.message;
  EXPECT_NEAR(d.granted_gpu_hours, 8 * 14 * 24, 1e-6);
  // A het component after it is judged on the whole of component 0.
  JobRequest second = job(1);
  second.time_limit_min = 60;
  second.het_component = 1;
  second.het_prior_gpu_hours = d.granted_gpu_hours;
  EXPECT_NEAR(decide(second, *pol).granted_gpu_hours, 1, 1e-6);
}

TEST(Rules, ACapTrippedByThePredictionNamesThePrediction) {
  // Issue 36, class 6: 1 GPU x 1 h asked, the plan predicts far more: the message cites the plan.
  auto pol = load(policy_text("max_job_gpu_hours = 150 reject\n"));
  JobRequest j = job(1, "1B");
  j.tokens = 20e9;
  j.time_limit_min = 60;
  Decision d = decide(j, *pol);
  ASSERT_TRUE(fired(d, "max_job_gpu_hours")) << d.message;
  EXPECT_NE(d.message.find("the plan predicts"), std::string::npos) << d.message;
  EXPECT_EQ(d.message.find("1 GPUs x 1 h = 1 GPU-hours"), std::string::npos) << d.message;
}
