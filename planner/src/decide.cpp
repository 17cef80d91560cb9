// decide(): a job as Slurm sees it + the policy -> accept / warn / rewrite / reject, with the
// plan, the rules that fired (with their numbers) and what to ask for instead.
// Pure and deterministic: no I/O, no globals; exceptions never leave decide().
#include <algorithm>
#include <cmath>

#include "scaleguard/decide.h"
#include "scaleguard/envelope.h"
#include "scaleguard/plan.h"
#include "scaleguard/policy.h"
#include "scaleguard/text.h"

namespace scaleguard {

namespace {

int severity(Action a) { return static_cast<int>(a); }  // accept < warn < rewrite < reject

std::string slurm_time(int minutes) {
  if (minutes < 0) return "INFINITE";
  const int d = minutes / 1440, h = minutes / 60 % 24, m = minutes % 60;
  return d > 0 ? text::format("%d-%02d:%02d:00", d, h, m) : text::format("%d:%02d:00", h, m);
}

// Minutes to ask for: the prediction plus 10%, at least 10 minutes, within max_time.
int ask_minutes(double hours, const Partition& part) {
  // Clamped before the cast: an absurd plan (1.5T parameters, 1e18 tokens) must not overflow.
  int m = static_cast<int>(std::ceil(std::clamp(hours * 60 * 1.1, 10.0, 10.0 * 366 * 24 * 60)));
  if (part.max_time_min > 0) m = std::min(m, part.max_time_min);
  return m;
}

struct Judge {
  Judge(const JobRequest& j, const Policy& p, const Partition& pt) : job(j), policy(p), part(pt) {}
  const JobRequest& job;
  const Policy& policy;
  const Partition& part;
  Decision d;
  Action max_action = Action::accept;
  // "What to ask for instead": the first suggestion of each kind wins (rules run from the
  // most to the least fundamental), so the pieces never contradict each other.
  std::optional<int> ask_gpus, ask_nodes, ask_time;
  std::optional<std::string> ask_partition;
  std::optional<Plan> suggestion;
  void ask(std::optional<int> gpus, std::optional<int> minutes, const Plan* plan = nullptr) {
    if (gpus && !ask_gpus) {
      ask_gpus = gpus;
      if (plan) suggestion = *plan, ask_nodes = plan->nodes;
      if (minutes) ask_time = minutes;
    } else if (!gpus && minutes && !ask_time) {
      ask_time = minutes;
    }
  }
  std::string ask_text() const {
    std::string out;
    if (ask_gpus) out += text::format(" --gpus=%d", *ask_gpus);
    if (ask_nodes && *ask_nodes > 1) out += text::format(" --nodes=%d", *ask_nodes);
    if (ask_time) out += " --time=" + slurm_time(*ask_time);
    if (ask_partition) out += " --partition=" + *ask_partition;
    return out;
  }

