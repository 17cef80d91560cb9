// Prices and flag thresholds for the report, taken from the admin's policy so the report
// charges what the planner predicts: one GPU-hour = instance $/h / GPUs per node, at the
// spot or on-demand price by the partition's capacity.
#include "scaleguard/policy.h"
#include "scaleguard/report.h"
#include "scaleguard/report_decisions.h"

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

std::map<std::string, double> decision_prices(const Policy& policy) {
  std::map<std::string, double> prices;
  for (const auto& [name, price] : options_from_policy(policy).prices) prices[name] = price.usd_per_gpu_hour;
  if (const Partition* d = policy.default_partition(); d && prices.count(d->name)) prices["(default)"] = prices[d->name];
  return prices;
}

}  // namespace scaleguard::report
