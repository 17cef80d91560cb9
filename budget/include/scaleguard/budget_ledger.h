// The budget ledger: what each budget has used in its period and what running and pending
// jobs hold, as `scaleguard budget sync` counted it from Slurm (sacct for usage, squeue for
// the queue) at one moment. job_submit/scaleguard reads it (a plugin thread, outside
// slurmctld's locks) and adds what it accepted since that moment.
// Pure: the sync command runs sacct/squeue/sacctmgr and hands their text here.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "scaleguard/budget.h"
#include "scaleguard/result.h"

namespace scaleguard::budget {

struct LedgerEntry {
  std::string identity;       // Budget::identity() of the budget counted
  Window window;              // the period counted
  double used = 0;            // in the budget's unit: runs inside the window, up to the snapshot
  double committed = 0;       // running jobs: GPUs x the time their limits still allow
  double liens = 0;           // pending jobs: the envelope (most GPUs x time limit), every element
  double carry_in = 0;        // unused budget of the previous period carried in
  int running = 0, pending = 0;
  double burn_per_hour = 0;   // used / hours elapsed in the window (the forecast's rate)
};

struct Ledger {
  std::int64_t snapshot = 0;  // unix seconds, taken before the queue was read
  std::int64_t snapshot_ms = 0;   // the same in milliseconds (what the Gate compares its records with)
  std::int64_t written = 0;   // when the sync finished
  std::map<std::string, LedgerEntry> entries;                       // by budget name
  std::map<std::string, std::string> default_account;               // user -> default account
  std::map<std::string, std::vector<std::string>> accounts;         // user -> accounts (associations)
  std::vector<std::string> notes;                                   // what the sync skipped
  // What the queue holds per job, by the scaleguard record id in its AdminComment ("[sg=ID;"):
  // pending, the envelope; running, GPUs x its whole time limit; an array's elements summed.
  // An update is charged against this, not against the job's record, which only grows
  // (issue 36, class 2: lower, sync, raise).
  std::map<std::string, double> job_gpu_hours;
};

// JSON text (one object; format 1). parse_ledger is bounded and never throws.
std::string format_ledger(const Ledger& ledger);
Result<Ledger> parse_ledger(const std::string& text);

// --- counting -----------------------------------------------------------------------------

// One run of a job from accounting (sacct record), times in unix seconds.
struct UsedRun {
  std::string job_id, account, user, partition;
  int gpus = 0;
  std::int64_t start = -1;    // -1: never started
  std::int64_t end = -1;      // -1: still running (counted up to the snapshot)
};

// One job, array element or het component slurmctld holds now (squeue -r).
struct QueuedJob {
  std::string job_id, account, user, partition;
  bool running = false;       // else pending
  double gpu_hours = 0;       // running: GPUs x time left; pending: envelope GPUs x time limit
};

// The squeue invocation the sync runs (arguments after "squeue") and the parser of its output.
// Jobs in partitions the policy does not govern are left out (budgets count governed
// partitions only); lines that do not parse are skipped and named in *notes.
std::vector<std::string> squeue_arguments();
std::vector<QueuedJob> parse_squeue(const std::string& text, const Policy& policy, std::vector<std::string>* notes);

// `sacctmgr -n -P show user format=User,DefaultAccount` / `show assoc format=User,Account`.
void parse_default_accounts(const std::string& text, Ledger* ledger);
void parse_associations(const std::string& text, Ledger* ledger);

// Counts every budget at `snapshot`: used inside its window (carry-in from the previous one),
// committed and liens from the queue. Runs must cover every window counted (see earliest_start).
void count_budgets(const Budgets& budgets, const Policy& policy, const std::vector<UsedRun>& runs,
                   const std::vector<QueuedJob>& queue, std::int64_t snapshot, Ledger* ledger);
// The earliest time count_budgets needs runs from (previous periods for carry-over included).
std::int64_t earliest_start(const Budgets& budgets, std::int64_t snapshot);

}  // namespace scaleguard::budget
