// The partitions a job is judged in (partitions.h): one list, as vectors, from the job to
// the JobRequest decide() reads.

#include "partitions.h"

#include <algorithm>
#include <cstring>

#include "scaleguard/text.h"
#include "slurm_shim.h"

namespace sg_slurm {

namespace {

constexpr size_t kMaxListed = 32;  // decide()'s bound on a partition list

// --reservation without --partition (issue 25, class 10): slurmctld takes the reservation's
// partition after job_submit (job_mgr.c, _get_job_parts), which a plugin cannot see. The job is
// judged as a list of every governed partition Slurm has: whichever it picks, that partition's
// rules held, and one that refuses is left out of the list the job is rewritten to.
std::vector<std::string> every_governed(const scaleguard::Policy& policy) {
  std::vector<std::string> names;
  for (const auto& p : policy.partitions) {
    std::string name = p.name;  // find_part_record takes a char*, and does not keep it
    if (find_part_record && !find_part_record(name.data())) continue;  // not in this cluster
    if (names.size() == kMaxListed) break;
    names.push_back(p.name);
  }
  return names;
}

}  // namespace

JudgedPartitions submission_partitions(const job_desc_msg_t& job, const scaleguard::Policy& policy,
                                       std::vector<std::string> asked) {
  JudgedPartitions p;
  p.asked = std::move(asked);
  if (p.asked.empty() && job.reservation && *job.reservation) {
    p.asked = every_governed(policy);
    p.every_governed = !p.asked.empty();
  }
  p.alternates = alternates_of(policy, p.asked);
  return p;
}

// Partitions' Alternate= (issue 25, class 10): while a partition is drained or inactive,
// slurmctld sends a job submitted to it to its alternate, and on along the chain, after
// job_submit. decide() judges the chain with the list.
std::vector<std::string> alternates_of(const scaleguard::Policy& policy, std::vector<std::string> asked) {
  std::vector<std::string> alternates;
  if (!find_part_record) return alternates;
  if (asked.empty()) {
    const scaleguard::Partition* def = policy.default_partition();
    if (!def) return alternates;
    asked.push_back(def->name);
  }
  std::vector<std::string>& names = asked;  // grows along the chain
  for (size_t i = 0; i < names.size() && names.size() <= kMaxListed; ++i) {
    std::string name = names[i];  // find_part_record takes a char*, and does not keep it
    const char* alternate = sg_shim::partition_alternate(find_part_record(name.data()));
    const std::string alt(alternate, strnlen(alternate, 256));
    if (alt.empty() || std::find(names.begin(), names.end(), alt) != names.end()) continue;
    names.push_back(alt), alternates.push_back(alt);
  }
  return alternates;
}

std::vector<std::string> listed_partitions(const std::string& list) {
  std::vector<std::string> names;
  for (auto& n : scaleguard::text::split(list, ','))
    if (!n.empty()) names.push_back(std::move(n));
  return names;
}

void into_request(const JudgedPartitions& partitions, scaleguard::JobRequest* request) {
  request->partition = scaleguard::text::join(partitions.asked, ",");
  request->alternate_partitions = partitions.alternates;
}

}  // namespace sg_slurm
