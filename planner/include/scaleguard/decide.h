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

#include "scaleguard/measurement.h"
#include "scaleguard/result.h"

namespace scaleguard {

struct Catalog;  // hardware + prices + model presets (catalog.h)
struct Policy;   // thresholds, actions, partitions; owns its Catalog (policy.h)
struct Plan;     // the chosen layout and its predicted numbers (plan.h)

// --train-eval-every's largest value (steps), as `scaleguard plan --eval-every` takes it.
inline constexpr int kMaxEvalEvery = 1 << 30;
// --train-spare-nodes' largest value (nodes), as the SPANK option and job_submit take it.
inline constexpr int kMaxSpareNodes = 1024;

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
  std::string partition;     // empty = the policy's default partition; a comma list = any of them
  int nodes_listed = 0;      // -w/--nodelist: nodes named (Slurm allocates at least these)
  int ntasks_per_node = 0;   // --ntasks-per-node
  int sockets_per_node = 0;  // --sockets-per-node
  bool exclusive = false;    // --exclusive: whole nodes, every GPU of each node
  int array_tasks = 0;       // --array: number of elements (0 = not an array)
  int het_component = -1;    // het job: this component's offset (-1 = not a het job)
  double het_prior_gpu_hours = 0;  // het job: envelope GPU-hours of the components before this one
  std::string user;          // for messages and logs only
  // Checkpointing as the job holds it (job_submit reads them; decide() does not use them).
  bool requeue = false;           // --requeue
  int checkpoint_signal_s = 0;    // --signal=B:USR1@N: N seconds (0 = no such signal)
  // Intent from --train-* options (forwarded in the job's spank env).
  std::string model;             // raw spec: "350M", "llama2-7b", "layers=..,hidden=.."
  double tokens = 0;             // --train-tokens
  double single_gpu_hours = 0;   // --train-single-gpu-hours
  std::string strategy = "auto"; // auto|single|ddp|zero|pipeline|tensor|hybrid
  double deadline_hours = 0;     // --train-deadline (wall hours the user can wait)
  std::string ckpt_dir;          // --train-ckpt-dir
  int ckpt_interval_min = 0;     // --train-ckpt-interval; 0 = auto
  bool probe = false;            // --train-probe: a probe job, judged against the probe budget only
  // Probe store records of this model the caller read (the CLI, job_submit; decide() does no
  // I/O), each with the trust its file's owner earned. decide() keeps those of the partition's
  // instance type, fingerprint and age (policy probe_max_age).
  std::vector<Measurement> measurements;
  long long now = 0;             // unix seconds for probe_max_age; 0 = records are not aged
  // Last, so that positional initializers keep their meaning.
  int ntasks_per_gpu = 0;        // --ntasks-per-gpu without a GPU request: Slurm derives the GPUs (job_submit)
  // Partitions Slurm may move the job to after job_submit: the Alternate= chain of those asked
  // for (slurmctld's _alt_part_test, while a partition is drained). Judged with the list; one
  // that refuses refuses the job (no rewrite can keep Slurm out of it); never written back.
  std::vector<std::string> alternate_partitions;
  // --train-eval-every / --train-eval-tokens: a forward pass over eval_tokens every
  // eval_interval steps, counted in the job's hours (Workload::eval_interval). 0 = none.
  double eval_interval = 0;
  double eval_tokens = 0;
  // --train-spare-nodes: whole nodes of the allocation kept idle for in-job restarts (issue 38).
  // The training is planned on the other nodes; the caps and budgets charge every node. Not an
  // intent of its own: a job without --train-model is judged on its request as before.
  int spare_nodes = 0;
  bool has_intent() const {
    return !model.empty() || tokens > 0 || single_gpu_hours > 0 || eval_interval > 0 || eval_tokens > 0;
  }
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

// The most Slurm may grant a job in one partition (envelope.h computes it): every rule that
// counts GPUs or hours judges this, never the literal request.
struct Envelope {
  int nodes = 0;            // most nodes
  int gpus_per_node = 0;    // most GPUs on one node
  int gpus = 0;             // most GPUs in total
  int time_limit_min = 0;   // the time limit the job runs under (after bound_time_min); 0 = unbounded
  std::optional<int> bound_max_nodes;  // to write into the job: Slurm could allocate more nodes
  std::optional<int> bound_time_min;   // to write into the job: no limit given, or UNLIMITED
  std::string how;          // how the GPUs were counted when it is not the literal request
  double hours() const { return time_limit_min / 60.0; }
  double gpu_hours() const { return gpus * hours(); }
};

struct Decision {
  Action action = Action::accept;
  bool governed = false;           // the job's partition(s) are in the policy
  bool shadow = false;             // mode = shadow: the plugin logs this decision and changes nothing
  Envelope envelope;               // what was judged (the first governed partition kept)
  double granted_gpu_hours = 0;    // after the decision: 0 for reject, the rewritten envelope otherwise
  // Bounds the plugin writes into the job on every accepted decision, so that nothing Slurm
  // does with the job exceeds what was judged.
  std::optional<int> bound_max_nodes;
  std::optional<int> bound_time_min;
  std::vector<RuleHit> rules;      // every rule that fired, in evaluation order
  std::string summary;             // one line, for the job comment and sbatch output
  std::string message;             // one paragraph a user understands (reason + what to ask)
  Rewrite rewrite;
  // SCALEGUARD_* variables that carry the plan to the tasks (STRATEGY, TP, PP, DP, ZERO,
  // MICRO_BATCH, GPUS, NODES, CKPT_DIR, CKPT_INTERVAL_S, PLAN). Values are plain tokens.
  std::vector<std::pair<std::string, std::string>> plan_env;
  std::string plan_json;           // the plan as JSON (same fields as `scaleguard plan --json`)
  // The relative band the model's predicted comm ratio and doubling speedup were judged with
  // (catalog model_uncertainty; 0 = none judged): a prediction within it of max_comm_ratio or
  // min_doubling_speedup is warned, not rewritten. The rule's detail gives the band's ends.
  double model_band = 0;
};

// Pure, deterministic, no I/O, no exceptions escape (noexcept: a bug yields a reject
// whose message says "internal error", never a crash inside slurmctld).
Decision decide(const JobRequest& job, const Policy& policy) noexcept;

// {action, rules[], summary, message, plan, rewrite{...}}
std::string to_json(const Decision&);

// Policy/catalog loading (file, line, key and a fix hint in every error).
Result<Catalog> load_catalog(const std::string& path);
// The policy names its catalog with `catalog = PATH` (relative to the policy file);
// catalog_override, when not empty, wins (plugstack `catalog=` argument). The calibration
// override (`calibration = PATH` in the policy, relative to it; the `calibration` argument
// wins when not empty) is layered on the catalog before partitions resolve their GPU type.
Result<std::shared_ptr<const Policy>> load_policy(const std::string& path,
                                                  const std::string& catalog_override = "",
                                                  const std::string& calibration = "");

// Value parsers shared by the CLI and both plugins (bounded, locale-free, no exceptions).
Result<double> parse_count(const std::string& text);      // "40B", "1.5T", "350M", "1e9"
Result<double> parse_hours(const std::string& text);      // "11", "11h", "90m", "2d", "1-12:00:00"
Result<int> parse_slurm_minutes(const std::string& text); // Slurm --time forms -> minutes
Result<std::string> parse_strategy(const std::string& text);
// "gres:gpu:a100:8", "gres/gpu:8", "gpu:2", "gres:gpu" (=1), comma lists with other TRES.
// Counts follow Slurm's reading: `gpu:1k` is 1,024 GPUs, `gpu:1x` one GPU of type "1x".
// Shared GPU GRES (shard, mps) count as GPUs when the policy says how many units make one
// GPU (policy `shared_gpu_gres`); the default ignores them.
struct GpuTres { int count = 0; std::string type; };
struct SharedGpuGres { int shard_per_gpu = 0; int mps_per_gpu = 0; };
Result<GpuTres> parse_gpu_tres(const std::string& text, const SharedGpuGres& shared = {});
// GPUs in a TRES count list as Slurm prints what a job holds (squeue tres-alloc, sacct
// AllocTRES/ReqTRES: "cpu=8,gres/gpu=4,gres/gpu:a100=4,gres/shard=2"): per GRES (gpu, shard,
// mps) the untyped entry is the total (typed entries repeat it), else its typed ones summed;
// shard and mps become GPUs as parse_gpu_tres counts them (the policy's shared_gpu_gres), so
// submission, ledger and report share one definition of a GPU. Only TRES accounting tracks
// (AccountingStorageTRES) appear in these lists.
Result<int> parse_held_gpus(const std::string& tres, const SharedGpuGres& shared);
// Validates a model spec against the catalog's presets without planning.
Result<std::string> validate_model_spec(const std::string& text, const Catalog& catalog);

}  // namespace scaleguard
