// Budgets inside slurmctld (issue 28; docs/admin-guide.md, "Budgets"). The policy's budgets
// and the ledger `scaleguard budget sync` writes are read by a thread of this plugin that
// never holds slurmctld's locks (one stat a second; a changed file is read, checked and parsed
// there). job_submit and job_modify only ask budget/'s Gate, in memory: no I/O, no network,
// no database under slurmctld's locks.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "policy.h"
#include "scaleguard/metrics_budgets.h"
#include "scaleguard/decide.h"
#include "slurm_api.h"

namespace sg_slurm {

// Loads the budgets (a broken [budget] section fails init, like a broken policy), reads the
// ledger once and starts the ledger thread (which also picks up budgets a reloaded policy adds).
scaleguard::Result<bool> start_budgets(PolicyHolder* policies);
void stop_budgets();

struct BudgetResult {
  std::uint64_t ticket = 0;   // the charge recorded for an accepted job (0: none)
  std::string audit_json;     // the findings for the audit line ("" when none)
};

// A submission the policy accepted (or rewrote): judged against every budget that counts it.
// May turn *decision into a refusal, move the job to another partition (decide() again
// there, with *request changed to match), or add a warning for the user.
// `record_id`: the id of the record written into the job (what the ledger will know it by).
BudgetResult judge_submission_budgets(const job_desc_msg_t& job, uint32_t uid, const scaleguard::Policy& policy,
                                      const std::string& record_id, scaleguard::JobRequest* request,
                                      scaleguard::Decision* decision);

// An accepted update of a job judged at `before`: what it adds must fit. `job_ptr` gives the
// job's account; `update` a new one. It is charged against what the budgets hold for the job
// now, found by `prior_record` (the record id the job carries); `record_id` is the one written
// after it. Returns the refusal for the user ("" when it fits).
std::string judge_update_budgets(const job_desc_msg_t& update, void* job_ptr, uint32_t uid,
                                 const std::string& prior_record, const std::string& record_id,
                                 const scaleguard::Policy& policy, const scaleguard::JobRequest& before,
                                 const scaleguard::JobRequest& after, const scaleguard::Decision& decision,
                                 std::string* audit_json);

// Takes back the charge of a het job's earlier component (a later one was refused).
void retract_budget_charge(std::uint64_t ticket);

// A new run of a job judged at `request` (a requeue; spank-plugin/job_submit/prep.cpp): the
// run must fit its budgets whole (budget_admit.h, Charge::rerun). `account`: the job's;
// `requeued_ms`: when it went back to the queue (its submit time). Returns the refusal for the
// user ("" when it fits, or when no budget governs it); an accepted run is recorded.
// Called from the rerun checker's thread (no slurmctld lock held); the policy in force is used.
std::string judge_rerun_budgets(uint32_t uid, const std::string& account, const std::string& record_id,
                                std::int64_t requeued_ms, const scaleguard::JobRequest& request,
                                std::string* audit_json);
// Whether any budget is in force (the rerun checker does nothing without).
bool budgets_configured();

// For the metrics thread (metrics.cpp): every budget's standing as admission sees it at `now`,
// and the ledger's state (empty without budgets).
std::vector<scaleguard::metrics::BudgetGauge> budget_gauges(std::int64_t now, scaleguard::metrics::LedgerGauge* ledger);

}  // namespace sg_slurm
