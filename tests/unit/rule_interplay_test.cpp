// Issue 25, classes 5 and 6: rules that would stop each other. Every cap is checked on the job
// as the other rules leave it, and a partition list carries every partition's changes.
#include <gtest/gtest.h>

#include "scaleguard/decide.h"
#include "scaleguard/policy.h"
#include "test_support.h"

using namespace scaleguard;
using namespace scaleguard::test;

namespace {

// The shipped policy; `edit` changes a partition's rules.
template <typename Edit>
std::shared_ptr<const Policy> policy_with(Edit edit) {
  auto loaded = load_policy(source("configs/policy.ini"));
  auto copy = std::make_shared<Policy>(*loaded.value());
  for (auto& part : copy->partitions) edit(part);
  return copy;
}

void set(Partition& p, RuleId id, double threshold, Action action) {
  p.rules[static_cast<int>(id)] = Rule{threshold, action, true};
}

bool rule_fired(const Decision& d, const std::string& id) {
  for (const auto& r : d.rules)
    if (r.id == id) return true;
  return false;
}

}  // namespace

// The shape: max_job_gpu_hours = 150 rewrite used to return before the array cap was
// looked at, so 1000 x 8 GPUs x 2 days was accepted (cut to 150 GPU-hours per element).
TEST(RuleInterplay, JobCapRewriteStillMeetsTheArrayCap) {
  auto p = policy_with([](Partition& part) {
    set(part, RuleId::max_job_gpu_hours, 150, Action::rewrite);
    set(part, RuleId::max_array_gpu_hours, 1000, Action::reject);
  });
  JobRequest j;
  j.gpus_per_node = 8, j.nodes_min = j.nodes_max = 1, j.time_limit_min = 2 * 1440, j.array_tasks = 1000;
  j.partition = "gpu-od";
  Decision d = decide(j, *p);
  EXPECT_EQ(d.action, Action::reject) << d.message;
  EXPECT_TRUE(rule_fired(d, "max_job_gpu_hours"));
  EXPECT_TRUE(rule_fired(d, "max_array_gpu_hours"));
  // Both caps cutting: the array cap's cut, the shorter, is the one applied.
  auto both = policy_with([](Partition& part) {
    set(part, RuleId::max_job_gpu_hours, 150, Action::rewrite);
    set(part, RuleId::max_array_gpu_hours, 8000, Action::rewrite);
  });
  j.array_tasks = 100;
  d = decide(j, *both);
  ASSERT_EQ(d.action, Action::rewrite) << d.message;
  ASSERT_TRUE(d.rewrite.time_limit_min);
  EXPECT_LE(8.0 * *d.rewrite.time_limit_min / 60 * 100, 8000.0);
  EXPECT_LE(8.0 * *d.rewrite.time_limit_min / 60, 150.0);
}

// A cut cannot go below a minute: an array too large for its cap even at one minute per
// element is refused, never accepted above the cap.
TEST(RuleInterplay, ArrayNoCutSatisfiesIsRefused) {
  auto p = policy_with([](Partition& part) {
    set(part, RuleId::max_array_gpu_hours, 100, Action::rewrite);
    part.rules[static_cast<int>(RuleId::distributed_min_gpu_hours)].enabled = false;
  });
  JobRequest j;
  j.gpus_per_node = 8, j.nodes_min = j.nodes_max = 1, j.time_limit_min = 60, j.array_tasks = 1000;
  j.partition = "gpu-od";
  Decision d = decide(j, *p);
  EXPECT_EQ(d.action, Action::reject) << d.message;
  EXPECT_TRUE(rule_fired(d, "caps"));
  // Small enough: cut, not refused (20 x 8 GPU-hours = 160 > 100: 37 min each).
  j.array_tasks = 20;
  d = decide(j, *p);
  EXPECT_EQ(d.action, Action::rewrite) << d.message;
}

// A warn cap only warns, also when another cap cuts.
TEST(RuleInterplay, WarnCapOnlyWarns) {
  auto p = policy_with([](Partition& part) {
    set(part, RuleId::max_job_gpu_hours, 150, Action::warn);
    set(part, RuleId::checkpoint_required_gpu_hours, 100, Action::warn);
  });
  JobRequest j;
  j.gpus_per_node = 8, j.nodes_min = j.nodes_max = 1, j.time_limit_min = 2 * 1440;
  j.partition = "gpu-od";
  EXPECT_EQ(decide(j, *p).action, Action::warn);
}

// Issue 25, class 6: a later partition's time cut and a spot partition's requeue + signal were
// dropped; whichever partition Slurm picks, its rules must hold.
TEST(RuleInterplay, PartitionListCarriesEveryPartitionsChanges) {
  auto p = policy_with([](Partition& part) {
    if (part.name == "gpu-spot") set(part, RuleId::max_job_gpu_hours, 50, Action::rewrite);
  });
  JobRequest j;
  j.gpus_total = 1, j.time_limit_min = 1440;  // 24 GPU-hours: accepted on gpu-od as it is
  j.partition = "gpu-od,gpu-spot";
  JobRequest od = j;
  od.partition = "gpu-od";
  ASSERT_EQ(decide(od, *p).action, Action::accept);
  Decision d = decide(j, *p);
  ASSERT_EQ(d.action, Action::rewrite) << d.message;
  EXPECT_TRUE(d.rewrite.requeue);                          // spot: checkpoint and requeue
  EXPECT_EQ(d.rewrite.signal_before_s, p->signal_before_s);
  EXPECT_FALSE(d.rewrite.partition);                       // both partitions kept
  // A later partition's time cut: 4 GPUs x 24 h = 96 GPU-hours > 50 on gpu-spot.
  j.gpus_total = 4;
  j.partition = "gpu-od,gpu-spot";
  auto cut = policy_with([](Partition& part) {
    if (part.name == "gpu-spot") set(part, RuleId::max_job_gpu_hours, 50, Action::rewrite);
    set(part, RuleId::distributed_min_gpu_hours, 100, Action::warn);
  });
  d = decide(j, *cut);
  ASSERT_EQ(d.action, Action::rewrite) << d.message;
  ASSERT_TRUE(d.rewrite.time_limit_min);
  EXPECT_LE(4.0 * *d.rewrite.time_limit_min / 60, 50.0);
  EXPECT_TRUE(d.rewrite.requeue);
}

