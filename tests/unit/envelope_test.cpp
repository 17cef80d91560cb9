// The envelope: every request shape judged at the most Slurm may grant, and bounded in the
// job where Slurm could otherwise grant more. Each case was a way past max_job_gpu_hours.
#include <gtest/gtest.h>

#include "scaleguard/decide.h"
#include "scaleguard/envelope.h"
#include "scaleguard/policy.h"
#include "test_support.h"

using namespace scaleguard;
using namespace scaleguard::test;

namespace {

// The shipped policy with max_job_gpu_hours = 150 reject, as an admin tightens it.
const Policy& tight() {
  static std::shared_ptr<const Policy> p = [] {
    auto loaded = load_policy(source("configs/policy.ini"));
    auto copy = std::make_shared<Policy>(*loaded.value());
    for (auto* rules : {&copy->rules})
      (*rules)[static_cast<int>(RuleId::max_job_gpu_hours)] = Rule{150, Action::reject, true};
    for (auto& part : copy->partitions) {
      part.rules[static_cast<int>(RuleId::max_job_gpu_hours)] = Rule{150, Action::reject, true};
      part.rules[static_cast<int>(RuleId::max_array_gpu_hours)] = Rule{150, Action::reject, true};
      part.rules[static_cast<int>(RuleId::distributed_min_gpu_hours)].enabled = false;
      part.rules[static_cast<int>(RuleId::single_gpu_max_hours)].enabled = false;
      part.rules[static_cast<int>(RuleId::checkpoint_required_gpu_hours)].enabled = false;
    }
    return copy;
  }();
  return *p;
}

const Partition& od() { return *tight().find_partition("gpu-od"); }

bool capped(const Decision& d) {
  for (const auto& r : d.rules)
    if (r.id == "max_job_gpu_hours" || r.id == "max_array_gpu_hours") return true;
  return false;
}

JobRequest hours(int minutes) {
  JobRequest j;
  j.time_limit_min = minutes;
  return j;
}

}  // namespace

TEST(Envelope, NodeRangeIsJudgedAtItsMaximum) {
  JobRequest j = hours(10 * 60);
  j.gpus_per_node = 8, j.nodes_min = 1, j.nodes_max = 4;
  Partition open = od();
  open.max_nodes = 0;  // the partition's size unknown to the policy
  Envelope e = envelope_of(j, open);
  EXPECT_EQ(e.nodes, 4);
  EXPECT_EQ(e.gpus, 32);
  EXPECT_EQ(envelope_of(j, od()).gpus, 16);  // the dev partition has 2 nodes (max_nodes = 2)
  Decision d = decide(j, tight());  // 16 x 10 h = 160 > 150; judged at 1 node it was 80
  EXPECT_EQ(d.action, Action::reject);
  EXPECT_TRUE(capped(d));
  EXPECT_NE(d.message.find("up to 2 nodes (1-4)"), std::string::npos) << d.message;
}

TEST(Envelope, TasksWithoutNodesSpreadOnePerNodeAndAreBounded) {
  JobRequest j = hours(60);
  j.gpus_per_node = 8, j.ntasks = 4;  // Slurm may place the 4 tasks on 4 nodes: 32 GPUs
  Partition open = od();
  open.max_nodes = 0;
  Envelope e = envelope_of(j, open);
  EXPECT_EQ(e.gpus, 32);
  ASSERT_TRUE(e.bound_max_nodes);
  EXPECT_EQ(*e.bound_max_nodes, 4);
  // The partition's size, when the policy knows it, bounds the spread.
  const Partition& two = od();  // max_nodes = 2
  EXPECT_EQ(envelope_of(j, two).gpus, 16);
  EXPECT_EQ(*envelope_of(j, two).bound_max_nodes, 2);
}

// Found by the property soak's released sample on 25.11: -n16 --gpus=1 -t4-14:12 (judged 1 GPU,
// 110 GPU-hours) ran on both 8-CPU nodes with gpu:1 on each, 220 GPU-hours.
TEST(Envelope, PerJobGpusGiveEveryNodeOfTheJobAtLeastOne) {
  JobRequest j = hours(110 * 60);
  j.gpus_total = 1, j.ntasks = 16;
  Envelope e = envelope_of(j, od());  // the tasks may spread over both nodes
  EXPECT_EQ(e.gpus, 2);
  EXPECT_EQ(e.gpus_per_node, 1);
  Decision d = decide(j, tight());  // 2 x 110 h = 220 > 150
  EXPECT_EQ(d.action, Action::reject);
  EXPECT_TRUE(capped(d));
  EXPECT_NE(d.message.find("at least one GPU"), std::string::npos) << d.message;
  // On one node, or with as many GPUs as nodes, nothing changes.
  j.nodes_min = j.nodes_max = 1;
  EXPECT_EQ(envelope_of(j, od()).gpus, 1);
  JobRequest eight = hours(60);
  eight.gpus_total = 8, eight.ntasks = 2;
  EXPECT_EQ(envelope_of(eight, od()).gpus, 8);
}

