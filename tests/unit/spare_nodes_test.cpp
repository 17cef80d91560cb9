// --train-spare-nodes (issue 38 item 2): the training is planned on the nodes less the spares,
// the job is charged (caps, budgets: granted_gpu_hours) for every node it holds, and a job
// without spares is judged exactly as before (tests/unit/data/replay/ holds that byte for byte).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "scaleguard/decide.h"
#include "scaleguard/policy.h"
#include "test_support.h"

using namespace scaleguard;
using namespace scaleguard::test;

namespace {

const Policy& shipped() {
  static auto p = load_policy(source("configs/policy.ini"));
  if (!p) ADD_FAILURE() << p.error().str();
  return *p.value();
}

std::string env(const Decision& d, const std::string& name) {
  for (const auto& [k, v] : d.plan_env)
    if (k == name) return v;
  return "";
}

// -N NODES --gpus-per-node=8 in gpu-od (p4d: 8 A100 per node), 2 days, training 1B on 10B tokens
// (about 27 h on 8 A100s: distributing pays, the time limit covers it).
JobRequest nodes_job(int nodes, int spares, const std::string& model = "1B") {
  JobRequest j;
  j.partition = "gpu-od";
  j.nodes_min = j.nodes_max = nodes;
  j.gpus_per_node = 8;
  j.time_limit_min = 2880;
  j.model = model;
  if (!model.empty()) j.tokens = 10e9;
  j.spare_nodes = spares;
  return j;
}

}  // namespace

TEST(SpareNodes, TrainingIsPlannedOnTheNodesLessTheSpares) {
  const Decision spared = decide(nodes_job(2, 1), shipped());
  const Decision one_node = decide(nodes_job(1, 0), shipped());
  ASSERT_NE(spared.action, Action::reject) << spared.message;
  ASSERT_FALSE(spared.plan_json.empty()) << spared.message;
  // The layout and its time are those of the same training on one node, no spares.
  EXPECT_EQ(spared.plan_json, one_node.plan_json);
  const auto p = nlohmann::json::parse(spared.plan_json);
  EXPECT_EQ(p["gpus"], 8);
  EXPECT_EQ(p["nodes"], 1);
  // The tasks are told the training's nodes and GPUs, and the spares apart.
  EXPECT_EQ(env(spared, "SCALEGUARD_GPUS"), "8");
  EXPECT_EQ(env(spared, "SCALEGUARD_NODES"), "1");
  EXPECT_EQ(env(spared, "SCALEGUARD_SPARE_NODES"), "1");
  EXPECT_EQ(env(one_node, "SCALEGUARD_SPARE_NODES"), "");
  EXPECT_NE(spared.summary.find(" gpus=8 nodes=1 "), std::string::npos) << spared.summary;
  EXPECT_NE(spared.summary.find(" spares=1"), std::string::npos) << spared.summary;
  EXPECT_EQ(one_node.summary.find("spares="), std::string::npos) << one_node.summary;
  EXPECT_NE(spared.message.find("+ 1 spare node (8 GPUs)"), std::string::npos) << spared.message;
  EXPECT_NE(spared.message.find("Spares: 1 node (8 GPUs) held idle"), std::string::npos) << spared.message;
}

TEST(SpareNodes, TheWholeAllocationIsChargedAndPriced) {
  const Decision spared = decide(nodes_job(2, 1), shipped());
  const Decision one_node = decide(nodes_job(1, 0), shipped());
  ASSERT_NE(spared.action, Action::reject) << spared.message;
  // What Slurm may grant: both nodes, 16 GPUs x 48 h.
  EXPECT_EQ(spared.envelope.gpus, 16);
  EXPECT_EQ(spared.envelope.nodes, 2);
  EXPECT_DOUBLE_EQ(spared.granted_gpu_hours, 16 * 48.0);
  EXPECT_DOUBLE_EQ(one_node.granted_gpu_hours, 8 * 48.0);
  // The summary's cost is the plan's plus the spare node's idle share: twice the one-node cost.
  auto cost = [](const std::string& s) {
    const auto at = s.find(" ~$");
    if (at == std::string::npos) return -1.0;
    std::string n;  // "~$1,794" -> 1794
    for (size_t i = at + 3; i < s.size() && (isdigit(static_cast<unsigned char>(s[i])) || s[i] == ',' || s[i] == '.'); ++i)
      if (s[i] != ',') n += s[i];
    return std::stod(n);
  };
  ASSERT_GT(cost(one_node.summary), 0) << one_node.summary;
  EXPECT_NEAR(cost(spared.summary), 2 * cost(one_node.summary), 0.02 * cost(one_node.summary) + 1)
      << spared.summary << " vs " << one_node.summary;
}

