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
  // Not empty: the sync met a queue line or accounting record it could not read that could
  // be charged to this budget (why, e.g. "sacct: job 12: ..."), so the numbers above may
  // be short. Readers must treat this budget as they treat a stale ledger (on_stale_ledger);
  // other budgets of the same ledger stay usable. Ledger key "unusable", absent when empty.
  std::string unusable;
  // A zoned budget (Period::zone): its period starts from the window's start on, as the tz
  // database gives them, far enough ahead to cover the ledger's max age and a period more.
  // slurmctld has no tz database: it rolls such a budget over from these, and judges it only
  // inside them (else on_stale_ledger). Ledger key "boundaries" ([[t, offset], ...]), absent
  // for other budgets.
  std::vector<Boundary> boundaries;
};

struct Ledger {
  std::int64_t snapshot = 0;  // unix seconds, taken before the queue was read
  std::int64_t snapshot_ms = 0;   // the same in milliseconds (what the Gate compares its records with)
  std::int64_t written = 0;   // when the sync finished
  std::map<std::string, LedgerEntry> entries;                       // by budget name
  std::map<std::string, std::string> default_account;               // user -> default account
  std::map<std::string, std::vector<std::string>> accounts;         // user -> accounts (associations)
  AccountTree account_parents;                                      // account -> parents (ledger "account_tree")
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
  double gpu_hours = 0;       // running: GPUs held x time left; pending: envelope GPUs x time limit
  std::string unreadable;     // not empty: the line could not be read (why); the names above as far as read
  std::string record;         // the scaleguard record id in its AdminComment ("" when none)
  double whole_gpu_hours = 0; // running: GPUs held x the whole time limit; pending: gpu_hours
};

// The squeue invocation the sync runs (arguments after "squeue") and the reader of one line
// of its output: false for a job budgets never count (not pending or running, or in no
// governed partition). A line that cannot be read and could be governed gives a QueuedJob
// with `unreadable` set (count it: UsageCounter marks the budgets it could touch).
// GPUs are the policy's (gres/gpu, shard and mps by shared_gpu_gres); a pending job is
// judged by the planner's envelope as job_submit judged it (GPUs Slurm derived from
// --ntasks-per-gpu included), and never less than the TRES Slurm holds for it.
std::vector<std::string> squeue_arguments();
bool read_squeue_line(const std::string& line, const Policy& policy, QueuedJob* out);
std::vector<QueuedJob> parse_squeue(const std::string& text, const Policy& policy);   // every line

// `sacctmgr -n -P show user format=User,DefaultAccount` / `show assoc format=User,Account`.
void parse_default_accounts(const std::string& text, Ledger* ledger);
void parse_associations(const std::string& text, Ledger* ledger);
// `sacctmgr -n -P show assoc format=Account,ParentName,User`: the account rows (no user) give
// each account its parent ("root" has none). Every account of the cluster gets an entry.
void parse_account_tree(const std::string& text, Ledger* ledger);
std::vector<std::string> account_tree_arguments();   // after "sacctmgr"

// Counts every budget at `snapshot` as records arrive (sacct's runs, squeue's jobs), in
// memory bounded by the number of budgets: used inside its window (carry-in from the
// previous one), committed and liens from the queue. Runs must cover every window counted
// (see earliest_start). unreadable(): a record that could not be read; every budget it could
// be charged to (an empty name could be any) is marked unusable in the ledger.
class UsageCounter {
 public:
  // `tree`: the account tree the sums follow (kept by the caller; nullptr: flat).
  UsageCounter(const Budgets& budgets, const Policy& policy, std::int64_t snapshot, const AccountTree* tree = nullptr);
  void add(const UsedRun& run);
  void add(const QueuedJob& job);
  void unreadable(const std::string& account, const std::string& user, const std::string& partition,
                  const std::string& why);
  void finish(Ledger* ledger) const;   // one entry per budget

 private:
  struct Sums {
    Window now, before;
    double used = 0, used_before = 0, committed = 0, liens = 0;
    int running = 0, pending = 0;
    std::string unusable;
  };
  const Budgets& budgets_;
  std::map<std::string, double> jobs_;   // Ledger::job_gpu_hours
  const Policy& policy_;
  std::int64_t snapshot_;
  const AccountTree* tree_ = nullptr;
  std::vector<Sums> sums_;
};
// All at once (tests, benchmarks).
// All at once (tests, benchmarks); the sums follow ledger->account_parents.
void count_budgets(const Budgets& budgets, const Policy& policy, const std::vector<UsedRun>& runs,
                   const std::vector<QueuedJob>& queue, std::int64_t snapshot, Ledger* ledger);
// The earliest time count_budgets needs runs from (previous periods for carry-over included).
std::int64_t earliest_start(const Budgets& budgets, std::int64_t snapshot);

}  // namespace scaleguard::budget
