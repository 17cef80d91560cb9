// Prices and flag thresholds for the report, taken from the admin's policy so the report
// charges what the planner predicts: one GPU-hour = instance $/h / GPUs per node, at the
// spot or on-demand price by the partition's capacity.
#include "scaleguard/policy.h"
#include "scaleguard/report.h"

namespace scaleguard::report {

Options options_from_policy(const Policy& policy) {
  Options options;
  for (const auto& p : policy.partitions) {
    if (p.inst.gpus <= 0) continue;   // a CPU partition costs no GPU-hours
    const bool spot = p.capacity == Capacity::spot;
    options.prices[p.name] = {p.inst.name, spot,
                              (spot ? p.inst.spot : p.inst.on_demand) / p.inst.gpus};
  }
  const Rule& comm = policy.rules[static_cast<int>(RuleId::max_comm_ratio)];
  if (comm.enabled) options.max_comm_ratio = comm.threshold;
  const Rule& small = policy.rules[static_cast<int>(RuleId::distributed_min_gpu_hours)];
  if (small.enabled) options.distributed_min_gpu_hours = small.threshold;
  return options;
}

}  // namespace scaleguard::report
