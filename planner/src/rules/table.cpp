// The rule table: the order decide() judges a job in. docs/policy.md ("Order of judgement")
// lists the same, and tests/unit/rule_table_test.cpp holds the two together. Each rule judges
// the job as the rules above it left it (a cut GPU count, the plan kept), and the first
// suggestion of each kind ("Ask for instead") wins, so the most fundamental rules come first.
#include "judge.h"

namespace scaleguard {
namespace rules {

namespace {

// A job without a training intent: judged on what it asks for, GPUs x time limit.
constexpr Unit kOnRequest[] = {
    {"one_gpu_type", one_gpu_type},
    {"multi_node_fabric", multi_node_fabric_request},
    {"distributed_min_gpu_hours", distributed_min_gpu_hours_request},
    {"max_job_gpu_hours", max_job_gpu_hours},
    {"max_array_gpu_hours", max_array_gpu_hours},
    {"caps", caps},
    {"checkpoint_required_gpu_hours", checkpoint_required_gpu_hours_request},
};

// A job with one (--train-model and tokens or hours): judged on the plan for it. The plan
// starts as the best on the GPUs asked for; the rules may cut it.
constexpr Unit kOnPlan[] = {
    {"one_gpu_type", one_gpu_type},
    {"must_fit_memory", must_fit_memory},
    {"distributed_min_gpu_hours", distributed_min_gpu_hours_plan},
    {"single_gpu_max_hours", single_gpu_max_hours},
    {"consider_distributed_hours", consider_distributed_hours},
    {"measured", measured},
    {"max_comm_ratio", max_comm_ratio},
    {"min_doubling_speedup", min_doubling_speedup},
    {"multi_node_fabric", multi_node_fabric_plan},
    {"checkpoint_required_gpu_hours", checkpoint_required_gpu_hours_plan},
    {"time_limit_fits", time_limit_fits},
    {"max_job_gpu_hours", max_job_gpu_hours},
    {"max_array_gpu_hours", max_array_gpu_hours},
    {"caps", caps},
};

template <int N>
constexpr Table table_of(const Unit (&units)[N]) {
  return Table{units, N};
}

}  // namespace

Table table(Basis basis) { return basis == Basis::request ? table_of(kOnRequest) : table_of(kOnPlan); }

}  // namespace rules

std::vector<std::string> rule_order(Basis basis) {
  const rules::Table t = rules::table(basis);
  std::vector<std::string> names;
  for (int i = 0; i < t.count; ++i) names.emplace_back(t.units[i].name);
  return names;
}

}  // namespace scaleguard
