// The envelope: the most Slurm may grant a job in one partition (nodes, GPUs, time), from
// every way a job can ask (node ranges, node lists, tasks x GPUs per task, GPUs per socket,
// --exclusive, shared GPU GRES, no or an UNLIMITED time limit). decide() judges this, and
// the bounds it returns are written into the job so that Slurm cannot grant more.
// Pure: no I/O. docs/admin-guide.md "What is enforced" lists each request shape.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "scaleguard/decide.h"
#include "scaleguard/policy.h"
#include "scaleguard/result.h"

namespace scaleguard {

Envelope envelope_of(const JobRequest& job, const Partition& part);

// Names in a Slurm host list ("a,b,node[1-4,7],rack[1-2]-n[01-08]"), duplicates included;
// at most 1,000,000. Malformed lists are errors (Slurm refuses them too).
Result<int> count_hostlist(const std::string& list);
// Elements of a job array index ("0-15", "1,3,5-11:2", "0-99%10"); at most 10,000,000.
Result<int> count_array_tasks(const std::string& index);
// The partitions of a --partition list, each once, in order ("a,b,a" -> a, b). Read whole or
// refused, never cut: Slurm may start the job in any partition named, so a list cut before a
// governed name would escape its rules (issue 36, class 7). At most kMaxPartitionList bytes,
// no control characters; empty names skipped as Slurm skips them.
constexpr std::size_t kMaxPartitionList = 65536;
Result<std::vector<std::string>> partition_names(const std::string& list);

}  // namespace scaleguard
