// one_gpu_type: a job uses one GPU type, the partition's (mixed types straggle).
#include "judge.h"

namespace scaleguard::rules {

void one_gpu_type(Judge& j) {
  const std::string& type = j.job.gpu_type;
  if (type.empty() || !j.on(RuleId::one_gpu_type)) return;
  if (type.find(',') != std::string::npos)
    j.fire(RuleId::one_gpu_type, "the job mixes GPU types " + type + ": stragglers make mixed jobs slow");
  else if (!j.part.gpu.matches(type))
    j.fire(RuleId::one_gpu_type, "partition " + j.part.name + " has " + j.part.gpu.name + " GPUs, not '" + type + "'");
}

}  // namespace scaleguard::rules
