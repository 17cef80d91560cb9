// max_zero_stage: plans name only ZeRO stages the runner executing them implements
// (scaleguard-run, DeepSpeed, FSDP: 3; a runner that shards only the optimizer state: 1).
// The ladder, the policy key, and decide() with the shipped policy (3) and with 1.
#include <gtest/gtest.h>

#include "scaleguard/decide.h"
#include "scaleguard/plan.h"
#include "scaleguard/policy.h"
#include "test_support.h"

using namespace scaleguard;
using namespace scaleguard::test;

namespace {
Hardware hw(const char* instance) { return hardware_for(real_catalog(), "", instance).value(); }
Workload work(const char* spec, double tokens) {
  return Workload{parse_model_spec(spec, real_catalog()).value(), tokens, 0};
}
Goals capped(int stage) {
  Goals g;
  g.max_zero_stage = stage;
  return g;
}

// 13B on 4 H100s, the example configs/examples/13b-4-h100.args: only ZeRO-3 (or model
// parallelism) holds it.
const Workload kThirteenB = work("13B", 20e9);

JobRequest thirteen_b_on_four_h100(const std::string& strategy = "auto") {
  JobRequest j;
  j.gpus_total = 4;
  j.partition = "h100";
  j.time_limit_min = 7 * 24 * 60;
  j.model = "13B";
  j.tokens = 20e9;
  j.strategy = strategy;
  j.ckpt_dir = "/scratch/13b";
  return j;
}

std::string env(const Decision& d, const std::string& name) {
  for (const auto& [k, v] : d.plan_env)
    if (k == name) return v;
  return "";
}
}  // namespace

TEST(MaxZeroStage, UncappedTheLadderShardsWeightsWithZeroThree) {
  auto p = best_plan_at(kThirteenB, hw("p5.48xlarge"), 4, Pins{}, capped(3));
  ASSERT_TRUE(p.ok()) << p.error().str();
  EXPECT_EQ(p.value().strategy, Strategy::zero);
  EXPECT_EQ(p.value().layout.zero, 3);
}

TEST(MaxZeroStage, CappedAtOneTheSameModelGetsModelParallelism) {
  auto p = best_plan_at(kThirteenB, hw("p5.48xlarge"), 4, Pins{}, capped(1));
  ASSERT_TRUE(p.ok()) << p.error().str();
  EXPECT_LE(p.value().layout.zero, 1);
  EXPECT_TRUE(p.value().strategy == Strategy::pipeline || p.value().strategy == Strategy::tensor ||
              p.value().strategy == Strategy::hybrid)
      << to_string(p.value().strategy);
  EXPECT_TRUE(p.value().fits);
  // The explanation says why the zero rung was passed over.
  bool named = false;
  for (const auto& r : p.value().reasons) named |= r.find("ZeRO-1 at most, max_zero_stage") != std::string::npos;
  EXPECT_TRUE(named);
}

TEST(MaxZeroStage, NoStageAboveTheCapAtAnyGpuCount) {
  int plans = 0;
  for (int cap = 0; cap <= 3; ++cap)
    for (int gpus : {2, 4, 8, 16, 32}) {
      auto p = best_plan_at(work("llama2-7b", 300e9), hw("p4d.24xlarge"), gpus, Pins{}, capped(cap));
      if (!p) continue;
      ++plans;
      EXPECT_LE(p.value().layout.zero, cap) << gpus << " GPUs, cap " << cap;
    }
  EXPECT_GE(plans, 8);  // most counts fit: the loop really checks plans
}

TEST(MaxZeroStage, CappedAtZeroNeverShards) {
  auto p = best_plan_at(kThirteenB, hw("p5.48xlarge"), 4, Pins{}, capped(0));
  ASSERT_TRUE(p.ok()) << p.error().str();
  EXPECT_EQ(p.value().layout.zero, 0);
  EXPECT_NE(p.value().strategy, Strategy::zero);
}

TEST(MaxZeroStage, PinnedShardingThatNeedsStageThreeIsAClearRefusal) {
  Pins zero;
  zero.strategy = Strategy::zero;
  auto p = best_plan_at(kThirteenB, hw("p5.48xlarge"), 4, zero, capped(1));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("with ZeRO stages up to 1 (max_zero_stage)"), std::string::npos)
      << p.error().message;
  EXPECT_NE(p.error().hint.find("max_zero_stage"), std::string::npos) << p.error().hint;
  // The same request with a runner that implements stage 3 fits.
  EXPECT_TRUE(best_plan_at(kThirteenB, hw("p5.48xlarge"), 4, zero, capped(3)).ok());
}

TEST(MaxZeroStagePolicy, DefaultIsThreeWhatScaleguardRunImplements) {
  auto p = load(policy_text());
  ASSERT_TRUE(p);
  EXPECT_EQ(p->max_zero_stage, 3);
  EXPECT_NE(describe(*p).find("ZeRO stages up to 3 (max_zero_stage)"), std::string::npos);
  auto shipped = load_policy(source("configs/policy.ini"));
  ASSERT_TRUE(shipped.ok()) << shipped.error().str();
  EXPECT_EQ(shipped.value()->max_zero_stage, 3);
}

TEST(MaxZeroStagePolicy, AnAdminCanCapAtOne) {
  auto p = load("max_zero_stage = 1\n" + policy_text());
  ASSERT_TRUE(p);
  EXPECT_EQ(p->max_zero_stage, 1);
}

