// Top-k gradient compression in the planner: the byte model, the reason line that proposes it
// on a communication-bound plan over a slow fabric (and not on a fast one), and the
// partition key topk_compression = auto | require | forbid.
#include <gtest/gtest.h>

#include <cmath>

#include "scaleguard/decide.h"
#include "scaleguard/plan.h"
#include "scaleguard/policy.h"
#include "test_support.h"

using namespace scaleguard;
using namespace scaleguard::test;

namespace {
Plan ddp_plan(const std::string& instance, int gpus, int global_batch) {
  const Catalog& cat = real_catalog();
  const Workload w{parse_model_spec("350M", cat).value(), 1e10, global_batch};
  const Hardware hw = hardware_for(cat, "", instance).value();
  Pins pins;
  pins.strategy = Strategy::ddp;
  return best_plan_at(w, hw, gpus, pins, Goals{}).value();
}
bool has_line(const Plan& p, const std::string& part) {
  for (const auto& r : p.reasons)
    if (r.find(part) != std::string::npos) return true;
  return false;
}
std::string env(const Decision& d, const std::string& name) {
  for (const auto& [k, v] : d.plan_env)
    if (k == name) return v;
  return "";
}
}  // namespace

TEST(TopK, BytesOnTheWire) {
  const Plan p = ddp_plan("g5.xlarge", 8, 16);  // 8 nodes of one A10G, 10 Gb/s
  ASSERT_EQ(p.layout.dp, 8);
  const TopKEstimate t = topk_estimate(p, 0.01);
  ASSERT_TRUE(t.applies);
  // dense: 2 (d-1)/d x the all-reduce message; top-k: (d-1) x k x (4 + 4).
  EXPECT_NEAR(t.dense_bytes, 2.0 * 7 / 8 * p.dp_bytes, 1);
  EXPECT_NEAR(t.topk_bytes, 7 * std::ceil(0.01 * p.dp_elements) * 8, 1);
  EXPECT_LT(t.topk_bytes, 0.2 * t.dense_bytes);
  EXPECT_GT(t.select_s, 0);  // a memory-bound pass over the gradients
  EXPECT_LT(t.step_s, p.step_seconds);
  // Denser selections send more than the dense all-reduce: at d = 8, above ~22% density.
  EXPECT_GT(topk_estimate(p, 0.5).topk_bytes, t.dense_bytes);
  // Not for tp/pp/ZeRO or one GPU (the runner refuses those).
  Plan tp = p;
  tp.layout.tp = 2;
  EXPECT_FALSE(topk_estimate(tp, 0.01).applies);
  Plan one = p;
  one.layout.dp = 1;
  EXPECT_FALSE(topk_estimate(one, 0.01).applies);
}

TEST(TopK, ProposedOnASlowFabricNotOnAFastOne) {
  const Plan slow = ddp_plan("g5.xlarge", 8, 16);
  EXPECT_TRUE(has_line(slow, "top-k compression at 1% (--compress topk:0.01) would cut")) << slow.reasons.back();
  EXPECT_TRUE(has_line(slow, "Gb/s per GPU"));
  const Plan fast = ddp_plan("p4d.24xlarge", 8, 16);  // NVLink inside one node
  EXPECT_FALSE(has_line(fast, "top-k")) << fast.reasons.back();
  EXPECT_EQ(topk_reason(fast), "");
}

TEST(TopK, PolicyKey) {
  const std::string parts =
      "[partition auto]\ninstance = g5.xlarge\nfabric = ethernet\nmax_time = 7-00:00:00\ndefault = yes\n"
      "[partition req]\ninstance = g5.xlarge\nfabric = ethernet\nmax_time = 7-00:00:00\ntopk_compression = require\n"
      "[partition no]\ninstance = g5.xlarge\nfabric = ethernet\nmax_time = 7-00:00:00\ntopk_compression = forbid\n";
  auto pol = load(policy_text("distributed_min_gpu_hours = off\nsingle_gpu_max_hours = off\n"
                               "consider_distributed_hours = off\nmulti_node_fabric = off\n",
                               parts));
  ASSERT_TRUE(pol);
  EXPECT_EQ(pol->find_partition("req")->topk_compression, "require");
  JobRequest j;
  j.gpus_total = 8;
  j.nodes_min = j.nodes_max = 8;
  j.model = "350M";
  j.tokens = 2e9;
  j.time_limit_min = 7 * 24 * 60;
  j.partition = "req";
  const Decision req = decide(j, *pol);
  EXPECT_EQ(env(req, "SCALEGUARD_COMPRESS"), "topk:0.01") << req.message;
  EXPECT_NE(req.plan_json.find("required by partition req"), std::string::npos) << req.plan_json;
  j.partition = "no";
  const Decision no = decide(j, *pol);
  EXPECT_EQ(env(no, "SCALEGUARD_COMPRESS"), "none") << no.message;
  EXPECT_EQ(no.plan_json.find("--compress topk"), std::string::npos);
  j.partition = "auto";
  EXPECT_EQ(env(decide(j, *pol), "SCALEGUARD_COMPRESS"), "");
  // A bad value is an error with the file's line.
  TempFile bad(policy_text("", "[partition x]\ninstance = g5.xlarge\ntopk_compression = maybe\n"), "policy.ini");
  auto r = load_policy(bad.path());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().str().find("unknown topk_compression 'maybe'"), std::string::npos) << r.error().str();
}
