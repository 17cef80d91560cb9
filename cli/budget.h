// The budget ledger as the CLI reads it, shared by `scaleguard budget` and `report --budgets`.
#pragma once
#include <memory>
#include <string>

#include "scaleguard/budget.h"
#include "scaleguard/budget_ledger.h"
#include "scaleguard/policy.h"
#include "scaleguard/report_budgets.h"

namespace scaleguard::cli {

struct BudgetSetup {
  std::shared_ptr<const Policy> policy;
  std::shared_ptr<const budget::Budgets> budgets;
  std::string ledger_path;   // --ledger, else the policy's
};
// Loads the policy and its budgets; throws Failure (subprocess.h) with the file and line.
BudgetSetup load_budget_setup(const std::string& policy_path, const std::string& catalog_path,
                              const std::string& ledger_override);
// Reads and parses the ledger; throws Failure naming the file.
budget::Ledger read_ledger(const std::string& path);
// One report line per budget (in policy order) whose index is listed, from the ledger at `now`.
report::BudgetReport budget_report(const BudgetSetup& setup, const budget::Ledger& ledger, std::int64_t now);

}  // namespace scaleguard::cli
