// The admin's policy (configs/policy.ini): rule thresholds and actions, partitions (instance
// type, capacity, fabric, time limits, per-partition rule overrides), checkpoint roots.
// Parsed once by load_policy(); immutable afterwards and shared via shared_ptr<const Policy>.
#pragma once
#include <array>
#include <string>
#include <vector>

#include "scaleguard/catalog.h"
#include "scaleguard/decide.h"
#include "scaleguard/plan.h"

namespace scaleguard {

// Every rule the policy knows, in the order of docs/policy.md's table (the order they are
// judged in: rule_order()).
enum class RuleId {
  one_gpu_type,                   // a job uses one GPU type, the partition's
  multi_node_fabric,              // multi-node jobs only on fabric efa or ib
  must_fit_memory,                // the plan must fit the requested GPUs
  distributed_min_gpu_hours,      // below this many GPU-hours one GPU is cheaper
  single_gpu_max_hours,           // fits one GPU and finishes within this: stay single
  consider_distributed_hours,     // a single-GPU job longer than this should distribute
  max_comm_ratio,                 // exposed comm / compute above this: cap the GPU count
  min_doubling_speedup,           // doubling the GPUs must speed up at least this much
  max_job_gpu_hours,              // upper bound on one job's GPU-hours (a het job's components summed)
  max_array_gpu_hours,            // upper bound on a job array's GPU-hours (elements x one element)
  checkpoint_required_gpu_hours,  // above this (and always on spot) a job must checkpoint
  time_limit_fits,                // the time limit must cover the predicted wall time
  count_
};
constexpr int kRuleCount = static_cast<int>(RuleId::count_);
const char* to_string(RuleId);
bool rule_has_threshold(RuleId);

struct Rule {
  double threshold = 0;
  Action action = Action::warn;
  bool enabled = true;
};
using Rules = std::array<Rule, kRuleCount>;

enum class Capacity { on_demand, spot };
enum class Fabric { efa, ib, ethernet, none };
const char* to_string(Capacity);
const char* to_string(Fabric);

struct Partition {
  std::string name;
  std::string instance;          // catalog instance type
  Capacity capacity = Capacity::on_demand;
  Fabric fabric = Fabric::efa;
  int default_time_min = 60;
  int max_time_min = 0;          // 0 = no maximum
  bool is_default = false;
  int max_nodes = 0;             // nodes Slurm may give one job here (the partition's size); 0 = unknown
  bool exclusive = false;        // OverSubscribe=EXCLUSIVE: every job gets whole nodes, all their GPUs
  bool shadow = false;           // mode = shadow here: judge and log, change nothing
  // topk_compression = auto | require | forbid (docs/policy.md): a plain data-parallel plan
  // here gets SCALEGUARD_COMPRESS=topk:0.01 (require) or =none (forbid), or a reason line
  // proposing it when the plan is communication-bound (auto).
  std::string topk_compression = "auto";
  Rules rules;                   // the global rules with this partition's overrides applied
  // Copies resolved from the catalog at load time (no pointers: a Policy may be copied).
  Instance inst;
  GpuType gpu;
};

struct Policy {
  std::string path;
  Catalog catalog;
  Rules rules;                              // global rules (before partition overrides)
  std::vector<Partition> partitions;
  std::vector<std::string> checkpoint_roots;
  double node_mtbf_hours = 0;               // from the policy, else the catalog's assumption
  int signal_before_s = 300;                // --signal=B:USR1@this when checkpointing is required
  int max_zero_stage = 3;                   // highest ZeRO stage plans may use: what the runner does
  int max_job_runs = 0;                     // runs of one batch job over its life (requeues + 1); 0 = no limit
  bool shadow = false;                      // mode = shadow: judge and log everything, change nothing
  std::vector<std::string> trusted_users;   // user names or uids whose job updates are not judged
  std::string audit_file;                   // JSON lines, one per decision (job_submit appends); "" = none
  // Probes (issue 16, docs/policy.md "Probes"): where `scaleguard probe` stores its
  // measurements, how old one may be, and what a probe job may cost.
  std::string probe_store;                  // absolute directory; "" = measurements are not used
  double probe_max_age_s = 30 * 86400.0;    // older records are ignored
  double probe_max_gpu_hours = 2;           // a --train-probe job's envelope at most this (0 = no absolute cap)
  double probe_max_fraction = 0.02;         // ... and at most this fraction of the training job's GPU-hours (0 = off)
  SharedGpuGres shared_gres{1, 100};        // shard:1 (a shard counts as a GPU), mps:100 (100% = a GPU)
  const Partition* find_partition(const std::string& name) const;  // nullptr if absent
  const Partition* default_partition() const;
};

// The order decide() judges the rules in (planner/src/rules/table.cpp; docs/policy.md,
// "Order of judgement", lists the same): a job without a training intent is judged on its
// request, a job with one on the plan for it. The names are rule ids, and two steps that
// judge rules together: "measured" (a probe's numbers judge max_comm_ratio and
// min_doubling_speedup) and "caps" (a job no cut brings under every cap is refused).
enum class Basis { request, plan };
std::vector<std::string> rule_order(Basis);

// The built-in defaults (the values from the cost literature; see docs/policy.md).
Rules default_rules();

// The hardware and goals a job gets in a partition: what decide() plans with, and what
// plan, compare and probe use under --policy (issue 37: one answer from every verb). Goals
// carry the rules' thresholds, max_zero_stage, max_nodes and max_time.
Hardware partition_hardware(const Policy&, const Partition&);
Goals partition_goals(const Policy&, const Partition&);
// Human-readable effective policy (`scaleguard policy check`).
std::string describe(const Policy&);

}  // namespace scaleguard
