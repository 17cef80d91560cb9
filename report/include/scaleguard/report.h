// `scaleguard report`: GPU-hours, cost and waste from Slurm accounting (sacct --parsable2).
//
// Pure C++: the CLI runs sacct (or reads a saved file) and hands the text here; parsing,
// aggregation and rendering need no Slurm. Times are the naive local timestamps sacct prints
// ("2026-12-01T10:00:00"), kept as "civil seconds" (seconds since 1970-01-01T00:00:00 of the
// same wall clock, no time zone), so calendar days and windows match what sacct shows.
// The rules (GPU-hours, prices, waste, flags) are documented in docs/report.md.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "scaleguard/decide.h"
#include "scaleguard/result.h"

namespace scaleguard {
struct Policy;
}

namespace scaleguard::report {

// The columns `scaleguard report` asks sacct for (all exist in Slurm 22.05). No column a user
// writes is asked for: Slurm 22.05 lets a job name or Comment hold any byte (the delimiter,
// newlines), which could forge whole records. AdminComment is written by job_submit/scaleguard
// (control characters stripped) and operators only.
extern const char* const kSacctFormat;  // "JobID,User,...,AdminComment"
// What `scaleguard report` asks for: kSacctFormat with TRESUsageInAve before AdminComment
// (its steps' gres/gpuutil: the GPU utilisation accounting recorded, where it does).
extern const char* const kSacctReportFormat;
// The field delimiter asked for (sacct --parsable2 --delimiter=): the ASCII unit separator,
// which AdminComment's " | " does not contain.
extern const char kSacctDelimiter;

// scaleguard-run's exit code for "stopped by SIGUSR1/SIGTERM after writing a checkpoint"
// (runner/src/config/exit_codes.h); scripts/sbatch/train.sbatch requeues the job on it.
constexpr int kExitStoppedAfterCheckpoint = 85;

// "YYYY-MM-DDTHH:MM:SS" (also "YYYY-MM-DD", "YYYY-MM-DDTHH:MM") -> civil seconds.
Result<std::int64_t> parse_time(const std::string& text);
std::string format_time(std::int64_t civil_seconds);   // "YYYY-MM-DDTHH:MM:SS"
std::string format_day(std::int64_t civil_seconds);    // "YYYY-MM-DD"

// One sacct record: one run of a job (with -D a requeued job has one record per run).
struct Run {
  int line = 0;                 // line in the sacct text, for messages
  std::string job_id;           // "123", "123_4" (array task), "123+1" (het job)
  std::string user, account, partition;   // no job name: users write any bytes there
  std::string state;            // first word: "CANCELLED by 0" -> "CANCELLED"
  std::int64_t start = -1;      // civil seconds; -1 = never started (None, or no allocation)
  std::int64_t end = -1;        // -1 = Unknown (still running)
  std::int64_t elapsed_s = 0;   // ElapsedRaw
  int gpus = 0;                 // gres/gpu in AllocTRES
  int gpus_requested = 0;       // gres/gpu in ReqTRES
  int nodes = 0;
  std::string exit_code;        // "0:0", "1:0", "0:15"
  std::string node_list;
  // AdminComment: where job_submit/scaleguard records the plan (users cannot change it).
  // A Comment column, if a saved file has one, is not read: users write what they like there.
  std::string admin_comment;
  // A step of this run exited with kExitStoppedAfterCheckpoint: the run's work is in a
  // checkpoint (seen only in sacct output with steps, i.e. without -X).
  bool checkpointed_stop = false;
  // GPU utilisation (%) Slurm accounting recorded for this run: the highest gres/gpuutil in
  // its steps' TRESUsageInAve (the step doing the work; the batch shell and the extern step
  // idle beside it). -1 = not recorded (no such column or TRES: AccountingStorageTRES lacks
  // gres/gpuutil, or no GPU plugin such as gpu/nvml measured it).
  double gpu_util = -1;
};

// Records parse_sacct skipped as malformed (wrong field count, bad numbers or times).
struct SacctSkips {
  int count = 0;                         // records skipped (a multi-line one counts once)
  std::vector<std::string> first_lines;  // the first five: "12" or "12-14"
  std::string first_reason;              // "line 12: has 2 fields, header has 15 (...)"
  // A user-written column (JobName, Comment) the file has (never read; "" when none): a file
  // saved with one may hold records forged by a job name that no parser can tell from real ones.
  std::string user_text_column;
  // "skipped N malformed sacct records (first at lines 3, 7-9; line 3: ...)"; "" when none.
  std::string message() const;
};

// Parses `sacct --parsable2` text with its header line (columns are found by name, so any
// order works; the delimiter is kSacctDelimiter if the header has it, else '|'). A missing or
// unusable header is an Error. A record is skipped and counted in *skips, never fatal, when
// its field count is not the header's (only in a '|' file whose single free-text column is
// the last one is a '|' in that text joined back) or a value is bad. In a file with a JobName
// or Comment column a short line is taken for the head of a record whose text holds newlines:
// it and every line up to its tail (the next short line that completes the field count) are
// skipped as one record, so a name's "\n<record>\n" forges nothing. JobName and Comment are
// never read. Step records ("123.batch", "123.0") are not runs: they only set
// checkpointed_stop on the run they follow.
// GPUs are counted by `shared` (the policy's shared_gpu_gres; the default is the policy's
// default, shard:1, mps:100): gres/gpu, gres/shard and gres/mps in AllocTRES and ReqTRES.
Result<std::vector<Run>> parse_sacct(const std::string& text, const std::string& source,
                                     SacctSkips* skips = nullptr, const SharedGpuGres& shared = {1, 100});

// Where each column is in a header (-1 = absent); count = the header's fields.
struct SacctColumns {
  std::size_t count = 0;
  int job = -1, name = -1, user = -1, account = -1, partition = -1, state = -1, start = -1, end = -1,
      elapsed = -1, alloc = -1, req = -1, nodes = -1, exit = -1, nodelist = -1, admin_comment = -1,
      comment = -1, tres_usage_ave = -1;
};

// sacct output read one line at a time, for any volume in bounded memory (the budget sync):
// the header first, then each record line alone. Only for output without a column users
// write (JobName, Comment: their text may hold newlines), which header() refuses; every
// record is then exactly one line. Records are read as parse_sacct reads them.
class SacctLines {
 public:
  explicit SacctLines(const SharedGpuGres& shared = {1, 100}) : shared_(shared) {}
  Result<bool> header(const std::string& line);
  // The run on `line`; nothing for a step record or a blank line; an Error saying why when
  // the line cannot be read, with *partial given the JobID, User, Account and Partition as
  // far as the line has them (what the record could be charged to).
  Result<std::optional<Run>> record(const std::string& line, Run* partial = nullptr);

