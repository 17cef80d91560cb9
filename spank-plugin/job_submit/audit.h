// Every decision, for admins: one parseable info line in slurmctld's log, and (policy
// `audit_file`) one JSON object per line appended to the audit file, read by
// `scaleguard report --decisions` (docs/report.md has the fields).
#pragma once
#include <cstdint>
#include <string>

#include "scaleguard/decide.h"
#include "scaleguard/policy.h"

namespace sg_slurm {

struct AuditEntry {
  std::string id;         // decision id, also in the job's AdminComment record
  std::string event;      // "submit" or "update"
  std::string job;        // job id when known (updates), else ""
  uint32_t uid = 0;
  std::string partition;  // as requested
  std::string judged_partition;  // the job's partition(s) judged, when not `partition` (updates)
  int array_tasks = 1;
  const scaleguard::Decision* decision = nullptr;
  std::string changes;    // what a rewrite or bound changed
  std::string message;    // what the user was told (or would have been, in shadow mode)
  std::string budgets_json;  // budget findings (a JSON array, budget.cpp), "" when none
};

// A new decision id: "sg-<unix seconds>-<counter>".
std::string new_decision_id();
// Logs the decision's line and appends it to the policy's audit file (never fails the job:
// an unwritable audit file is logged as an error once a minute).
void record_decision(const scaleguard::Policy& policy, const AuditEntry& entry);

}  // namespace sg_slurm