  const Rule& rule(RuleId id) const { return part.rules[static_cast<int>(id)]; }
  bool on(RuleId id) const { return rule(id).enabled; }
  double threshold(RuleId id) const { return rule(id).threshold; }
  // Records a fired rule; returns true when its action is rewrite (the caller applies it).
  bool fire(RuleId id, std::string detail) {
    const Rule& r = rule(id);
    d.rules.push_back(RuleHit{to_string(id), r.action, std::move(detail)});
    if (severity(r.action) > severity(max_action)) max_action = r.action;
    return r.action == Action::rewrite;
  }
  // A rule judged on the model's prediction, which lies within the model's own error of the
  // threshold: recorded as a warning whatever the rule's action (issue 29).
  void warn_within_band(RuleId id, std::string detail) {
    d.rules.push_back(RuleHit{to_string(id), Action::warn, std::move(detail)});
    if (severity(Action::warn) > severity(max_action)) max_action = Action::warn;
  }
};

// Another partition with the same GPU type on a fabric fit for multi-node jobs.
const Partition* fast_twin(const Policy& policy, const Partition& part) {
  for (const auto& p : policy.partitions)
    if (&p != &part && (p.fabric == Fabric::efa || p.fabric == Fabric::ib) && p.gpu.name == part.gpu.name &&
        p.capacity == part.capacity)
      return &p;
  return nullptr;
}

bool same_layout(const Layout& a, const Layout& b) {
  return a.tp == b.tp && a.pp == b.pp && a.dp == b.dp && a.zero == b.zero && a.micro_batch == b.micro_batch &&
         a.recompute == b.recompute && a.interleave == b.interleave;
}

std::string gpus_str(int n) { return n == 1 ? "1 GPU" : std::to_string(n) + " GPUs"; }

std::string plan_line(const Plan& p) {
  return gpus_str(p.gpus) + " (" + to_string(p.strategy) + "): " + text::num(p.wall_hours, 2) + " h, " +
         text::num(p.gpu_hours, 1) + " GPU-hours, ~" + text::money(p.cost_on_demand) + " on-demand / " +
         (p.has_spot_price && std::isfinite(p.cost_spot) ? "~" : "") + spot_cost_text(p);
}

// Checkpoint interval the job runs with: the user's --train-ckpt-interval, else Daly's.
long ckpt_seconds(const Plan& p, const JobRequest& job) {
  const long interval = job.ckpt_interval_min > 0 ? job.ckpt_interval_min * 60L : std::lround(p.ckpt_interval_s);
  return std::max(60L, interval);
}

// Top-k compression (policy topk_compression, docs/policy.md): only a plain data-parallel
// plan can take it (what scaleguard-run implements). require: exported at 1% density;
// forbid: exported as none and never proposed; auto: proposed in the reasons when the plan is
// communication-bound (topk_reason), the user decides.
constexpr double kTopKDensity = 0.01;
void apply_topk_policy(Decision& d, Plan& p, const Partition& part) {
  const TopKEstimate t = topk_estimate(p, kTopKDensity);
  auto& reasons = p.reasons;
  const std::string proposal = topk_reason(p, kTopKDensity);
  if (part.topk_compression == "forbid") {
    d.plan_env.emplace_back("SCALEGUARD_COMPRESS", "none");
    if (!proposal.empty()) {
      reasons.erase(std::remove(reasons.begin(), reasons.end(), proposal), reasons.end());
      reasons.push_back("top-k compression would pay here, but partition " + part.name +
                        " forbids it (topk_compression = forbid)");
    }
  } else if (part.topk_compression == "require") {
    if (t.applies) {
      d.plan_env.emplace_back("SCALEGUARD_COMPRESS", text::format("topk:%g", kTopKDensity));
      reasons.push_back(text::format("top-k compression at %g%% required by partition %s (topk_compression = require): "
                                     "gradient exchange %.3g MB instead of %.3g MB per GPU and step, step %.3g s "
                                     "instead of %.3g s (model)",
                                     100 * kTopKDensity, part.name.c_str(), t.topk_bytes / 1e6, t.dense_bytes / 1e6,
                                     t.step_s, p.step_seconds));
    } else if (p.layout.dp > 1) {
      reasons.push_back("partition " + part.name + " requires top-k compression, but this plan is not plain data "
                        "parallel (tp/pp/ZeRO): scaleguard-run compresses only plain data parallel, so it runs dense");
    }
  }
}

void add_plan_env(Decision& d, const Plan& p, const JobRequest& job, const Assumptions& assume) {
  const auto& l = p.layout;
  auto add = [&](const char* k, std::string v) { d.plan_env.emplace_back(k, std::move(v)); };
  add("SCALEGUARD_STRATEGY", to_string(p.strategy));
  add("SCALEGUARD_TP", std::to_string(l.tp));
  add("SCALEGUARD_PP", std::to_string(l.pp));
  add("SCALEGUARD_DP", std::to_string(l.dp));
  add("SCALEGUARD_ZERO", std::to_string(l.zero));
  add("SCALEGUARD_MICRO_BATCH", std::to_string(l.micro_batch));
  // Micro-batches per data-parallel rank and step (gradient accumulation; pipeline: M) and the
  // gradient bucket the step time assumed: what other trainers need to follow the plan.
  add("SCALEGUARD_ACCUMULATION", std::to_string(p.micro_batches));
  add("SCALEGUARD_BUCKET_MB", text::num(assume.bucket_mb));
  add("SCALEGUARD_RECOMPUTE", to_string(l.recompute));
  add("SCALEGUARD_GPUS", std::to_string(p.gpus));
  add("SCALEGUARD_NODES", std::to_string(p.nodes));
  add("SCALEGUARD_CKPT_INTERVAL_S", std::to_string(ckpt_seconds(p, job)));
  if (!job.ckpt_dir.empty()) add("SCALEGUARD_CKPT_DIR", job.ckpt_dir);
  add("SCALEGUARD_PLAN", text::format("%s-tp%d-pp%d-dp%d-zero%d-mb%d", to_string(p.strategy), l.tp, l.pp, l.dp,
                                      l.zero, l.micro_batch));
}

Decision reject_input(const std::string& what, const Error& e) {
  Decision d;
  d.action = Action::reject;
  d.rules.push_back(RuleHit{"input", Action::reject, what + ": " + e.message});
  d.summary = "scaleguard: reject: bad " + what;
  d.message = "scaleguard: " + what + ": " + e.message + (e.hint.empty() ? "" : " (" + e.hint + ")");
  return d;
}

// A --train-probe job (issue 16) is judged on its budget alone, so that a probe is never a way
// around the GPU-hour caps: what Slurm may grant it (the envelope) must stay within
// probe_max_gpu_hours, probe_max_fraction of the training job it probes and max_job_gpu_hours.
Decision judge_probe(const JobRequest& job, const Policy& policy, const Partition& part, const Envelope& env,
                     const Plan* single, const Plan* asked, const Judge& j) {
  Decision d;
  const bool has_work = job.tokens > 0 || job.single_gpu_hours > 0;
  const double work = single ? single->gpu_hours : asked ? asked->gpu_hours : 0;
  double cap = 1e18;
  std::string why;
  if (policy.probe_max_gpu_hours > 0) cap = policy.probe_max_gpu_hours, why = "probe_max_gpu_hours";
  if (policy.probe_max_fraction > 0 && has_work && work > 0 && policy.probe_max_fraction * work < cap) {
    cap = policy.probe_max_fraction * work;
    why = "probe_max_fraction " + text::num(policy.probe_max_fraction) + " of the training job's " +
          text::num(work, 1) + " GPU-hours on one GPU";
  }
  if (j.on(RuleId::max_job_gpu_hours) && j.threshold(RuleId::max_job_gpu_hours) < cap)
    cap = j.threshold(RuleId::max_job_gpu_hours), why = "max_job_gpu_hours";
  // An array of probes or a het job's components count together: the budget is per probe.
  const int elements = std::max(1, job.array_tasks);
  const double asked_h = env.gpu_hours() * elements + job.het_prior_gpu_hours;
  std::string shape = text::format("%d GPUs x %s h", env.gpus, text::num(env.hours(), 3).c_str());
  if (elements > 1) shape += text::format(" x %d array elements", elements);
  if (job.het_prior_gpu_hours > 0) shape += " + " + text::num(job.het_prior_gpu_hours, 3) + " of earlier het components";
  shape += " = " + text::num(asked_h, 3) + " GPU-hours" + (env.how.empty() ? "" : " (judged as " + env.how + ")");
  if (cap >= 1e18 || asked_h > cap) {
    const std::string detail =
        cap >= 1e18 ? "probe job: " + shape + " with no budget: give --train-tokens or --train-single-gpu-hours "
                                              "(probe_max_fraction of it bounds the probe)"
                    : "probe job: " + shape + " > " + text::num(cap, 3) + " GPU-hours allowed for a probe (" + why + ")";
    d.action = Action::reject;
    d.rules.push_back(RuleHit{"probe_budget", Action::reject, detail});
    d.summary = "scaleguard: reject [probe_budget]: probe job over its budget";
    d.message = "scaleguard: [probe_budget] " + detail + ".";
    if (cap < 1e18 && env.gpus > 0) {
      const int minutes = static_cast<int>(cap * 60 / env.gpus);
      d.message += minutes >= 1 ? text::format(" Ask for instead: --time=%d (minutes) on %d GPUs.", minutes, env.gpus)
                                : " Ask for fewer GPUs.";
    }
    return d;
  }
  d.action = Action::accept;
  d.rules.push_back(RuleHit{"probe_budget", Action::accept,
                            "probe job: " + shape + " <= " + text::num(cap, 3) + " GPU-hours (" + why + ")"});
  d.summary = text::format("scaleguard: accept [probe_budget]: probe gpus=%d nodes=%d %s GPU-hours of %s allowed in %s",
                           env.gpus, env.nodes, text::num(asked_h, 3).c_str(), text::num(cap, 3).c_str(),
                           part.name.c_str());
  d.message = d.summary + ". [probe_budget] " + d.rules.back().detail + ".";
  // The probe reads its budget from here and stops within it (scaleguard probe).
  d.plan_env.emplace_back("SCALEGUARD_PROBE_MAX_GPU_HOURS", text::num(std::min(cap, asked_h), 4));
  d.bound_max_nodes = env.bound_max_nodes;
  d.bound_time_min = env.bound_time_min;
  d.granted_gpu_hours = env.gpu_hours();
  return d;
}

// Whether a fired cap cuts the job (its action is rewrite), as opposed to refusing or warning.
bool rule_cuts(const Judge& j, RuleId id) {
  for (const auto& r : j.d.rules)
    if (r.id == to_string(id)) return r.action == Action::rewrite;
  return false;
}

// Judges the job in one governed partition.
Decision decide_in(const JobRequest& job, const Policy& policy, const Partition* part) {
  Judge j(job, policy, *part);
  Decision& d = j.d;
  const int gpn = part->inst.gpus;

  // What Slurm may grant the job here, whatever the request's literal numbers say.
  const Envelope env = envelope_of(job, *part);
  auto judged = [&](Decision r) {
    r.governed = true, r.shadow = part->shadow, r.envelope = env;
    return r;
  };
  int nodes = std::max(1, env.nodes);
  int gpus = env.gpus;
  if (gpus > 100000 || nodes > 100000 || job.gpus_per_node > 100000)
    return judged(reject_input("GPU request", Error{"absurd GPU or node count", "", 0, "", "ask for at most 100000"}));
  if (gpus <= 0) {
    if (job.has_intent())
      return judged(reject_input("--train-* options", Error{"a training intent on a job without GPUs", "", 0, "",
                                                            "ask for GPUs, e.g. --gpus=1"}));
    d.summary = "scaleguard: accept: no GPUs requested";
    d.message = d.summary;
    return judged(d);
  }
  if (job.probe && !job.has_intent())
    return judged(reject_input("--train-probe", Error{"a probe job without the model it probes", "", 0, "",
                                                      "add --train-model and --train-tokens"}));
  if (env.time_limit_min <= 0)
    return judged(reject_input(
        "time limit", Error{"no time limit (--time=UNLIMITED) cannot be judged in partition " + part->name +
                                ", which has no max_time in the policy",
                            "", 0, "", "give --time=D-HH:MM:SS"}));
  const int limit = env.time_limit_min;
  const double hours = limit / 60.0;
  // "(judged as ...)" when the envelope is not the literal request.
  const std::string how = env.how.empty() ? "" : " (judged as " + env.how + ")";

  // The caps judge the envelope after every rewrite; a plan's prediction may only tighten.
  // Every cap sees what the others cut (issue 25, class 5): max_job_gpu_hours and
  // max_array_gpu_hours are checked in turn on the job as it is after the earlier cuts, and a
  // job that no cut brings under both is refused. Returns the GPU-hours granted (one job, one
  // array element).
  std::optional<int> new_gpus, new_nodes, new_time;
  auto check_caps = [&](double predicted_gpu_hours) {
    const int final_gpus = new_gpus ? (job.exclusive || part->exclusive ? new_nodes.value_or(1) * gpn : *new_gpus) : gpus;
    auto one_at = [&](int minutes) {
      return std::max(static_cast<double>(final_gpus) * minutes / 60.0, predicted_gpu_hours);
    };
    const double jcap = j.on(RuleId::max_job_gpu_hours) ? j.threshold(RuleId::max_job_gpu_hours) : 0;
    const int elements = j.on(RuleId::max_array_gpu_hours) ? std::max(1, job.array_tasks) : 1;
    const double acap = elements > 1 ? j.threshold(RuleId::max_array_gpu_hours) : 0;
    double one = one_at(new_time.value_or(limit));
    if (jcap > 0 && one + job.het_prior_gpu_hours > jcap) {
      const double budget = jcap - job.het_prior_gpu_hours;
      const int capped = budget > 0 ? std::max(1, static_cast<int>(budget / final_gpus * 60)) : 0;
      // The literal request only when it is what was judged: a plan predicting more names that.
      std::string detail = final_gpus == gpus && new_time.value_or(limit) == limit && one <= gpus * hours
                               ? text::format("%d GPUs x %s h = %s GPU-hours", gpus, text::num(hours).c_str(),
                                              text::num(gpus * hours, 0).c_str()) + how
                           : one > static_cast<double>(final_gpus) * new_time.value_or(limit) / 60.0
                               ? "the plan predicts " + text::num(one, 0) + " GPU-hours"
                               : text::num(one, 0) + " GPU-hours";
      if (job.het_component > 0)
        detail += " + " + text::num(job.het_prior_gpu_hours, 0) + " GPU-hours of het job components 0-" +
                  std::to_string(job.het_component - 1);
      if (j.fire(RuleId::max_job_gpu_hours, detail + " > " + text::num(jcap) + " allowed for one job") && capped > 0)
        new_time = capped;
      else if (capped <= 0 && rule_cuts(j, RuleId::max_job_gpu_hours))
        j.max_action = Action::reject;  // nothing left to give this component (a warning cap only warns)
      if (capped > 0) j.ask(std::nullopt, capped);
      one = one_at(new_time.value_or(limit));
    }
    if (acap > 0 && one * elements > acap) {
      const int capped = std::max(1, static_cast<int>(acap / elements / final_gpus * 60));
      if (j.fire(RuleId::max_array_gpu_hours,
                 text::format("%d array elements x %s GPU-hours = %s GPU-hours > %s allowed for one array", elements,
                              text::num(one, 1).c_str(), text::num(one * elements, 0).c_str(), text::num(acap).c_str()) +
                     how))
        new_time = std::min(capped, new_time.value_or(capped));
      j.ask(std::nullopt, capped);
      one = one_at(new_time.value_or(limit));
    }
    // A cap that cuts must be met by what all the cuts leave (the one-minute floor can keep a
    // large array above its cap): otherwise no rewrite satisfies every cap and the job is
    // refused. A cap whose action is warn only warns.
    const double held = static_cast<double>(final_gpus) * new_time.value_or(limit) / 60.0;
    auto cuts = [&](RuleId id) { return rule_cuts(j, id); };
    std::string unmet;
    if (jcap > 0 && cuts(RuleId::max_job_gpu_hours) && held + job.het_prior_gpu_hours > jcap * (1 + 1e-9))
      unmet = "max_job_gpu_hours " + text::num(jcap);
    else if (acap > 0 && cuts(RuleId::max_array_gpu_hours) && held * elements > acap * (1 + 1e-9))
      unmet = "max_array_gpu_hours " + text::num(acap) + " over " + std::to_string(elements) + " elements";
    if (!unmet.empty()) {
      d.rules.push_back(RuleHit{"caps", Action::reject,
                                text::num(held, 1) + " GPU-hours per job after every cut still exceed " + unmet +
                                    ": no rewrite satisfies every cap"});
      j.max_action = Action::reject;
    }
    // What the job may take after every cut: a cap that only warns leaves the job whole, and
    // budgets and later het components are charged all of it (issue 36, class 3).
    return one;
  };
  const bool spot = part->capacity == Capacity::spot;

  // One GPU type per job, the partition's.
  if (!job.gpu_type.empty() && j.on(RuleId::one_gpu_type)) {
    if (job.gpu_type.find(',') != std::string::npos)
      j.fire(RuleId::one_gpu_type, "the job mixes GPU types " + job.gpu_type + ": stragglers make mixed jobs slow");
    else if (!part->gpu.matches(job.gpu_type))
      j.fire(RuleId::one_gpu_type, "partition " + part->name + " has " + part->gpu.name + " GPUs, not '" +
                                       job.gpu_type + "'");
  }
  const bool fast_fabric = part->fabric == Fabric::efa || part->fabric == Fabric::ib;
  double granted = 0;

  if (!job.has_intent()) {
    // Judged on the request itself: GPUs x time limit.
    const double gpu_hours = gpus * hours;
    if (nodes > 1 && !fast_fabric && j.on(RuleId::multi_node_fabric)) {
      const Partition* twin = fast_twin(policy, *part);
      if (j.fire(RuleId::multi_node_fabric,
                 text::format("%d nodes on fabric %s: multi-node jobs need efa or ib", nodes, to_string(part->fabric)) +
                     (twin ? "; partition " + twin->name + " has the same GPUs on " + to_string(twin->fabric) : ""))) {
        if (twin) d.rewrite.partition = twin->name;
        else new_nodes = 1, new_gpus = std::min(gpus, gpn);
      }
      if (twin) j.ask_partition = twin->name;
      else j.ask(std::min(gpus, gpn), std::nullopt);
    }
    if (gpus > 1 && j.on(RuleId::distributed_min_gpu_hours) &&
        gpu_hours < j.threshold(RuleId::distributed_min_gpu_hours)) {
      const int one = ask_minutes(gpu_hours, *part);
      if (j.fire(RuleId::distributed_min_gpu_hours,
                 text::format("%d GPUs x %s h = %s GPU-hours < %s: below this one GPU is cheaper", gpus,
                              text::num(hours).c_str(), text::num(gpu_hours, 1).c_str(),
                              text::num(j.threshold(RuleId::distributed_min_gpu_hours)).c_str())))
        new_gpus = 1, new_nodes = 1, new_time = one;
      j.ask(1, one);
    }
    granted = check_caps(0);
    if (j.on(RuleId::checkpoint_required_gpu_hours) &&
        (spot || gpu_hours >= j.threshold(RuleId::checkpoint_required_gpu_hours))) {
      if (j.fire(RuleId::checkpoint_required_gpu_hours,
                 spot ? "spot partition: the job must checkpoint and requeue"
                      : text::format("%s GPU-hours >= %s: the job must checkpoint and requeue",
                                     text::num(gpu_hours, 0).c_str(),
                                     text::num(j.threshold(RuleId::checkpoint_required_gpu_hours)).c_str())))
        d.rewrite.requeue = true, d.rewrite.signal_before_s = policy.signal_before_s;
    }
    d.plan_env.emplace_back("SCALEGUARD_GPUS", std::to_string(new_gpus.value_or(gpus)));
    d.plan_env.emplace_back("SCALEGUARD_NODES", std::to_string(new_nodes.value_or(nodes)));
    if (!job.ckpt_dir.empty()) d.plan_env.emplace_back("SCALEGUARD_CKPT_DIR", job.ckpt_dir);
  } else {
    // Judged on the intent: plan the training, compare with one GPU.
    if (job.model.empty())
      return judged(reject_input("--train-model", Error{"tokens, hours or evaluation given without a model", "", 0, "",
                                                 "add --train-model (e.g. 350M or llama2-7b)"}));
    auto model = parse_model_spec(job.model, policy.catalog);
    if (!model) return judged(reject_input("--train-model", model.error()));
    if (!(job.tokens >= 0 && job.tokens <= 1e18) || !(job.single_gpu_hours >= 0 && job.single_gpu_hours <= 87840) ||
        !(job.deadline_hours >= 0 && job.deadline_hours <= 87840))
      return judged(reject_input("--train-* options", Error{"tokens, hours or deadline out of range", "", 0, "", ""}));
    if ((job.eval_interval > 0) != (job.eval_tokens > 0))
      return judged(reject_input("--train-eval-every", Error{"--train-eval-every and --train-eval-tokens go together", "", 0, "",
                                                      "e.g. --train-eval-every=1000 --train-eval-tokens=20M: 20M tokens every 1000 steps"}));
    if (!(job.eval_interval == 0 || (job.eval_interval >= 1 && job.eval_interval <= kMaxEvalEvery)) ||
        !(job.eval_tokens >= 0 && job.eval_tokens <= 1e18))
      return judged(reject_input("--train-eval-every", Error{"evaluation interval or tokens out of range", "", 0, "", ""}));
    Pins pins;
    if (!job.strategy.empty() && job.strategy != "auto") {
      auto s = parse_strategy(job.strategy);
      if (!s) return judged(reject_input("--train-strategy", s.error()));
      if (s.value() != "auto") pins.strategy = strategy_from_string(s.value()).value();
    }
    const Hardware hw = partition_hardware(policy, *part);
    Goals goals = partition_goals(policy, *part);
    goals.deadline_hours = job.deadline_hours;
    goals.explain = false;  // reasons are written once, for the plan that is kept
    goals.compare_rungs = false;

    Workload w{model.value(), job.tokens, 0};
    w.eval_interval = job.eval_interval;
    w.eval_tokens = job.eval_tokens;
    // The batch is fixed before any plan (issue 37): the same for every GPU count compared,
    // and for the 1e9-token plans scaled below. The law needs the run's compute: given tokens,
    // else the first-principles estimate of the hours given (or the time limit on the GPUs).
    {
      Workload sized = w;
      if (sized.tokens <= 0)
        sized.tokens = tokens_for_single_gpu_hours(w.model, part->gpu,
                                                   job.single_gpu_hours > 0 ? job.single_gpu_hours : hours * gpus);
      resolve_batch(sized);
      w.global_batch = sized.global_batch, w.batch_law_tokens = sized.batch_law_tokens;
    }
    Workload per_1e9 = w;  // the same run over 1e9 tokens, scaled below
    per_1e9.tokens = 1e9;
    const Pins free_pins;  // the one-GPU comparison ignores the pinned strategy
    auto single = best_plan_at(per_1e9, hw, 1, free_pins, goals);
    if (w.tokens <= 0 && job.single_gpu_hours > 0) {
      // Hours the user measured on one GPU: scale tokens so the one-GPU plan matches them.
      w.tokens = single ? 1e9 * job.single_gpu_hours / single.value().train_hours
                        : tokens_for_single_gpu_hours(w.model, hw.gpu, job.single_gpu_hours);
    }
    if (w.tokens <= 0) {
      // Only a model: the job trains for its time limit on what it asked for.
      auto probe = best_plan_at(per_1e9, hw, gpus, pins, goals);
      w.tokens = probe ? 1e9 * hours / probe.value().train_hours : 0;
    }
    if (single) scale_work(single.value(), w.tokens / 1e9);
    const bool single_fits = static_cast<bool>(single);
    // The asked plan is usually the one kept: it is explained as it is searched, so the
    // explanation below needs no second search of the same GPUs.
    Goals explained = goals;
    explained.explain = true;
    auto asked = w.tokens > 0 ? best_plan_at(w, hw, gpus, pins, explained) : single;
    if (!asked && w.tokens <= 0) asked = best_plan_at(per_1e9, hw, gpus, pins, goals);
    const bool deadline_needs_more =
        job.deadline_hours > 0 && (!single_fits || single.value().wall_hours > job.deadline_hours);

    if (job.probe) return judged(judge_probe(job, policy, *part, env, single_fits ? &single.value() : nullptr,
                                             asked ? &asked.value() : nullptr, j));

    Plan chosen;
    bool have_plan = false;
    if (!asked) {
      // The request cannot hold the model: say how many GPUs it needs at least.
      auto rec = fewest_gpus_plan(w, hw, gpus * 2, pins, goals);
      std::string detail = asked.error().message;
      if (rec) detail += "; " + plan_line(rec.value());
      if (j.on(RuleId::must_fit_memory)) {
        if (j.fire(RuleId::must_fit_memory, detail) && rec)
          new_gpus = rec.value().gpus, new_nodes = rec.value().nodes, chosen = rec.value(), have_plan = true;
      } else {
        d.rules.push_back(RuleHit{"must_fit_memory", Action::warn, detail});
      }
      if (rec) j.ask(rec.value().gpus, ask_minutes(rec.value().wall_hours, *part), &rec.value());
      if (!rec) j.max_action = Action::reject;  // nothing fits at all: nothing to run
    } else {
      chosen = asked.value();
      have_plan = true;
    }

    if (have_plan && gpus > 1 && single_fits && !deadline_needs_more) {
      const Plan& one = single.value();
      const std::string cmp = "single GPU " + text::num(one.wall_hours, 1) + " h for ~" +
                              (one.has_spot_price ? text::money(one.cost_spot) + " on spot (~" : std::string("(")) +
                              text::money(one.cost_on_demand) + " on-demand" +
                              (one.has_spot_price ? ")" : ", no spot price)") + " vs " + gpus_str(chosen.gpus) + " " +
                              text::num(chosen.wall_hours, 1) + " h for ~" + text::money(chosen.cost_on_demand) +
                              " on-demand (" + (chosen.has_spot_price && std::isfinite(chosen.cost_spot) ? "~" : "") +
                              spot_cost_text(chosen) + ")";
      const int one_time = ask_minutes(one.wall_hours, *part);
      bool to_one = false;
      if (j.on(RuleId::distributed_min_gpu_hours) && one.gpu_hours < j.threshold(RuleId::distributed_min_gpu_hours)) {
        to_one |= j.fire(RuleId::distributed_min_gpu_hours,
                         "one GPU needs " + text::num(one.gpu_hours, 1) + " GPU-hours < " +
                             text::num(j.threshold(RuleId::distributed_min_gpu_hours)) + ": " + cmp + ": use 1 GPU");
      }
      if (j.on(RuleId::single_gpu_max_hours) && one.wall_hours <= j.threshold(RuleId::single_gpu_max_hours)) {
        to_one |= j.fire(RuleId::single_gpu_max_hours,
                         "fits one GPU and finishes in " + text::num(one.wall_hours, 1) + " h <= " +
                             text::num(j.threshold(RuleId::single_gpu_max_hours)) + " h: stay single");
      }
      if (!d.rules.empty() && (d.rules.back().id == "single_gpu_max_hours" ||
                               d.rules.back().id == "distributed_min_gpu_hours"))
        j.ask(1, one_time, &one);
      if (to_one) new_gpus = 1, new_nodes = 1, new_time = one_time, chosen = one;
    }
    if (have_plan && gpus == 1 && single_fits && j.on(RuleId::consider_distributed_hours) &&
        single.value().wall_hours > j.threshold(RuleId::consider_distributed_hours)) {
      auto rec = choose_plan(w, hw, pins, goals);
      if (rec && rec.value().gpus > 1) {
        const Plan& r = rec.value();
        if (j.fire(RuleId::consider_distributed_hours,
                   "one GPU takes " + text::num(single.value().wall_hours, 0) + " h > " +
                       text::num(j.threshold(RuleId::consider_distributed_hours)) + " h; " + plan_line(r)))
          new_gpus = r.gpus, new_nodes = r.nodes, new_time = ask_minutes(r.wall_hours, *part), chosen = r;
        j.ask(r.gpus, ask_minutes(r.wall_hours, *part), &r);
      }
    }
    // What a probe measured for this model on this instance type (issue 16): a trusted record
    // replaces the model's estimate (loosens or tightens), the user's own can only tighten.
    const bool spans_nodes = nodes > 1 || (have_plan && chosen.nodes > 1);
    const Measurement* tight = nullptr;
    const Measurement* vouched = nullptr;
    if (have_plan && chosen.gpus > 1 && !new_gpus && !job.measurements.empty()) {
      const std::string fp = model_fingerprint(w.model);
      const Measurement *admin = nullptr, *own = nullptr;
      for (const auto& m : job.measurements) {
        // Measured on the partition's hardware only (issue 37): a CPU or another GPU's record never judges it.
        if (m.fingerprint != fp || m.instance != part->inst.name || !measurement_matches(m, part->gpu) ||
            m.ranks < 2 || !(m.speedup > 0) ||
            !(m.comm_ratio >= 0) || (m.nodes > 1) != spans_nodes)
          continue;
        if (job.now > 0 && (m.time > job.now + 86400 || job.now - m.time > policy.probe_max_age_s)) continue;
        const Measurement*& newest = m.trust == Trust::admin ? admin : own;
        if (!newest || m.time > newest->time) newest = &m;
      }
      auto fails = [&](const Measurement* m) {
        return m && ((j.on(RuleId::max_comm_ratio) && m->comm_ratio > j.threshold(RuleId::max_comm_ratio)) ||
                     (j.on(RuleId::min_doubling_speedup) && m->speedup < j.threshold(RuleId::min_doubling_speedup)));
      };
      tight = fails(admin) ? admin : fails(own) ? own : nullptr;
      if (!tight && admin) vouched = admin;
    }
    auto measured_where = [&](const Measurement& m) {
      return text::format("on %d GPUs%s on %s (probe job %s%s)", m.ranks,
                          m.nodes > 1 ? (" across " + std::to_string(m.nodes) + " nodes").c_str() : " in one node",
                          m.date.c_str(), m.job_id.empty() ? "outside Slurm" : m.job_id.c_str(),
                          m.trust == Trust::own ? ", your own probe" : "");
    };
    bool measured_rewrite = false;
    if (tight) {
      // Measured: the doubling the probe made does not pay. Back off to what it did not cross:
      // one node (a cross-node probe) or one GPU (a probe inside a node).
      const Measurement& m = *tight;
      const int fallback = m.nodes > 1 ? std::min(chosen.gpus, gpn) : 1;
      Result<Plan> cap = fallback == chosen.gpus && chosen.nodes == 1 ? Result<Plan>(chosen)
                                                                        : best_plan_at(w, hw, fallback, pins, goals);
      const std::string then = cap ? "; " + plan_line(cap.value()) : std::string();
      bool rewrite = false;
      if (j.on(RuleId::max_comm_ratio) && m.comm_ratio > j.threshold(RuleId::max_comm_ratio))
        rewrite |= j.fire(RuleId::max_comm_ratio, "measured comm ratio " + text::num(m.comm_ratio, 2) + " > " +
                                                      text::num(j.threshold(RuleId::max_comm_ratio)) + " " +
                                                      measured_where(m) + ": more GPUs mostly wait for the network" + then);
      if (j.on(RuleId::min_doubling_speedup) && m.speedup < j.threshold(RuleId::min_doubling_speedup))
        rewrite |= j.fire(RuleId::min_doubling_speedup,
                          text::format("measured %.2fx ", m.speedup) + measured_where(m) + " < " +
                              text::num(j.threshold(RuleId::min_doubling_speedup)) + "x: scaling out does not pay" + then);
      if (rewrite && cap) new_gpus = fallback, new_nodes = cap.value().nodes, chosen = cap.value(), measured_rewrite = true;
      if (cap) j.ask(fallback, ask_minutes(cap.value().wall_hours, *part), &cap.value());
    } else if (vouched) {
      d.rules.push_back(RuleHit{"measured", Action::accept,
                                text::format("measured %.2fx, comm ratio %s ", vouched->speedup,
                                             text::num(vouched->comm_ratio, 2).c_str()) +
                                    measured_where(*vouched) +
                                    ": within max_comm_ratio and min_doubling_speedup; the model's estimate is not used"});
    }
    if (have_plan && chosen.gpus > 1 && !new_gpus && !vouched) {
      // Adding GPUs must pay: cap by comm ratio, then by the speedup of the last doubling.
      // The model's own error (docs/validation.md): a prediction past a threshold by less than
      // it is warned, not rewritten; the band is reported in the rule's detail and d.model_band.
      const double u = hw.assume.model_uncertainty;
      // Built only when a rule fires (decide() stays allocation-light on the accept path).
      auto band_note = [u] { return text::format("the model's +-%.0f%% band", 100 * u); };
      if (j.on(RuleId::max_comm_ratio) || j.on(RuleId::min_doubling_speedup)) d.model_band = u;
      if (j.on(RuleId::max_comm_ratio) && chosen.comm_ratio > j.threshold(RuleId::max_comm_ratio) &&
          chosen.comm_ratio / (1 + u) <= j.threshold(RuleId::max_comm_ratio)) {
        j.warn_within_band(RuleId::max_comm_ratio,
                           "predicted comm ratio " + text::num(chosen.comm_ratio, 3) + " (" +
                               text::num(chosen.comm_ratio / (1 + u), 3) + "-" +
                               text::num(chosen.comm_ratio * (1 + u), 3) + " within " + band_note() + ") on " +
                               gpus_str(chosen.gpus) + " is within the model's error of " +
                               text::num(j.threshold(RuleId::max_comm_ratio)) + ": warned, not rewritten");
      } else if (j.on(RuleId::max_comm_ratio) && chosen.comm_ratio > j.threshold(RuleId::max_comm_ratio)) {
        int n = chosen.gpus;
        Result<Plan> cap = chosen;
        while (n > 1 && cap && cap.value().comm_ratio > j.threshold(RuleId::max_comm_ratio)) {
          n /= 2;
          cap = best_plan_at(w, hw, n, pins, goals);
        }
        std::string detail = "comm ratio " + text::num(chosen.comm_ratio, 2) + " > " +
                             text::num(j.threshold(RuleId::max_comm_ratio)) + " on " + gpus_str(chosen.gpus) +
                             (u > 0 ? " (" + text::num(chosen.comm_ratio / (1 + u), 2) + "-" +
                                          text::num(chosen.comm_ratio * (1 + u), 2) + " within " + band_note() + ")"
                                    : std::string()) +
                             ": more GPUs mostly wait for the network";
        if (cap) detail += "; " + plan_line(cap.value());
        if (j.fire(RuleId::max_comm_ratio, detail) && cap)
          new_gpus = n, new_nodes = cap.value().nodes, chosen = cap.value();
        if (cap) j.ask(n, ask_minutes(cap.value().wall_hours, *part), &cap.value());
      }
      if (!new_gpus && j.on(RuleId::min_doubling_speedup) && chosen.gpus % 2 == 0) {
        auto half = best_plan_at(w, hw, chosen.gpus / 2, pins, goals);
        if (half) {
          const double speedup = half.value().wall_hours / chosen.wall_hours;
          if (speedup < j.threshold(RuleId::min_doubling_speedup) &&
              speedup * (1 + u) >= j.threshold(RuleId::min_doubling_speedup)) {
            j.warn_within_band(RuleId::min_doubling_speedup,
                               text::format("going from %d to %d GPUs speeds up %.2fx (%.2f-%.2fx within %s), within "
                                            "the model's error of %s: warned, not rewritten",
                                            chosen.gpus / 2, chosen.gpus, speedup, speedup / (1 + u), speedup * (1 + u),
                                            band_note().c_str(), text::num(j.threshold(RuleId::min_doubling_speedup)).c_str()));
          } else if (speedup < j.threshold(RuleId::min_doubling_speedup)) {
            if (j.fire(RuleId::min_doubling_speedup,
                       text::format("going from %d to %d GPUs speeds up only %.2fx < %s", chosen.gpus / 2, chosen.gpus,
                                    speedup, text::num(j.threshold(RuleId::min_doubling_speedup)).c_str()) +
                           (u > 0 ? text::format(" (%.2f-%.2fx within %s)", speedup / (1 + u), speedup * (1 + u),
                                                 band_note().c_str())
                                  : std::string()) +
                           "; " + plan_line(half.value())))
              new_gpus = half.value().gpus, new_nodes = half.value().nodes, chosen = half.value();
            j.ask(half.value().gpus, ask_minutes(half.value().wall_hours, *part), &half.value());
          }
        }
      }
    }
    if (have_plan) {
      if (chosen.nodes > 1 && !fast_fabric && j.on(RuleId::multi_node_fabric)) {
        const Partition* twin = fast_twin(policy, *part);
        if (j.fire(RuleId::multi_node_fabric,
                   text::format("the plan needs %d nodes but fabric %s is not efa or ib", chosen.nodes,
                                to_string(part->fabric)) +
                       (twin ? "; partition " + twin->name + " has the same GPUs on " + to_string(twin->fabric) : "")) &&
            twin)
          d.rewrite.partition = twin->name;
        if (twin) j.ask_partition = twin->name;
      }
      if (j.on(RuleId::checkpoint_required_gpu_hours) &&
          (spot || chosen.gpu_hours >= j.threshold(RuleId::checkpoint_required_gpu_hours))) {
        const std::string why = spot ? "spot partition" : text::num(chosen.gpu_hours, 0) + " GPU-hours >= " +
                                       text::num(j.threshold(RuleId::checkpoint_required_gpu_hours));
        if (j.fire(RuleId::checkpoint_required_gpu_hours,
                   why + ": checkpoint every " + text::num(chosen.ckpt_interval_s / 60, 0) +
                       " min and requeue on failure" + (job.ckpt_dir.empty() ? " (set --train-ckpt-dir)" : "")))
          d.rewrite.requeue = true, d.rewrite.signal_before_s = policy.signal_before_s;
      }
      const int need = ask_minutes(chosen.wall_hours, *part);
      const int have = new_time.value_or(limit);
      if (j.on(RuleId::time_limit_fits) && chosen.wall_hours * 60 > have) {
        const bool too_long = part->max_time_min > 0 && chosen.wall_hours * 60 > part->max_time_min;
        if (j.fire(RuleId::time_limit_fits,
                   "the plan needs " + text::num(chosen.wall_hours, 1) + " h but the time limit is " + slurm_time(have) +
                       (too_long ? " and the partition's max_time " + slurm_time(part->max_time_min) +
                                       " is shorter: the job must checkpoint and resume"
                                 : "")))
          new_time = need;
        j.ask(std::nullopt, need);
      }
      granted = check_caps(chosen.gpu_hours);
      if (chosen.reasons.empty()) {  // not the asked plan as searched: explain it now
        auto ex = best_plan_at(w, hw, chosen.gpus, chosen.gpus == 1 ? free_pins : pins, explained);
        chosen.reasons = ex && same_layout(ex.value().layout, chosen.layout) ? ex.value().reasons : describe_plan(chosen);
      }
      add_plan_env(d, chosen, job, hw.assume);
      apply_topk_policy(d, chosen, *part);
      d.plan_json = to_json(chosen);
    }
    if (!have_plan) granted = check_caps(0);
    // Summary and message built below from the chosen plan.
    d.action = j.max_action;
    if (d.action == Action::rewrite) {
      if (new_gpus && (*new_gpus != gpus || (measured_rewrite && new_nodes && *new_nodes < nodes))) {
        d.rewrite.gpus_total = *new_gpus;
        d.rewrite.nodes = new_nodes.value_or(1);
        if (job.gpus_per_node > 0) d.rewrite.gpus_per_node = std::min(*new_gpus, gpn);
      }
      if (new_time && *new_time != limit) d.rewrite.time_limit_min = *new_time;
    }
    std::string head = w.model.name + " (" + text::format("%.3g", w.model.params) + " parameters, " +
                       text::format("%.3g", w.tokens) + " tokens) on " + gpus_str(gpus) + " " + part->gpu.name +
                       " in " + part->name + " (" + to_string(part->capacity) + ")";
    std::string verdict;
    switch (d.action) {
      case Action::accept: verdict = "accepted"; break;
      case Action::warn: verdict = "accepted with warnings"; break;
      case Action::rewrite: verdict = "rewritten"; break;
      case Action::reject: verdict = "refused"; break;
    }
    d.message = "scaleguard: " + head + ": " + verdict + ".";
    if (have_plan) {
      d.message += " Plan: " + plan_line(chosen);
      if (chosen.evaluations > 0)  // --train-eval-every: part of those hours, not extra
        d.message += text::format(" (%.0f evaluations of %.3g tokens: %s h of it)", chosen.evaluations,
                                  w.eval_tokens, text::num(chosen.eval_hours, 2).c_str());
      d.message += ".";
    }
    for (const auto& r : d.rules) d.message += " [" + r.id + "] " + r.detail + ".";
    if (have_plan || j.suggestion) {
      std::string ids;
      for (const auto& r : d.rules) ids += (ids.empty() ? " [" : ",") + r.id;
      if (!ids.empty()) ids += "]";
      // A refused job shows what to run instead; the others show the plan that will run.
      const Plan& shown = (d.action == Action::reject || !have_plan) && j.suggestion ? *j.suggestion : chosen;
      // comm= (exposed communication / compute) and ckpt= (seconds) feed `scaleguard report`'s
      // comm_heavy flag and its checkpoint-aware waste (docs/report.md).
      d.summary = text::format(
          "scaleguard: %s%s: %s%s gpus=%d nodes=%d tp=%d pp=%d dp=%d zero=%d %sh ~%s %s comm=%s ckpt=%lds",
          to_string(d.action), ids.c_str(), &shown == &chosen ? "" : "use ", to_string(shown.strategy), shown.gpus,
          shown.nodes, shown.layout.tp, shown.layout.pp, shown.layout.dp, shown.layout.zero,
          text::num(shown.wall_hours, 1).c_str(), text::money(spot ? shown.cost_spot : shown.cost_on_demand).c_str(),
          to_string(part->capacity), text::num(shown.comm_ratio, 3).c_str(), ckpt_seconds(shown, job));
    }
  }
  d.action = j.max_action;
  if (d.action != Action::rewrite) d.rewrite = Rewrite{};
  if (d.action == Action::rewrite && !job.has_intent()) {
    if (new_gpus && *new_gpus != gpus) {
      d.rewrite.gpus_total = *new_gpus;
      d.rewrite.nodes = new_nodes.value_or(1);
      if (job.gpus_per_node > 0) d.rewrite.gpus_per_node = std::min(*new_gpus, gpn);
    }
    if (new_time && *new_time != limit) d.rewrite.time_limit_min = *new_time;
  }
  if (d.action == Action::rewrite && d.rewrite.empty()) d.action = Action::warn;  // nothing to change after all
  if (d.action != Action::reject) {
    d.bound_max_nodes = env.bound_max_nodes;
    d.bound_time_min = env.bound_time_min;
    d.granted_gpu_hours = granted;
  }
  if (d.summary.empty())
    d.summary = text::format("scaleguard: %s: %d GPU(s) x %s h = %s GPU-hours in %s", to_string(d.action), gpus,
                             text::num(hours).c_str(), text::num(gpus * hours, 1).c_str(), part->name.c_str());
  if (d.message.empty()) {
    d.message = d.summary + ".";
    for (const auto& r : d.rules) d.message += " [" + r.id + "] " + r.detail + ".";
  }
  if ((j.ask_gpus || j.ask_time || j.ask_partition) && d.action != Action::accept) d.message += " Ask for instead:" + j.ask_text() + ".";
  return judged(d);
}

Decision not_governed(const std::string& names) {
  Decision d;
  d.summary = "scaleguard: accept: partition " + names + " is not governed by the policy";
  d.message = d.summary;
  return d;
}

// Another partition's decision laid over `into` (issue 25, class 6): Slurm may start the job in
// any partition kept, so the job carries the strictest of every partition's changes -- the
// shortest time cut and time/node bounds, requeue and the longest checkpoint signal -- and
// every rule that fired, so whichever partition Slurm picks, its rules hold.
void merge_partition(Decision& into, const Decision& d, const std::string& name) {
  auto tighter = [](std::optional<int>& a, const std::optional<int>& b) {
    if (b && (!a || *b < *a)) a = b;
  };
  tighter(into.bound_time_min, d.bound_time_min);
  tighter(into.bound_max_nodes, d.bound_max_nodes);
  if (d.action == Action::rewrite) {
    tighter(into.rewrite.time_limit_min, d.rewrite.time_limit_min);
    into.rewrite.requeue = into.rewrite.requeue || d.rewrite.requeue;
    into.rewrite.signal_before_s = std::max(into.rewrite.signal_before_s, d.rewrite.signal_before_s);
  }
  // A job without a time limit was judged at each partition's default: a time cut written by
  // one partition must not exceed the shortest of those (another partition judged less).
  if (into.rewrite.time_limit_min && into.bound_time_min && *into.bound_time_min < *into.rewrite.time_limit_min)
    into.rewrite.time_limit_min = into.bound_time_min;
  if (severity(d.action) > severity(into.action)) into.action = d.action;
  if (d.action != Action::accept) {
    into.rules.insert(into.rules.end(), d.rules.begin(), d.rules.end());
    into.message += " In " + name + ": " + d.message;
  }
  into.granted_gpu_hours = std::max(into.granted_gpu_hours, d.granted_gpu_hours);
  into.shadow = into.shadow && d.shadow;
}

// A rewrite that moves the job into another partition (multi_node_fabric's twin) is judged
// there too, on the job as rewritten (class 5: every rule sees the others' rewrites): refused
// there, refused; its own cuts and checkpointing are merged; a further change of GPUs, nodes or
// partition means no rewrite satisfies both, and the job is refused.
Decision with_twin(const JobRequest& job, const Policy& policy, Decision d) {
  if (d.action != Action::rewrite || !d.rewrite.partition) return d;
  const Partition* twin = policy.find_partition(*d.rewrite.partition);
  if (!twin) return d;
  JobRequest moved = job;
  moved.partition = twin->name;
  const auto& rw = d.rewrite;
  if (rw.gpus_total) moved.gpus_total = *rw.gpus_total, moved.gpus_per_node = moved.gpus_per_task = moved.gpus_per_socket = 0;
  if (rw.gpus_per_node) moved.gpus_per_node = *rw.gpus_per_node, moved.gpus_total = moved.gpus_per_task = moved.gpus_per_socket = 0;
  if (rw.nodes) moved.nodes_min = moved.nodes_max = *rw.nodes;
  if (rw.time_limit_min) moved.time_limit_min = *rw.time_limit_min;
  Decision t = decide_in(moved, policy, twin);
  const bool reshaped = t.action == Action::rewrite && (t.rewrite.gpus_total || t.rewrite.gpus_per_node ||
                                                        t.rewrite.nodes || t.rewrite.partition);
  if (t.action == Action::reject || reshaped) {
    Decision r = d;
    r.action = Action::reject;
    r.rewrite = Rewrite{};
    r.rules.insert(r.rules.end(), t.rules.begin(), t.rules.end());
    r.message = "scaleguard: the job would be moved to partition " + twin->name + ", where it is " +
                (reshaped ? "changed again (" + t.summary + "): no rewrite satisfies both partitions"
                          : "refused: " + t.message);
    r.summary = "scaleguard: reject: refused in " + twin->name + " after the move";
    r.bound_time_min.reset(), r.bound_max_nodes.reset();
    r.granted_gpu_hours = 0;
    return r;
  }
  merge_partition(d, t, twin->name);
  d.action = Action::rewrite;
  d.bound_time_min = t.bound_time_min, d.bound_max_nodes = t.bound_max_nodes;  // the twin's: the job runs there
  d.granted_gpu_hours = t.granted_gpu_hours;
  return d;
}

// One partition, or each of a comma list: a job may start in any partition listed, so it is
// kept only in those that accept it (the list is rewritten) and bounded by the tightest.
Decision decide_list(const JobRequest& job, const Policy& policy) {
  std::vector<std::string> names;
  for (auto& n : text::split(job.partition, ','))
    if (!n.empty()) names.push_back(n);
  if (names.size() > 32)
    return reject_input("--partition", Error{"more than 32 partitions listed", "", 0, "", "list at most 32"});
  if (names.empty()) {
    const Partition* def = policy.default_partition();
    return def ? with_twin(job, policy, decide_in(job, policy, def)) : not_governed("(default)");
  }
  if (names.size() == 1) {
    const Partition* part = policy.find_partition(names[0]);
    return part ? with_twin(job, policy, decide_in(job, policy, part)) : not_governed(names[0]);
  }
  std::vector<std::string> kept, refused;
  std::optional<Decision> first;  // the first governed partition that accepts: its plan is the job's
  std::optional<Decision> first_refusal;
  std::string refusals;
  for (const auto& name : names) {
    const Partition* part = policy.find_partition(name);
    if (!part) {
      kept.push_back(name);
      continue;
    }
    JobRequest one = job;
    one.partition = name;
    Decision d = with_twin(one, policy, decide_in(one, policy, part));
    const bool same_shape = !first || (d.rewrite.gpus_total == first->rewrite.gpus_total &&
                                       d.rewrite.gpus_per_node == first->rewrite.gpus_per_node &&
                                       d.rewrite.nodes == first->rewrite.nodes &&
                                       d.rewrite.partition == first->rewrite.partition);
    if (d.action == Action::reject || !same_shape) {
      refused.push_back(name);
      refusals += " In " + name + ": " + (d.action == Action::reject ? d.message : "it would change the job differently (" + d.summary + ")");
      if (!first_refusal) first_refusal = d;
      continue;
    }
    kept.push_back(name);
    if (!first) {
      first = d;
      continue;
    }
    merge_partition(*first, d, name);
  }
  if (!first && !first_refusal) return not_governed(job.partition);
  if (kept.empty()) {
    Decision d = *first_refusal;
    d.message = "scaleguard: refused in every partition listed (" + job.partition + ")." + refusals;
    return d;
  }
  Decision d = first ? *first : not_governed(job.partition);
  if (!first) {  // only ungoverned partitions accept: keep the refusal's numbers for the record
    d.governed = true, d.envelope = first_refusal->envelope, d.shadow = first_refusal->shadow;
  }
  if (!refused.empty()) {
    std::string list;
    for (const auto& k : kept) list += (list.empty() ? "" : ",") + k;
    d.rewrite.partition = list;
    d.action = Action::rewrite;
    d.message += " Partition list rewritten to " + list + " (refused elsewhere)." + refusals;
  }
  return d;
}

// With Alternate= partitions: the job is judged as the list of those asked for (or the default)
// and their alternates. An alternate that refuses refuses the job: Slurm moves it there while the
// partition asked for is drained, which no partition list written back prevents. The list written
// back holds the partitions asked for that were kept, never the alternates (Slurm reaches them).
Decision decide_impl(const JobRequest& job, const Policy& policy) {
  if (job.alternate_partitions.empty()) return decide_list(job, policy);
  std::vector<std::string> asked;
  for (auto& n : text::split(job.partition, ','))
    if (!n.empty()) asked.push_back(n);
  if (asked.empty()) {
    const Partition* def = policy.default_partition();
    if (!def) return decide_list(job, policy);
    asked.push_back(def->name);
  }
  std::vector<std::string> all = asked, added;
  for (const auto& alt : job.alternate_partitions)
    if (!alt.empty() && std::find(all.begin(), all.end(), alt) == all.end()) all.push_back(alt), added.push_back(alt);
  if (added.empty()) return decide_list(job, policy);
  JobRequest listed = job;
  listed.partition = text::join(all, ",");
  Decision d = decide_list(listed, policy);
  if (d.action == Action::reject || !d.rewrite.partition) return d;
  const std::vector<std::string> kept = text::split(*d.rewrite.partition, ',');
  auto in_kept = [&](const std::string& n) { return std::find(kept.begin(), kept.end(), n) != kept.end(); };
  std::vector<std::string> refused, kept_asked;
  for (const auto& alt : added)
    if (!in_kept(alt)) refused.push_back(alt);
  if (!refused.empty()) {
    d.action = Action::reject;
    d.summary = "scaleguard: reject: refused in Alternate=" + text::join(refused, ",");
    d.message = "scaleguard: reject: Slurm sends this job to Alternate=" + text::join(refused, ",") +
                " while its partition is drained, and it is refused there." + d.message;
    return d;
  }
  for (const auto& n : asked)
    if (in_kept(n)) kept_asked.push_back(n);
  if (kept_asked.empty()) {  // only alternates accept: Slurm reaches them only from a refusing partition
    d.action = Action::reject;
    d.summary = "scaleguard: reject: refused in " + text::join(asked, ",");
    d.message = "scaleguard: reject: refused in every partition asked for (" + text::join(asked, ",") + ")." + d.message;
    return d;
  }
  // The job named no partition (the default was kept), or every one it named was kept.
  if (job.partition.empty() || kept_asked.size() == asked.size()) d.rewrite.partition.reset();
  else d.rewrite.partition = text::join(kept_asked, ",");
  return d;
}

}  // namespace

Hardware partition_hardware(const Policy& policy, const Partition& part) {
  Hardware hw;
  const int gpn = part.inst.gpus;
  hw.gpu = part.gpu;
  hw.instance = part.inst.name;
  hw.gpus_per_node = gpn;
  hw.network_gb_s = part.inst.network_gbps / 8;
  hw.in_network_reduction = part.inst.in_network_reduction;
  hw.on_demand_gpu_hour = part.inst.on_demand / gpn;
  hw.spot_gpu_hour = part.inst.spot / gpn;
  hw.spot = part.capacity == Capacity::spot;
  hw.node_mtbf_hours = policy.node_mtbf_hours;
  hw.assume = policy.catalog.assumptions;
  return hw;
}

Goals partition_goals(const Policy& policy, const Partition& part) {
  auto on = [&](RuleId id) { return part.rules[static_cast<int>(id)].enabled; };
  auto threshold = [&](RuleId id) { return part.rules[static_cast<int>(id)].threshold; };
  Goals goals;
  if (on(RuleId::single_gpu_max_hours)) goals.single_gpu_max_hours = threshold(RuleId::single_gpu_max_hours);
  goals.max_comm_ratio = on(RuleId::max_comm_ratio) ? threshold(RuleId::max_comm_ratio) : 1e9;
  goals.min_doubling_speedup = on(RuleId::min_doubling_speedup) ? threshold(RuleId::min_doubling_speedup) : 1;
  goals.distributed_min_gpu_hours = on(RuleId::distributed_min_gpu_hours) ? threshold(RuleId::distributed_min_gpu_hours) : 0;
  goals.max_zero_stage = policy.max_zero_stage;
  goals.max_nodes = part.max_nodes;
  goals.max_time_hours = part.max_time_min > 0 ? part.max_time_min / 60.0 : 0;
  goals.where = "partition " + part.name;
  return goals;
}

Decision decide(const JobRequest& job, const Policy& policy) noexcept {
  try {
    return decide_impl(job, policy);
  } catch (const std::exception& e) {
    Decision d;
    d.action = Action::reject;
    d.summary = "scaleguard: reject: internal error";
    d.message = std::string("scaleguard: internal error while judging the job (") + e.what() +
                "); please report it to the cluster admins";
    return d;
  } catch (...) {
    Decision d;
    d.action = Action::reject;
    d.summary = "scaleguard: reject: internal error";
    d.message = "scaleguard: internal error while judging the job; please report it to the cluster admins";
    return d;
  }
}

}  // namespace scaleguard
