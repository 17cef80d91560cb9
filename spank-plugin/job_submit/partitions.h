// The partitions a job is judged in, as one list from the job to decide() (issue 41): the
// names it asks for, read once (request.cpp), or every governed partition Slurm has for
// --reservation without --partition; then the Alternate= chain Slurm may move it along. The
// list travels as vectors and becomes JobRequest's fields in one place (into_request): the
// names asked for its `partition`, the alternates its `alternate_partitions`, which decide()
// judges and never writes back.
#pragma once
#include <string>
#include <vector>

#include "scaleguard/decide.h"
#include "scaleguard/policy.h"
#include "slurm_api.h"

namespace sg_slurm {

struct JudgedPartitions {
  std::vector<std::string> asked;       // each once, in order; empty: the policy's default partition
  std::vector<std::string> alternates;  // the Alternate= chain of those asked for: judged, never written
  bool every_governed = false;          // --reservation without --partition: `asked` is every governed one
};

// A submission: `asked` is the job's --partition list as read_request read it.
JudgedPartitions submission_partitions(const job_desc_msg_t& job, const scaleguard::Policy& policy,
                                       std::vector<std::string> asked);

// The Alternate= chain of `asked` (the default partition when empty), in slurmctld's order
// (job_mgr.c, _alt_part_test), without the partitions asked for; none outside slurmctld.
std::vector<std::string> alternates_of(const scaleguard::Policy& policy, std::vector<std::string> asked);

// The names of a list as the record keeps it (`p=a,b`): empty names skipped.
std::vector<std::string> listed_partitions(const std::string& list);

// The request decide() reads: `partition` the names asked for, comma-joined (the one join),
// `alternate_partitions` the chain.
void into_request(const JudgedPartitions& partitions, scaleguard::JobRequest* request);

}  // namespace sg_slurm
