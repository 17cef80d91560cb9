// What the rules share (issue 41): one partition's judgement of one job. decide.cpp fills in
// the job, the envelope and (for a job with a training intent) the planned training, runs the
// ordered rule table (table.cpp) over it, then writes the Decision from what the rules left.
// Each rule is a unit of its own file: it reads the job as the rules before it left it (the
// cuts, the plan kept), records its verdict with fire() and its suggestion with ask().
// Private to planner/src.
#pragma once
#include <optional>
#include <string>

#include "scaleguard/decide.h"
#include "scaleguard/measurement.h"
#include "scaleguard/plan.h"
#include "scaleguard/policy.h"

namespace scaleguard::rules {

// The training a job with --train-* intent asked for, planned before any rule runs.
struct Planning {
  Workload w;            // the run, its tokens and batch resolved
  Hardware hw;           // the partition's
  Goals goals;           // the partition's, reasons off (the searches the rules make)
  Goals explained;       // the same with reasons, for the plan that is kept
  Pins pins;             // the strategy the user pinned
  Pins free_pins;        // none: the one-GPU comparison
  Result<Plan> single{Error{}};  // the run on one GPU (an error: it does not fit one)
  Result<Plan> asked{Error{}};   // the run on the GPUs asked for
  bool single_fits = false;
  bool deadline_needs_more = false;  // --train-deadline: one GPU would not meet it
};

struct Judge {
  Judge(const JobRequest& jb, const Policy& p, const Partition& pt, const Envelope& e);

  // The job and where it is judged.
  const JobRequest& job;
  const Policy& policy;
  const Partition& part;
  const Envelope& env;   // what Slurm may grant it here
  // --train-spare-nodes (issue 38): whole nodes of the envelope kept idle for in-job restarts,
  // and the GPUs Slurm holds on them. 0 for a job without spares.
  const int spare_nodes;
  const int spare_gpus;
  const int gpn;         // GPUs per node of the partition
  // The envelope's GPUs and nodes (at least 1) the training runs on (the spares' taken off: the
  // caps charge them back, spares_held()), its time limit.
  const int gpus;
  const int nodes;
  const int limit;
  const double hours;
  const std::string how; // " (judged as ...)" when the envelope is not the literal request
  const bool spot;
  const bool fast_fabric;  // efa or ib
  const Planning* plan = nullptr;  // null: judged on the request

  // The verdicts so far: every rule fired, in order, and the strongest action.
  Decision d;
  Action max_action = Action::accept;
  // The job as the rules left it: cuts (unset = as asked) and the plan kept.
  std::optional<int> new_gpus, new_nodes, new_time;
  bool have_plan = false;
  Plan chosen;
  bool measured_rewrite = false;       // the cut came from a probe's measurement
  const Measurement* vouched = nullptr;  // a trusted measurement replaces the model's estimate
  double granted = 0;                  // GPU-hours after every cut (the caps' verdict)

  // "What to ask for instead": the first suggestion of each kind wins (rules run from the
  // most to the least fundamental), so the pieces never contradict each other.
  std::optional<int> ask_gpus, ask_nodes, ask_time;
  std::optional<std::string> ask_partition;
  std::optional<Plan> suggestion;
  void ask(std::optional<int> gpus, std::optional<int> minutes, const Plan* plan = nullptr);
  std::string ask_text() const;

  // GPUs Slurm holds on the spare nodes when the training has `train_gpus` (a cut of a job that
  // gave --gpus-per-node cuts each spare node to the same count); 0 without spares.
  int spares_held(int train_gpus) const;
  // What the job holds with the training on `train_gpus`, `train_nodes` nodes: the GPU-hours
  // the caps and budgets charge are these x the time limit.
  int held_gpus(int train_gpus) const { return train_gpus + spares_held(train_gpus); }
  // The GPU-hours the spares sit idle for while `plan` trains (0 without spares).
  double spare_gpu_hours(const Plan& plan) const {
    return spare_nodes > 0 ? spares_held(plan.gpus) * plan.wall_hours : 0;
  }

  const Rule& rule(RuleId id) const { return part.rules[static_cast<int>(id)]; }
  bool on(RuleId id) const { return rule(id).enabled; }
  double threshold(RuleId id) const { return rule(id).threshold; }
  // Records a fired rule; returns true when its action is rewrite (the caller applies it).
  bool fire(RuleId id, std::string detail);
  // A rule judged on the model's prediction, which lies within the model's own error of the
  // threshold: recorded as a warning whatever the rule's action (issue 29).
  void warn_within_band(RuleId id, std::string detail);
  // Whether the fired rule cuts the job (its action is rewrite), as opposed to refusing or warning.
  bool cuts(RuleId id) const;
};

// One unit of the rule table: a name (a rule id of docs/policy.md, or a step that judges
// rules together) and its judgement.
struct Unit {
  const char* name;
  void (*judge)(Judge&);
};
// The two ordered tables (table.cpp): a job without a training intent is judged on its
// request, a job with one on its plan.
struct Table {
  const Unit* units;
  int count;
};
Table table(Basis basis);
void run(Table table, Judge& j);

// Shared by the rules and decide.cpp.
std::string slurm_time(int minutes);
// Minutes to ask for: the prediction plus 10%, at least 10 minutes, within max_time.
int ask_minutes(double hours, const Partition& part);
std::string gpus_str(int n);
std::string plan_line(const Plan& p);
// Another partition with the same GPU type on a fabric fit for multi-node jobs.
const Partition* fast_twin(const Policy& policy, const Partition& part);

// The two "stay single" rules on a plan (distributed_min_gpu_hours, single_gpu_max_hours):
// whether they judge the job (more than one GPU asked, the model fits one, no deadline that
// one GPU misses), and what either does when it fires: suggest one GPU, cut to it on rewrite.
bool may_stay_single(const Judge& j);
void stay_single(Judge& j, bool rewrite);

// max_comm_ratio and min_doubling_speedup judge the model's prediction for a plan on more
// than one GPU that no earlier rule cut and no trusted measurement vouched for; within the
// model's error band (catalog model_uncertainty) of a threshold they warn (docs/policy.md).
bool model_judges_scaling(const Judge& j);
std::string band_note(double u);

// The units, one file each (rules/NAME.cpp); _request and _plan are a rule's two forms.
void one_gpu_type(Judge&);
void multi_node_fabric_request(Judge&);
void multi_node_fabric_plan(Judge&);
void must_fit_memory(Judge&);
void distributed_min_gpu_hours_request(Judge&);
void distributed_min_gpu_hours_plan(Judge&);
void single_gpu_max_hours(Judge&);
void consider_distributed_hours(Judge&);
void measured(Judge&);
void max_comm_ratio(Judge&);
void min_doubling_speedup(Judge&);
void max_job_gpu_hours(Judge&);
void max_array_gpu_hours(Judge&);
void caps(Judge&);
void checkpoint_required_gpu_hours_request(Judge&);
void checkpoint_required_gpu_hours_plan(Judge&);
void time_limit_fits(Judge&);

}  // namespace scaleguard::rules
