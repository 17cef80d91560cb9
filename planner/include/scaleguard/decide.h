// The one decision every caller shares: `scaleguard decide`, job_submit/scaleguard and
// (for validation) the SPANK plugin. Same JobRequest + same Policy -> same Decision.
//
// CONTRACT between parts: the Slurm plugins code against the names in this file. The
// planner may add fields; renaming or removing one breaks spank-plugin/.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "scaleguard/result.h"

namespace scaleguard {

struct Catalog;  // hardware + prices + model presets (catalog.h)
struct Policy;   // thresholds, actions, partitions; owns its Catalog (policy.h)
struct Plan;     // the chosen layout and its predicted numbers (plan.h)

// A job as Slurm sees it, plus the user's training intent. 0 / empty = not given.
struct JobRequest {
  int gpus_total = 0;        // --gpus            (tres_per_job)
  int gpus_per_node = 0;     // --gres, --gpus-per-node (tres_per_node)
  int gpus_per_task = 0;     // --gpus-per-task   (tres_per_task)
  int gpus_per_socket = 0;   // --gpus-per-socket (tres_per_socket)
  std::string gpu_type;      // "a100" from gres:gpu:a100:8; empty = partition's type
  int nodes_min = 0;         // --nodes N or N-M
  int nodes_max = 0;
  int ntasks = 0;
  int time_limit_min = 0;    // 0 = unset (partition default applies), -1 = INFINITE
  std::string partition;     // empty = the policy's default partition
  std::string user;          // for messages and logs only
  // Intent from --train-* options (forwarded in the job's spank env).
  std::string model;             // raw spec: "350M", "llama2-7b", "layers=..,hidden=.."
  double tokens = 0;             // --train-tokens
  double single_gpu_hours = 0;   // --train-single-gpu-hours
  std::string strategy = "auto"; // auto|single|ddp|zero|pipeline|tensor|hybrid
  double deadline_hours = 0;     // --train-deadline (wall hours the user can wait)
  std::string ckpt_dir;          // --train-ckpt-dir
  int ckpt_interval_min = 0;     // --train-ckpt-interval; 0 = auto
  bool has_intent() const { return !model.empty() || tokens > 0 || single_gpu_hours > 0; }
};

enum class Action { accept, warn, rewrite, reject };
const char* to_string(Action);

// One policy rule that fired, with the numbers that made it fire.
struct RuleHit {
  std::string id;       // e.g. "distributed_min_gpu_hours"
  Action action;
  std::string detail;   // e.g. "job needs 88 GPU-hours < 100: one GPU is cheaper"
};

// Changes job_submit applies to the job on Action::rewrite. Unset = unchanged.
struct Rewrite {
  std::optional<int> gpus_total;
  std::optional<int> gpus_per_node;
  std::optional<int> nodes;
  std::optional<int> time_limit_min;
  std::optional<std::string> partition;
  bool requeue = false;        // turn on --requeue (checkpointing required)
  int signal_before_s = 0;     // > 0: --signal=B:USR1@this many seconds
  bool empty() const;
};

struct Decision {
  Action action = Action::accept;
  std::vector<RuleHit> rules;      // every rule that fired, in evaluation order
  std::string summary;             // one line, for the job comment and sbatch output
  std::string message;             // one paragraph a user understands (reason + what to ask)
  Rewrite rewrite;
  // SCALEGUARD_* variables that carry the plan to the tasks (STRATEGY, TP, PP, DP, ZERO,
  // MICRO_BATCH, GPUS, NODES, CKPT_DIR, CKPT_INTERVAL_S, PLAN). Values are plain tokens.
  std::vector<std::pair<std::string, std::string>> plan_env;
  std::string plan_json;           // the plan as JSON (same fields as `scaleguard plan --json`)
};

// Pure, deterministic, no I/O, no exceptions escape (noexcept: a bug yields a reject
// whose message says "internal error", never a crash inside slurmctld).
Decision decide(const JobRequest& job, const Policy& policy) noexcept;

// {action, rules[], summary, message, plan, rewrite{...}}
std::string to_json(const Decision&);

// Policy/catalog loading (file, line, key and a fix hint in every error).
Result<Catalog> load_catalog(const std::string& path);
// The policy names its catalog with `catalog = PATH` (relative to the policy file);
// catalog_override, when not empty, wins (plugstack `catalog=` argument).
Result<std::shared_ptr<const Policy>> load_policy(const std::string& path,
                                                  const std::string& catalog_override = "");

// Value parsers shared by the CLI and both plugins (bounded, locale-free, no exceptions).
Result<double> parse_count(const std::string& text);      // "40B", "1.5T", "350M", "1e9"
Result<double> parse_hours(const std::string& text);      // "11", "11h", "90m", "2d", "1-12:00:00"
Result<int> parse_slurm_minutes(const std::string& text); // Slurm --time forms -> minutes
Result<std::string> parse_strategy(const std::string& text);
// "gres:gpu:a100:8", "gres/gpu:8", "gpu:2", "gres:gpu" (=1), comma lists with other TRES.
struct GpuTres { int count = 0; std::string type; };
Result<GpuTres> parse_gpu_tres(const std::string& text);
// Validates a model spec against the catalog's presets without planning.
Result<std::string> validate_model_spec(const std::string& text, const Catalog& catalog);

}  // namespace scaleguard
