// Budgets: GPU-hours or dollars per account, per user, or per user within an account, each
// per period (day, week, month, quarter with its own start, or a fixed date range), from the
// policy file's [budgets] and [budget NAME] sections (docs/policy.md, "Budgets").
// Pure C++17 on top of the planner: no Slurm headers, no I/O but reading the policy file.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "scaleguard/policy.h"
#include "scaleguard/result.h"

namespace scaleguard::budget {

enum class Unit { gpu_hours, usd };
enum class Cycle { day, week, month, quarter, range };
// What a threshold does to a job that would pass it (ordered by strength).
enum class Act { warn, move, reject };
const char* to_string(Unit);
const char* to_string(Cycle);
const char* to_string(Act);

struct Threshold {
  double percent = 100;     // of the period's budget (limit + carry-in)
  Act act = Act::reject;
  std::string partition;    // Act::move: where jobs go instead
};

// A period boundary of a zoned budget: the UTC instant and the zone's UTC offset there (what
// messages write it in).
struct Boundary {
  std::int64_t t = 0;
  int offset_s = 0;
  bool operator==(const Boundary& o) const { return t == o.t && offset_s == o.offset_s; }
};

// Periods are [start, end) in unix seconds. Calendar periods (month, quarter) fall on the
// anchor's day of the month and time of day read at a fixed UTC offset (no daylight saving),
// or, with a time zone (`zone`), at that zone's wall-clock time, daylight saving included.
struct Period {
  Cycle cycle = Cycle::month;
  std::int64_t anchor = 0;      // a period starts here (range: the range's start); zoned: the
                                // wall-clock time in `zone`, counted like unix seconds
  int utc_offset_s = 0;         // the offset the anchor was written with
  std::int64_t range_end = 0;   // Cycle::range: the range's end (exclusive)
  // An IANA time zone ("Europe/Berlin"; "" = the fixed utc_offset_s): days, weeks, months and
  // quarters start at its wall-clock time. Its boundaries come from the tz database, which
  // only the CLI and the sync link (budget/zone: with_zone_boundaries); slurmctld takes them
  // from the ledger. window_at answers a zoned period only inside `boundaries`.
  std::string zone;
  std::vector<Boundary> boundaries;   // zoned: period starts, ascending
};

struct Window {
  std::int64_t start = 0, end = 0;
  bool contains(std::int64_t t) const { return t >= start && t < end; }
  bool known() const { return end > start; }   // a zoned period outside its boundaries: {0, 0}
};

// The period containing t (a range: the range itself, which may not contain t; a zoned period
// without boundaries around t: {0, 0}).
Window window_at(const Period& period, std::int64_t t);
// The window of a boundary list containing t ({0, 0} outside it), and the offsets its start
// and end are written in.
Window window_in(const std::vector<Boundary>& boundaries, std::int64_t t, int* start_offset_s = nullptr,
                 int* end_offset_s = nullptr);
// The UTC offset to write a boundary `t` of the period in (zoned: the zone's offset there, 0
// when `t` is not one of its boundaries).
int offset_at(const Period& period, std::int64_t t);
// The period after / before `w` (a range has none: `w` itself).
Window next_window(const Period& period, const Window& w);
Window previous_window(const Period& period, const Window& w);
// Whether the budget counts at t: always for a cycle, inside the range for a range.
bool in_force(const Period& period, std::int64_t t);

struct Budget {
  std::string name;
  std::string account, user;        // "" = any; both = the user's jobs under the account
  Unit unit = Unit::gpu_hours;
  double limit = 0;                 // per period, in `unit`
  Period period;
  double carry_over = 0;            // at most this fraction of the limit carries into the next period
  double grace = 0;                 // reject and move thresholds are raised by this fraction
  std::vector<Threshold> thresholds;  // ascending percent
  bool shadow = false;              // judged and logged, never acted on
  std::vector<std::string> partitions;  // counted partitions; empty = every partition of the policy
  int line = 0;                     // the section header's line, for messages
  // "account ml", "user alice", "user alice in account ml"
  std::string scope() const;
  // What a ledger entry's numbers depend on (scope, unit, period, partitions): a ledger counted
  // under another definition is not used for this budget. Kept by load_budgets.
  std::string identity() const;
  std::string identity_text;
  bool counts(const std::string& partition) const;   // a comma list: any of them
};

struct Settings {
  std::string ledger;               // absolute path of the ledger `scaleguard budget sync` writes
  std::int64_t max_age_s = 900;     // an older ledger is stale
  bool fail_open = false;           // unusable ledger: accept (true) or refuse (false) jobs under budgets
  std::string timezone;             // the budgets' time zone unless a budget names its own ("" = UTC)
};

// Slurm's account tree as its associations nest (`sacctmgr show assoc`): account -> parent
// accounts (one per cluster; more only when clusters disagree). Read by `budget sync`, kept in
// the ledger, so slurmctld knows it without asking slurmdbd. Empty: unknown (no sub-accounts).
using AccountTree = std::map<std::string, std::vector<std::string>>;
// `account` and every account above it (a malformed tree with a cycle stops; at most 64).
std::vector<std::string> enclosing_accounts(const AccountTree* tree, const std::string& account);

struct Budgets {
  Settings settings;
  std::vector<Budget> list;
  // The budgets counting a job of `user` (a name) charged to `account`, in policy order: an
  // account's budgets count the jobs of its sub-accounts too (`tree`; none: flat).
  std::vector<int> applying(const std::string& account, const std::string& user,
                            const AccountTree* tree = nullptr) const;
  // Filled by load_budgets: budget indices by account, by user, by "account\x1fuser".
  std::unordered_map<std::string, std::vector<int>> by_account, by_user, by_pair;
  int find(const std::string& name) const;   // index, -1 when absent
};

// Reads [budgets] and every [budget NAME] of the policy file (load_policy has read the rest
// and must have succeeded: partitions and prices come from it). Errors carry file and line.
Result<std::shared_ptr<const Budgets>> load_budgets(const std::string& policy_path, const Policy& policy);

// For `scaleguard policy check`: every budget with its scope, limit, period in force at `now`,
// thresholds and mode; the ledger settings. "" when the policy has no budgets.
std::string describe(const Budgets& budgets, std::int64_t now);

// $ per GPU-hour in a partition (instance price / GPUs, spot or on demand); of a comma list,
// the dearest the policy knows; -1 when it knows none.
double usd_per_gpu_hour(const Policy& policy, const std::string& partitions);
// What `gpu_hours` in `partitions` cost in the budget's unit (dollars at the dearest counted
// partition); 0 when the budget does not count them.
double amount(const Budget& budget, const Policy& policy, double gpu_hours, const std::string& partitions);

// Times as budgets write them: "2026-12-01", "2026-12-01T08:00[:00]", UTC unless followed by
// "Z" or "+HH:MM"/"-HH:MM". *offset_s gets the offset written (0 for UTC).
Result<std::int64_t> parse_instant(const std::string& text, int* offset_s = nullptr);
std::string format_instant(std::int64_t unix_s, int offset_s = 0);   // "2026-12-01T00:00:00Z"
// Whether a time as budgets write it names its offset ("Z", "+01:00"): a bare time is UTC, or
// in a zoned budget the zone's wall-clock time.
bool names_offset(const std::string& text);
// A time zone as `timezone` takes it: an IANA name's shape (letters, digits, '_', '+', '-'
// between '/', at most 64). Whether the tz database has it is checked where it is read
// (budget/zone). "UTC" and "Etc/UTC" are the fixed offset 0: *zone gets "".
bool zone_name(const std::string& text, std::string* zone);
// "12.50 GPU-hours" or "$1,234.56"
std::string format_amount(Unit unit, double value);
std::string format_number(double value);   // "12.50" ("0.0042" below 1)

}  // namespace scaleguard::budget
