// `scaleguard report --decisions FILE`: what job_submit/scaleguard refused, rewrote and warned
// about, from its decision log (JSON Lines, one object per decision; format in
// docs/report.md, "The decision log").
//
// Pure C++: the CLI opens the file and hands its stream here. Reading is bounded and never
// throws on bad input: a line that is not a decision (not JSON, a field of the wrong type, an
// unknown action, longer than kMaxDecisionLine) is skipped and counted, with its line number.
// Times are UTC: the log's "ts" ("2026-12-03T17:50:00Z") as seconds since 1970-01-01T00:00:00Z.
#pragma once
#include <cstdint>
#include <istream>
#include <map>
#include <string>
#include <vector>

#include "scaleguard/result.h"

namespace scaleguard {
struct Policy;
}

namespace scaleguard::report {

// Longer lines are skipped unread (a message is at most a few KiB).
constexpr std::size_t kMaxDecisionLine = 64 * 1024;

// One line of the decision log.
struct AuditRecord {
  int line = 0;                  // line in the file, for messages
  std::int64_t ts = 0;           // UTC seconds
  std::string id;                // "sg-1733248200-42"; the job's AdminComment names it [sg=ID]
  std::string event;             // "submit" | "update"
  std::string job;               // job id when known ("" for most submissions)
  std::int64_t uid = -1;         // -1 = not given
  std::string user;              // "" = not resolved
  std::string partition;
  bool shadow = false;           // mode "shadow" or enforced false: only logged, not enforced
  std::string action;            // accept | warn | rewrite | reject
  std::vector<std::string> rules;
  double judged_gpu_hours = 0;   // the envelope judged: the most Slurm may grant
  double granted_gpu_hours = 0;  // after the decision (0 for reject)
  double avoided_gpu_hours = 0;  // judged - granted, >= 0
  std::string changes;           // what a rewrite changed
  std::string message;           // the user-facing text
};

// "2026-12-03T17:50:00Z" (also with fractional seconds, or "+HH:MM" instead of Z) -> UTC s.
Result<std::int64_t> parse_utc_time(const std::string& text);
std::string format_utc_time(std::int64_t utc_seconds);   // "2026-12-03T17:50:00Z"

// One line -> record; the Error's message says why the line is not a decision.
Result<AuditRecord> parse_decision_line(const std::string& line);

// Counts of decisions and the GPU-hours they kept from being granted.
struct DecisionCounts {
  int decisions = 0;             // every action, accept included
  int accepted = 0, warned = 0, rewritten = 0, refused = 0;
  double judged_gpu_hours = 0;   // sum of the envelopes judged
  double avoided_gpu_hours = 0;  // sum of avoided_gpu_hours (refusals and rewrites)
  double avoided_usd = 0;        // the same at each decision's partition price (when priced)
};

// The decisions of one mode: enforced, or shadow (logged only: "would have ...").
struct DecisionGroups {
  DecisionCounts total;
  // Groups hold only decisions that were not plain accepts. A decision that fired several
  // rules counts once under each of them; one that fired none counts under "(none)".
  std::map<std::string, DecisionCounts> by_rule, by_user, by_partition;
};

struct SkippedLine {
  int line = 0;
  std::string reason;
};

struct DecisionOptions {
  std::int64_t since = -1, until = -1;   // UTC; -1 = open end. since <= ts < until.
  std::size_t largest = 10;              // how many of the largest refusals/rewrites to keep
  // $ per GPU-hour by partition (the policy's prices): avoided GPU-hours become dollars.
  // Empty: the report has no dollars. A decision on a partition not here counts $0.
  std::map<std::string, double> usd_per_gpu_hour;
};

struct DecisionReport {
  std::int64_t since = -1, until = -1;   // effective window (the data's span where open)
  int lines = 0;                         // non-blank lines read
  int outside_window = 0;                // decisions skipped for their time
  int skipped = 0;                       // lines that are not decisions
  std::vector<SkippedLine> first_skipped;   // the first few of them
  DecisionGroups enforced, shadow;
  // The refusals and rewrites that avoided the most GPU-hours, largest first (both modes).
  std::vector<AuditRecord> largest;
  bool priced = false;                   // usd_per_gpu_hour was given
  std::vector<std::string> unpriced;     // partitions with avoided GPU-hours but no price
};

// Reads the whole stream line by line (memory bounded by the groups, not the file).
DecisionReport summarize_decisions(std::istream& in, const DecisionOptions& options);
// $ per GPU-hour of each GPU partition in the policy (as options_from_policy prices them), and
// under "(default)" (what the log says when a job named no partition) the default partition's.
std::map<std::string, double> decision_prices(const Policy& policy);
DecisionReport summarize_decisions(const std::string& text, const DecisionOptions& options);

std::string render_decisions_text(const DecisionReport& report);
std::string render_decisions_csv(const DecisionReport& report);
std::string render_decisions_html(const DecisionReport& report);   // self-contained
std::string render_decisions_json(const DecisionReport& report);

}  // namespace scaleguard::report