TEST(MaxZeroStagePolicy, OutOfRangeIsAnErrorNamingTheKey) {
  for (const char* bad : {"4", "-1", "1.5", "deepspeed"}) {
    TempFile f(std::string("max_zero_stage = ") + bad + "\n" + policy_text(), "policy.ini");
    auto p = load_policy(f.path());
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_NE(p.error().str().find("max_zero_stage"), std::string::npos) << p.error().str();
    EXPECT_EQ(p.error().line, 1) << bad;
  }
}

TEST(MaxZeroStageDecide, ARunnerCappedAtOneGetsModelParallelism) {
  auto p = load("max_zero_stage = 1\n" + policy_text());
  ASSERT_TRUE(p);
  const Decision d = decide(thirteen_b_on_four_h100(), *p);
  EXPECT_NE(d.action, Action::reject) << d.message;
  EXPECT_EQ(env(d, "SCALEGUARD_GPUS"), "4");
  EXPECT_EQ(env(d, "SCALEGUARD_ZERO"), "0") << d.summary;
  EXPECT_EQ(env(d, "SCALEGUARD_STRATEGY"), "pipeline") << d.summary;
}

TEST(MaxZeroStageDecide, TheDefaultGivesTheShardedPlan) {
  auto p = load(policy_text());
  ASSERT_TRUE(p);
  const Decision d = decide(thirteen_b_on_four_h100(), *p);
  EXPECT_NE(d.action, Action::reject) << d.message;
  EXPECT_EQ(env(d, "SCALEGUARD_STRATEGY"), "zero") << d.summary;
  EXPECT_EQ(env(d, "SCALEGUARD_ZERO"), "3") << d.summary;
}

TEST(MaxZeroStageDecide, TheDemoSevenBOnTwoNodesOfA100sKeepsItsSixteenGpuPlan) {
  // scripts/demo.sh step 3 on the shipped policy: -N2 --gpus-per-node=8, llama2-7b, 300B tokens.
  auto p = load_policy(source("configs/policy.ini"));
  ASSERT_TRUE(p.ok()) << p.error().str();
  JobRequest j;
  j.nodes_min = j.nodes_max = 2;
  j.gpus_per_node = 8;
  j.time_limit_min = 7 * 24 * 60;
  j.model = "llama2-7b";
  j.tokens = 300e9;
  j.ckpt_dir = "/tmp/ckpt";
  const Decision d = decide(j, *p.value());
  EXPECT_NE(d.action, Action::reject) << d.message;
  EXPECT_NE(d.summary.find("gpus=16 nodes=2"), std::string::npos) << d.summary;
  // The zero rung's fastest stage: ZeRO-3 (stage 1 with max_zero_stage = 1).
  EXPECT_EQ(env(d, "SCALEGUARD_ZERO"), "3") << d.summary;
}

TEST(MaxZeroStageDecide, PinnedZeroThatNeedsStageThreeIsRefusedNamingTheKey) {
  auto p = load("max_zero_stage = 1\n" + policy_text());
  ASSERT_TRUE(p);
  const Decision d = decide(thirteen_b_on_four_h100("zero"), *p);
  EXPECT_EQ(d.action, Action::reject);
  EXPECT_NE(d.message.find("max_zero_stage"), std::string::npos) << d.message;
}

// Hybrid sharding: tensor parallelism with ZeRO-2/3 inside each dp group (what scaleguard-run
// runs as --tp N --zero 2|3). 70B at 8k tokens on 32 A100-80GB, tp=8 x dp=4: with the
// gradients sharded it keeps selective recompute (511 s steps); capped at ZeRO-1 the tensor
// rung must recompute everything to fit (620 s).
TEST(MaxZeroStage, TheTensorRungShardsGradientsWithinItsDataParallelGroups) {
  Pins tensor;
  tensor.strategy = Strategy::tensor;
  const Workload w = work("70B,seq=8192", 10e9);
  auto sharded = best_plan_at(w, hw("p4de.24xlarge"), 32, tensor, capped(3));
  ASSERT_TRUE(sharded.ok()) << sharded.error().str();
  EXPECT_EQ(sharded.value().strategy, Strategy::tensor);
  EXPECT_GT(sharded.value().layout.tp, 1);
  EXPECT_EQ(sharded.value().layout.pp, 1);
  EXPECT_GE(sharded.value().layout.zero, 2);
  auto capped_one = best_plan_at(w, hw("p4de.24xlarge"), 32, tensor, capped(1));
  ASSERT_TRUE(capped_one.ok()) << capped_one.error().str();
  EXPECT_LE(capped_one.value().layout.zero, 1);
  EXPECT_EQ(capped_one.value().layout.recompute, Recompute::full);
  EXPECT_LT(sharded.value().step_seconds, capped_one.value().step_seconds);
}

TEST(MaxZeroStage, PipelinesKeepAtMostZeroOne) {
  // The runner refuses pp with ZeRO-2/3 (each micro-batch would re-gather a stage's weights).
  Pins pipeline;
  pipeline.strategy = Strategy::pipeline;
  auto p = best_plan_at(work("70B,seq=8192", 10e9), hw("p4de.24xlarge"), 64, pipeline, capped(3));
  ASSERT_TRUE(p.ok()) << p.error().str();
  EXPECT_GT(p.value().layout.pp, 1);
  EXPECT_LE(p.value().layout.zero, 1);
}
