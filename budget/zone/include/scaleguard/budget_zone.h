// Budget periods in an IANA time zone (`timezone = Europe/Berlin`): days, weeks, months and
// quarters that start at the zone's wall-clock time, daylight saving included, worked out by
// the tz database (date/tz over /usr/share/zoneinfo). For the CLI and the sync only:
// slurmctld never links this and takes the boundaries from the ledger (LedgerEntry::boundaries).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "scaleguard/budget.h"
#include "scaleguard/result.h"

namespace scaleguard::budget {

// The window of a zoned period (Period::zone, not a range) containing t. Errors: a zone the
// tz database does not have.
Result<Window> zoned_window_at(const Period& period, std::int64_t t);
// Its period starts from the one of the period before the one containing `from` to the second
// after `to` (at most 1000), each with the zone's UTC offset there.
Result<std::vector<Boundary>> zoned_boundaries(const Period& period, std::int64_t from, std::int64_t to);
// A copy of `budgets` whose zoned periods carry those boundaries (Period::boundaries), so that
// window_at, previous_window and the counting work on them. Errors name the policy file, the
// budget's line and its zone.
Result<std::shared_ptr<const Budgets>> with_zone_boundaries(const Budgets& budgets, const std::string& policy_path,
                                                            std::int64_t from, std::int64_t to);

}  // namespace scaleguard::budget