TEST(Envelope, GpusPerTaskTimesTasksFromNodesTimesTasksPerNode) {
  JobRequest j = hours(60);
  j.gpus_per_task = 1, j.nodes_min = j.nodes_max = 2, j.ntasks_per_node = 8;
  EXPECT_EQ(envelope_of(j, od()).gpus, 16);  // judged as 1 GPU before
}

TEST(Envelope, TasksPerNodeOutweighMinusN) {
  // Slurm 23.11 ran -N2 --ntasks-per-node=8 -n1 --gpus-per-task=1 with 8 GPUs (the live
  // property test's oracle escape): judged as 8 tasks on each of up to 2 nodes, not 1 task.
  JobRequest j = hours(60);
  j.gpus_per_task = 1, j.nodes_min = j.nodes_max = 2, j.ntasks_per_node = 8, j.ntasks = 1;
  EXPECT_EQ(envelope_of(j, od()).gpus, 16);
  // A larger -n still counts.
  j.ntasks_per_node = 1, j.ntasks = 4, j.nodes_min = j.nodes_max = 1;
  EXPECT_EQ(envelope_of(j, od()).gpus, 4);
}

TEST(Envelope, GpusPerSocketIsAllGpusOfTheNodeWhateverTheSocketCount) {
  JobRequest j = hours(60);
  j.gpus_per_socket = 1, j.nodes_min = j.nodes_max = 2;
  EXPECT_EQ(envelope_of(j, od()).gpus, 16);
  // --sockets-per-node is a minimum: the property test's escape (Slurm gave 2 GPUs per node to
  // --gpus-per-socket=1 --sockets-per-node=1 -c2 on nodes of one-core sockets).
  j.sockets_per_node = 1;
  EXPECT_EQ(envelope_of(j, od()).gpus, 16);
}

TEST(Envelope, NodeListCountsEveryNamedNode) {
  JobRequest j = hours(60);
  j.gpus_per_node = 8, j.nodes_listed = count_hostlist("gpu-st-p4d-[1-2]").value();
  EXPECT_EQ(envelope_of(j, od()).gpus, 16);
}

TEST(Envelope, ExclusiveWithoutGpusGetsEveryGpuOfItsNodes) {
  JobRequest j = hours(20 * 60);
  j.exclusive = true, j.nodes_min = j.nodes_max = 1;
  Envelope e = envelope_of(j, od());
  EXPECT_EQ(e.gpus, 8);
  Decision d = decide(j, tight());  // 8 x 20 h = 160 > 150; it was "no GPUs requested"
  EXPECT_EQ(d.action, Action::reject);
  EXPECT_NE(d.message.find("--exclusive"), std::string::npos) << d.message;
  // So does a partition that allocates whole nodes.
  Partition whole = od();
  whole.exclusive = true;
  j.exclusive = false;
  EXPECT_EQ(envelope_of(j, whole).gpus, 8);
}

TEST(Envelope, NoTimeLimitIsTheDefaultAndWrittenIntoTheJob) {
  JobRequest j = hours(0);
  j.gpus_total = 8;
  Envelope e = envelope_of(j, od());
  EXPECT_EQ(e.time_limit_min, od().default_time_min);
  ASSERT_TRUE(e.bound_time_min);
  Decision d = decide(j, tight());
  ASSERT_TRUE(d.bound_time_min);
  EXPECT_EQ(*d.bound_time_min, od().default_time_min);
}

TEST(Envelope, UnlimitedIsThePartitionMaximumOrRefused) {
  JobRequest j = hours(-1);
  j.gpus_total = 1;
  Envelope e = envelope_of(j, od());
  EXPECT_EQ(e.time_limit_min, od().max_time_min);  // 7 days: 168 GPU-hours > 150
  EXPECT_EQ(decide(j, tight()).action, Action::reject);
  Partition open = od();
  open.max_time_min = 0;
  EXPECT_EQ(envelope_of(j, open).time_limit_min, 0);
}

TEST(Envelope, IntentNeverLoosensTheCap) {
  JobRequest j = hours(3 * 24 * 60);
  j.gpus_total = 16, j.model = "7B", j.tokens = 1e9;  // the plan predicts ~1 h; the job may run 3 days
  Decision d = decide(j, tight());
  EXPECT_TRUE(capped(d)) << d.message;
  EXPECT_EQ(d.action, Action::reject);
}