// Without a time limit each partition judges its own default: one partition's cut must not
// give the job more time than another judged it at.
TEST(RuleInterplay, PartitionListCutNeverExceedsAnotherPartitionsDefault) {
  auto p = policy_with([](Partition& part) {
    if (part.name == "gpu-od") part.default_time_min = 60;
    if (part.name == "gpu-spot") {
      part.default_time_min = 7 * 1440;
      set(part, RuleId::max_job_gpu_hours, 50, Action::rewrite);
    }
  });
  JobRequest j;
  j.gpus_total = 1;  // no time limit: 1 h on gpu-od, 7 days (cut to 50 h) on gpu-spot
  j.partition = "gpu-od,gpu-spot";
  Decision d = decide(j, *p);
  ASSERT_EQ(d.action, Action::rewrite) << d.message;
  ASSERT_TRUE(d.rewrite.time_limit_min);
  EXPECT_LE(*d.rewrite.time_limit_min, 60);
  EXPECT_TRUE(d.rewrite.requeue);
}

// A rewrite that moves the job to the same GPUs on a fast fabric (multi_node_fabric's twin)
// is judged in the twin too: its caps hold there.
TEST(RuleInterplay, TwinPartitionIsJudgedAfterTheMove) {
  auto make = [](Action twin_cap) {
    auto loaded = load_policy(source("configs/policy.ini"));
    auto copy = std::make_shared<Policy>(*loaded.value());
    Partition tcp = *copy->find_partition("gpu-od");
    tcp.name = "gpu-tcp";
    tcp.fabric = Fabric::ethernet;
    tcp.is_default = false;
    copy->partitions.push_back(tcp);
    for (auto& part : copy->partitions) {
      part.rules[static_cast<int>(RuleId::distributed_min_gpu_hours)].enabled = false;
      set(part, RuleId::multi_node_fabric, 0, Action::rewrite);
      if (part.name == "gpu-od") set(part, RuleId::max_job_gpu_hours, 50, twin_cap);
    }
    return std::shared_ptr<const Policy>(copy);
  };
  JobRequest j;
  j.gpus_per_node = 8, j.nodes_min = j.nodes_max = 2, j.time_limit_min = 5 * 60;  // 80 GPU-hours
  j.partition = "gpu-tcp";
  Decision d = decide(j, *make(Action::reject));
  EXPECT_EQ(d.action, Action::reject) << d.message;  // moved to gpu-od, where 80 > 50 is refused
  d = decide(j, *make(Action::rewrite));
  ASSERT_EQ(d.action, Action::rewrite) << d.message;
  EXPECT_EQ(d.rewrite.partition.value_or(""), "gpu-od");
  ASSERT_TRUE(d.rewrite.time_limit_min);
  EXPECT_LE(16.0 * *d.rewrite.time_limit_min / 60, 50.0);
}

// Issue 25, class 10: Alternate= partitions. Slurm moves a job to its partition's alternate
// while the partition is drained, after job_submit: the alternate's rules must hold too, a
// refusing alternate refuses the job, and the alternate never lands in the list written back.
TEST(RuleInterplay, AlternatePartitionsAreJudgedNeverWrittenBack) {
  auto p = policy_with([](Partition& part) {
    if (part.name == "gpu-spot") set(part, RuleId::max_job_gpu_hours, 10, Action::reject);
    if (part.name == "gpu-h100") set(part, RuleId::max_job_gpu_hours, 2, Action::reject);
  });
  JobRequest j;
  j.gpus_total = 1, j.time_limit_min = 1440;  // 24 GPU-hours: accepted on gpu-od alone
  j.partition = "gpu-od";
  ASSERT_EQ(decide(j, *p).action, Action::accept) << decide(j, *p).message;
  j.alternate_partitions = {"gpu-spot"};
  Decision d = decide(j, *p);
  ASSERT_EQ(d.action, Action::reject) << d.message;
  EXPECT_NE(d.message.find("Alternate=gpu-spot"), std::string::npos) << d.message;
  // The default partition (gpu-od) stands for a job that names none.
  j.partition.clear();
  EXPECT_EQ(decide(j, *p).action, Action::reject);
  // An accepting alternate whose rules change the job: its changes are carried (spot: requeue
  // and the warning signal), and the partition is not rewritten.
  j.time_limit_min = 300, j.partition = "gpu-od";
  d = decide(j, *p);
  ASSERT_EQ(d.action, Action::rewrite) << d.message;
  EXPECT_TRUE(d.rewrite.requeue);
  EXPECT_FALSE(d.rewrite.partition);
  // The job's own list keeps what it asked for (one refusing is left out), never the alternate.
  j.partition = "gpu-od,gpu-h100";
  d = decide(j, *p);
  ASSERT_EQ(d.action, Action::rewrite) << d.message;
  ASSERT_TRUE(d.rewrite.partition);
  EXPECT_EQ(*d.rewrite.partition, "gpu-od");
  // Only the alternate accepts: Slurm reaches it only from a partition that refused: refused.
  j.partition = "gpu-h100";
  d = decide(j, *p);
  EXPECT_EQ(d.action, Action::reject) << d.message;
}