 private:
  SharedGpuGres shared_;
  SacctColumns cols_;
  char delim_ = '|';
};

// What job_submit/scaleguard wrote into the job's AdminComment: decide()'s one-line summary
// and the decision id, "scaleguard: ACTION[ [rules]]: STRATEGY gpus=N nodes=N ... comm=R
// ckpt=Ns [sg=ID]", possibly after an admin's own text and " | " (the action and strategy as
// bare words, the rest key=value; comm may be a ratio or "35%", ckpt "1800", "1800s", "30m").
// The last "scaleguard:" in the text is read (a later decision, e.g. on a job update, is
// appended after an earlier one). Unknown tokens are ignored; a text without "scaleguard:"
// leaves present=false. Callers pass the AdminComment only, never the user's Comment.
struct PlanNote {
  bool present = false;
  std::string action;           // accept|warn|rewrite|reject when given
  std::string strategy;
  int gpus = 0;                 // GPUs the plan uses usefully; 0 = not given
  double comm_ratio = -1;       // communication not hidden / compute; < 0 = not given
  std::int64_t ckpt_interval_s = 0;  // 0 = no checkpoint interval known
  std::string decision_id;      // "sg-1733248200-42" from "[sg=ID]" or "[sg=ID;record...]":
                                // the decision log's id
};
PlanNote parse_plan_note(const std::string& admin_comment);

// Price of one GPU-hour on a partition (instance $/h / GPUs per node, spot or on-demand).
struct PartitionPrice {
  std::string instance;
  bool spot = false;
  double usd_per_gpu_hour = 0;
};

struct Options {
  std::int64_t since = -1;      // window; -1 = open end (no clipping)
  std::int64_t until = -1;
  std::map<std::string, PartitionPrice> prices;   // by partition name
  double max_comm_ratio = 0.2;              // flag plans whose comm ratio exceeds this
  double distributed_min_gpu_hours = 100;   // flag multi-GPU jobs that used less than this
  double min_gpu_util = 50;                 // flag jobs whose GPUs were busy less than this (%)
};

// Prices of every GPU partition in the policy and its max_comm_ratio and
// distributed_min_gpu_hours thresholds (the defaults above when a rule is disabled).
Options options_from_policy(const Policy& policy);

struct Usage {
  int jobs = 0;                 // distinct job ids
  int runs = 0;                 // sacct records (a requeued job has several)
  double gpu_hours = 0;
  double wasted_gpu_hours = 0;
  double cost_usd = 0;
  double wasted_usd = 0;
};

struct JobSummary {
  std::string job_id, user, account, partition;
  std::string state;            // state of the job's last run
  int runs = 0, gpus = 0;
  double gpu_hours = 0, wasted_gpu_hours = 0, cost_usd = 0, wasted_usd = 0;
  std::vector<std::string> flags;   // e.g. "low_gpu_efficiency: 8 GPUs at 12% utilisation (accounting)"
  // GPU utilisation (%): from accounting (gres/gpuutil, GPU-hour weighted over the runs that
  // have it), else the plan's estimate (GPUs the plan uses / GPUs allocated); -1 = neither.
  double gpu_util = -1;
  std::string gpu_util_source;      // "accounting" | "plan estimate" | ""
};

struct Report {
  std::int64_t since = -1, until = -1;        // effective window (data span when open)
  Usage total;
  std::map<std::string, Usage> by_user, by_account, by_partition;
  std::map<std::string, Usage> by_state;      // by the state each run ended in
  std::map<std::int64_t, Usage> by_day;       // key: civil seconds of 00:00 that day
  std::vector<JobSummary> jobs;               // in order of first appearance
  std::vector<std::string> notes;             // e.g. partitions without a price
};

// Aggregates runs over the window. Runs outside the window and jobs that never started are
// dropped; runs crossing an edge count with the part of their elapsed time inside it.
Report build_report(const std::vector<Run>& runs, const Options& options);

std::string render_text(const Report& report);
std::string render_csv(const Report& report);
std::string render_html(const Report& report);   // self-contained: inline CSS and SVG
std::string render_json(const Report& report);   // the numbers unrounded, for scripts

}  // namespace scaleguard::report