TEST(Envelope, PartitionListKeepsOnlyThePartitionsThatAccept) {
  Policy p = tight();
  for (auto& part : p.partitions)
    if (part.name == "gpu-spot") part.rules[static_cast<int>(RuleId::max_job_gpu_hours)].threshold = 1000;
  JobRequest j = hours(10 * 60);
  j.gpus_total = 16;
  j.partition = "gpu-spot,gpu-od";
  Decision d = decide(j, p);
  EXPECT_EQ(d.action, Action::rewrite);
  EXPECT_EQ(d.rewrite.partition.value_or(""), "gpu-spot");
  j.partition = "gpu-od,gpu-od";
  EXPECT_EQ(decide(j, p).action, Action::reject);
}

TEST(Envelope, HetComponentsAreSummed) {
  JobRequest j = hours(5 * 60);
  j.gpus_total = 16;  // 80 GPU-hours alone: fine
  j.het_component = 1, j.het_prior_gpu_hours = 80;
  Decision d = decide(j, tight());
  EXPECT_EQ(d.action, Action::reject);
  EXPECT_NE(d.message.find("het job"), std::string::npos) << d.message;
}

TEST(Envelope, ArraysHaveTheirOwnCap) {
  JobRequest j = hours(60);
  j.gpus_total = 8, j.array_tasks = 100;  // 8 GPU-hours each, 800 in all
  Decision d = decide(j, tight());
  EXPECT_EQ(d.action, Action::reject);
  ASSERT_FALSE(d.rules.empty());
  EXPECT_EQ(d.rules.back().id, "max_array_gpu_hours");
}

TEST(Envelope, CountsReadTheWaySlurmReadsThem) {
  EXPECT_EQ(parse_gpu_tres("gres:gpu:1k").value().count, 1024);
  EXPECT_EQ(parse_gpu_tres("gres/gpu:a100:2k").value().count, 2048);
  EXPECT_EQ(parse_gpu_tres("gpu:1x").value().type, "1x");  // a type, as Slurm reads it
  EXPECT_FALSE(parse_gpu_tres("gpu:+8").ok());
  EXPECT_FALSE(parse_gpu_tres("gpu:-2").ok());              // strtoull would wrap it
  EXPECT_FALSE(parse_gpu_tres("gpu:99999999999999").ok());
  EXPECT_EQ(parse_gpu_tres("gres:shard:3", SharedGpuGres{1, 100}).value().count, 3);
  EXPECT_EQ(parse_gpu_tres("gres/mps:150", SharedGpuGres{1, 100}).value().count, 2);
  EXPECT_EQ(parse_gpu_tres("gres:shard:3").value().count, 0);  // not GPUs unless the policy says so
  JobRequest j = hours(60);
  j.gpus_per_node = 100000, j.nodes_min = j.nodes_max = 100000;  // no overflow on the product
  EXPECT_EQ(decide(j, tight()).action, Action::reject);
}

TEST(Envelope, HostListsAndArrayIndices) {
  EXPECT_EQ(count_hostlist("a,b").value(), 2);
  EXPECT_EQ(count_hostlist("n[1-4,7]").value(), 5);
  EXPECT_EQ(count_hostlist("r[1-2]-n[01-08],x").value(), 17);
  EXPECT_FALSE(count_hostlist("n[1-").ok());
  EXPECT_FALSE(count_hostlist("n[4-1]").ok());
  EXPECT_FALSE(count_hostlist("n[1-999999999]").ok());
  EXPECT_EQ(count_array_tasks("0-15").value(), 16);
  EXPECT_EQ(count_array_tasks("0-99%10").value(), 100);
  EXPECT_EQ(count_array_tasks("1,3,5-11:2").value(), 6);
  EXPECT_FALSE(count_array_tasks("5-1").ok());
  EXPECT_FALSE(count_array_tasks("").ok());
  EXPECT_FALSE(count_array_tasks("0-99999999").ok());
}

TEST(Envelope, PartitionListsAreReadWholeOnceEachOrRefused) {
  // Issue 36, class 7: 60 x "free," then a governed name past byte 256 must still be judged.
  std::string list;
  for (int i = 0; i < 60; ++i) list += "free,";
  list += "gpu-od";
  auto names = partition_names(list);
  ASSERT_TRUE(names.ok()) << names.error().str();
  EXPECT_EQ(*names, (std::vector<std::string>{"free", "gpu-od"}));
  EXPECT_EQ(*partition_names("a,,b,"), (std::vector<std::string>{"a", "b"}));   // Slurm skips empty names
  EXPECT_FALSE(partition_names("a,b\nc").ok());
  EXPECT_FALSE(partition_names(std::string(kMaxPartitionList + 1, 'x')).ok());
}