TEST(SpareNodes, CapsJudgeEveryNode) {
  auto policy = load_policy(source("configs/policy.ini"));
  ASSERT_TRUE(policy) << policy.error().str();
  Policy capped = *policy.value();
  for (auto& part : capped.partitions) {
    auto& rule = part.rules[static_cast<int>(RuleId::max_job_gpu_hours)];
    rule.enabled = true, rule.threshold = 500, rule.action = Action::rewrite;
  }
  // One node for 48 h is 384 GPU-hours, under the cap; with a spare node the job holds 768.
  const Decision one_node = decide(nodes_job(1, 0), capped);
  EXPECT_FALSE(fired(one_node, "max_job_gpu_hours")) << one_node.message;
  const Decision spared = decide(nodes_job(2, 1), capped);
  EXPECT_TRUE(fired(spared, "max_job_gpu_hours")) << spared.message;
  ASSERT_EQ(spared.action, Action::rewrite) << spared.message;
  ASSERT_TRUE(spared.rewrite.time_limit_min);
  EXPECT_LE(16.0 * *spared.rewrite.time_limit_min / 60, 500 + 1e-9);
  EXPECT_FALSE(spared.rewrite.nodes);  // the spare stays
}

TEST(SpareNodes, JobWithoutIntentTellsTheTasksTheSpares) {
  JobRequest j = nodes_job(2, 1, "");
  j.time_limit_min = 1200;  // 8 training GPUs x 20 h: distributing is allowed
  const Decision d = decide(j, shipped());
  EXPECT_NE(d.action, Action::reject) << d.message;
  EXPECT_EQ(env(d, "SCALEGUARD_GPUS"), "8");
  EXPECT_EQ(env(d, "SCALEGUARD_NODES"), "1");
  EXPECT_EQ(env(d, "SCALEGUARD_SPARE_NODES"), "1");
  EXPECT_NE(d.summary.find("16 GPU(s) x 20 h = 320 GPU-hours"), std::string::npos) << d.summary;
  EXPECT_DOUBLE_EQ(d.granted_gpu_hours, 320.0);
}

TEST(SpareNodes, SparesThatLeaveNoNodeToTrainOnAreRefused) {
  for (int spares : {1, 2}) {
    const Decision d = decide(nodes_job(1, spares), shipped());
    EXPECT_EQ(d.action, Action::reject) << spares;
    EXPECT_TRUE(fired(d, "input"));
    EXPECT_NE(d.message.find("--train-spare-nodes"), std::string::npos) << d.message;
    EXPECT_NE(d.message.find("none to train on"), std::string::npos) << d.message;
    EXPECT_NE(d.message.find("--nodes=" + std::to_string(spares + 1)), std::string::npos) << d.message;
  }
  // 2 spares of 2 nodes, and spares without --nodes (Slurm may give one node).
  EXPECT_EQ(decide(nodes_job(2, 2), shipped()).action, Action::reject);
  JobRequest no_nodes;
  no_nodes.gpus_total = 16, no_nodes.time_limit_min = 60, no_nodes.model = "350M", no_nodes.spare_nodes = 1;
  const Decision d = decide(no_nodes, shipped());
  EXPECT_EQ(d.action, Action::reject);
  EXPECT_NE(d.message.find("none to train on"), std::string::npos) << d.message;
  // Out of range, whatever the nodes.
  EXPECT_EQ(decide(nodes_job(2, kMaxSpareNodes + 1), shipped()).action, Action::reject);
  EXPECT_EQ(decide(nodes_job(2, -1), shipped()).action, Action::reject);
}

TEST(SpareNodes, NoSparesIsTheRequestAsBefore) {
  JobRequest with_zero = nodes_job(2, 0);
  const Decision a = decide(with_zero, shipped());
  const Decision b = decide(nodes_job(2, 0), shipped());
  EXPECT_EQ(a.summary, b.summary);
  EXPECT_EQ(env(a, "SCALEGUARD_GPUS"), "16");
  EXPECT_EQ(env(a, "SCALEGUARD_NODES"), "2");
  EXPECT_EQ(env(a, "SCALEGUARD_SPARE_NODES"), "");
}
