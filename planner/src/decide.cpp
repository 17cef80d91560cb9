// decide(): a job as Slurm sees it + the policy -> accept / warn / rewrite / reject, with the
// plan, the rules that fired (with their numbers) and what to ask for instead.
// Pure and deterministic: no I/O, no globals; exceptions never leave decide().
#include <algorithm>
#include <cmath>

#include "scaleguard/decide.h"
#include "scaleguard/envelope.h"
#include "scaleguard/plan.h"
#include "scaleguard/policy.h"
#include "rules/judge.h"
#include "scaleguard/text.h"

namespace scaleguard {

namespace {

using rules::Judge;
using rules::Planning;

int severity(Action a) { return static_cast<int>(a); }  // accept < warn < rewrite < reject

bool same_layout(const Layout& a, const Layout& b) {
  return a.tp == b.tp && a.pp == b.pp && a.dp == b.dp && a.zero == b.zero && a.micro_batch == b.micro_batch &&
         a.recompute == b.recompute && a.interleave == b.interleave;
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
  // --train-spare-nodes: allocated on top of the plan's nodes, idle until one fails.
  if (job.spare_nodes > 0) add("SCALEGUARD_SPARE_NODES", std::to_string(job.spare_nodes));
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

// The checks every request passes before any rule: a refusal (or the accept of a job without
// GPUs), or nothing.
std::optional<Decision> check_request(const JobRequest& job, const Partition& part, const Envelope& env) {
  if (env.gpus > 100000 || std::max(1, env.nodes) > 100000 || job.gpus_per_node > 100000)
    return reject_input("GPU request", Error{"absurd GPU or node count", "", 0, "", "ask for at most 100000"});
  if (env.gpus <= 0) {
    if (job.has_intent())
      return reject_input("--train-* options", Error{"a training intent on a job without GPUs", "", 0, "",
                                                     "ask for GPUs, e.g. --gpus=1"});
    Decision d;
    d.summary = "scaleguard: accept: no GPUs requested";
    d.message = d.summary;
    return d;
  }
  if (job.probe && !job.has_intent())
    return reject_input("--train-probe", Error{"a probe job without the model it probes", "", 0, "",
                                               "add --train-model and --train-tokens"});
  if (job.spare_nodes != 0) {
    // --train-spare-nodes: whole nodes kept idle; the training needs at least one node and one
    // GPU besides them on the fewest nodes Slurm may give the job.
    const int fewest = std::min(std::max({1, job.nodes_min, job.nodes_listed}), std::max(1, env.nodes));
    if (job.spare_nodes < 0 || job.spare_nodes > kMaxSpareNodes)
      return reject_input("--train-spare-nodes", Error{text::format("%d spare nodes: out of range (0 to %d)",
                                                                    job.spare_nodes, kMaxSpareNodes),
                                                       "", 0, "", ""});
    if (job.spare_nodes >= fewest)
      return reject_input("--train-spare-nodes",
                          Error{text::format("%d spare node%s of a job of %d node%s leave%s none to train on",
                                             job.spare_nodes, job.spare_nodes == 1 ? "" : "s", fewest,
                                             fewest == 1 ? "" : "s", job.spare_nodes == 1 ? "s" : ""),
                                "", 0, "",
                                text::format("ask for --nodes=%d or more: the training's nodes plus the spares",
                                             job.spare_nodes + 1)});
    if (env.gpus - job.spare_nodes * env.gpus_per_node < 1)
      return reject_input("--train-spare-nodes",
                          Error{text::format("%d spare node%s of up to %d GPUs each hold every GPU of the job (%d)",
                                             job.spare_nodes, job.spare_nodes == 1 ? "" : "s", env.gpus_per_node,
                                             env.gpus),
                                "", 0, "", "ask for whole nodes, e.g. --nodes=N --gpus-per-node=G"});
  }
  if (env.time_limit_min <= 0)
    return reject_input("time limit", Error{"no time limit (--time=UNLIMITED) cannot be judged in partition " +
                                                part.name + ", which has no max_time in the policy",
                                            "", 0, "", "give --time=D-HH:MM:SS"});
  return std::nullopt;
}

// The --train-* numbers a plan needs, checked: a refusal, or nothing.
std::optional<Decision> check_intent(const JobRequest& job) {
  if (!(job.tokens >= 0 && job.tokens <= 1e18) || !(job.single_gpu_hours >= 0 && job.single_gpu_hours <= 87840) ||
      !(job.deadline_hours >= 0 && job.deadline_hours <= 87840))
    return reject_input("--train-* options", Error{"tokens, hours or deadline out of range", "", 0, "", ""});
  if ((job.eval_interval > 0) != (job.eval_tokens > 0))
    return reject_input("--train-eval-every",
                        Error{"--train-eval-every and --train-eval-tokens go together", "", 0, "",
                              "e.g. --train-eval-every=1000 --train-eval-tokens=20M: 20M tokens every 1000 steps"});
  if (!(job.eval_interval == 0 || (job.eval_interval >= 1 && job.eval_interval <= kMaxEvalEvery)) ||
      !(job.eval_tokens >= 0 && job.eval_tokens <= 1e18))
    return reject_input("--train-eval-every", Error{"evaluation interval or tokens out of range", "", 0, "", ""});
  return std::nullopt;
}

// Plans the training a job with intent asked for, before any rule judges it: on one GPU
// (what the "stay single" rules compare with) and on the GPUs asked for. A refusal when the
// intent cannot be planned.
std::optional<Decision> plan_training(const Judge& j, Planning& p) {
  const JobRequest& job = j.job;
  if (job.model.empty())
    return reject_input("--train-model", Error{"tokens, hours or evaluation given without a model", "", 0, "",
                                               "add --train-model (e.g. 350M or llama2-7b)"});
  auto model = parse_model_spec(job.model, j.policy.catalog);
  if (!model) return reject_input("--train-model", model.error());
  if (auto refused = check_intent(job)) return refused;
  if (!job.strategy.empty() && job.strategy != "auto") {
    auto s = parse_strategy(job.strategy);
    if (!s) return reject_input("--train-strategy", s.error());
    if (s.value() != "auto") p.pins.strategy = strategy_from_string(s.value()).value();
  }
  p.hw = partition_hardware(j.policy, j.part);
  p.goals = partition_goals(j.policy, j.part);
  p.goals.deadline_hours = job.deadline_hours;
  p.goals.explain = false;  // reasons are written once, for the plan that is kept
  p.goals.compare_rungs = false;
  Workload& w = p.w;
  w = Workload{model.value(), job.tokens, 0};
  w.eval_interval = job.eval_interval;
  w.eval_tokens = job.eval_tokens;
  // The batch is fixed before any plan (issue 37): the same for every GPU count compared,
  // and for the 1e9-token plans scaled below. The law needs the run's compute: given tokens,
  // else the first-principles estimate of the hours given (or the time limit on the GPUs).
  {
    Workload sized = w;
    if (sized.tokens <= 0)
      sized.tokens = tokens_for_single_gpu_hours(w.model, j.part.gpu,
                                                 job.single_gpu_hours > 0 ? job.single_gpu_hours : j.hours * j.gpus);
    resolve_batch(sized);
    w.global_batch = sized.global_batch, w.batch_law_tokens = sized.batch_law_tokens;
  }
  Workload per_1e9 = w;  // the same run over 1e9 tokens, scaled below
  per_1e9.tokens = 1e9;
  p.single = best_plan_at(per_1e9, p.hw, 1, p.free_pins, p.goals);  // the pinned strategy aside
  if (w.tokens <= 0 && job.single_gpu_hours > 0) {
    // Hours the user measured on one GPU: scale tokens so the one-GPU plan matches them.
    w.tokens = p.single ? 1e9 * job.single_gpu_hours / p.single.value().train_hours
                        : tokens_for_single_gpu_hours(w.model, p.hw.gpu, job.single_gpu_hours);
  }
  if (w.tokens <= 0) {
    // Only a model: the job trains for its time limit on what it asked for.
    auto probe = best_plan_at(per_1e9, p.hw, j.gpus, p.pins, p.goals);
    w.tokens = probe ? 1e9 * j.hours / probe.value().train_hours : 0;
  }
  if (p.single) scale_work(p.single.value(), w.tokens / 1e9);
  p.single_fits = static_cast<bool>(p.single);
  // The asked plan is usually the one kept: it is explained as it is searched, so the
  // explanation of the kept plan needs no second search of the same GPUs.
  p.explained = p.goals;
  p.explained.explain = true;
  p.asked = w.tokens > 0 ? best_plan_at(w, p.hw, j.gpus, p.pins, p.explained) : p.single;
  if (!p.asked && w.tokens <= 0) p.asked = best_plan_at(per_1e9, p.hw, j.gpus, p.pins, p.goals);
  p.deadline_needs_more =
      job.deadline_hours > 0 && (!p.single_fits || p.single.value().wall_hours > job.deadline_hours);
  return std::nullopt;
}

// The plan the rules kept: its reasons, the SCALEGUARD_* environment and its JSON.
void keep_plan(Judge& j) {
  const Planning& p = *j.plan;
  Plan& chosen = j.chosen;
  if (chosen.reasons.empty()) {  // not the asked plan as searched: explain it now
    auto ex = best_plan_at(p.w, p.hw, chosen.gpus, chosen.gpus == 1 ? p.free_pins : p.pins, p.explained);
    chosen.reasons = ex && same_layout(ex.value().layout, chosen.layout) ? ex.value().reasons : describe_plan(chosen);
  }
  add_plan_env(j.d, chosen, j.job, p.hw.assume);
  apply_topk_policy(j.d, chosen, j.part);
  j.d.plan_json = to_json(chosen);
}

// A cut of the job's GPUs into its rewrite: the training's GPUs and nodes, and the spare nodes
// (--train-spare-nodes) on top of them, each with as many GPUs as a training node when the job
// gave --gpus-per-node.
void cut_gpus(const Judge& j, Rewrite& rw) {
  const int gpus = *j.new_gpus;
  rw.gpus_total = j.held_gpus(gpus);
  rw.nodes = j.new_nodes.value_or(1) + j.spare_nodes;
  if (j.job.gpus_per_node > 0) rw.gpus_per_node = std::min(gpus, j.gpn);
}

// The spare nodes' share of a plan: the GPU-hours they sit idle for and what those cost (empty
// without spares).
std::string spares_line(const Judge& j, const Plan& p, double* cost) {
  *cost = 0;
  if (j.spare_nodes <= 0) return "";
  const double hours = j.spare_gpu_hours(p);
  *cost = hours * (j.spot ? j.plan->hw.spot_gpu_hour : j.plan->hw.on_demand_gpu_hour);
  const double total = (j.spot ? p.cost_spot : p.cost_on_demand) + *cost;
  return text::format(" Spares: %d node%s (%s) held idle for in-job restarts over the plan's %s h: +%s GPU-hours, "
                      "~%s %s; the job holds %s GPUs: %s GPU-hours, ~%s %s in all.",
                      j.spare_nodes, j.spare_nodes == 1 ? "" : "s", rules::gpus_str(j.spares_held(p.gpus)).c_str(),
                      text::num(p.wall_hours, 2).c_str(), text::num(hours, 1).c_str(), text::money(*cost).c_str(),
                      to_string(j.part.capacity), std::to_string(j.held_gpus(p.gpus)).c_str(),
                      text::num(p.gpu_hours + hours, 1).c_str(), text::money(total).c_str(),
                      to_string(j.part.capacity));
}

// A planned job's verdict: the rewrite of its GPUs and time, the message and the summary.
void write_plan_decision(Judge& j) {
  Decision& d = j.d;
  const Plan& chosen = j.chosen;
  const Workload& w = j.plan->w;
  d.action = j.max_action;
  if (d.action == Action::rewrite) {
    if (j.new_gpus && (*j.new_gpus != j.gpus || (j.measured_rewrite && j.new_nodes && *j.new_nodes < j.nodes)))
      cut_gpus(j, d.rewrite);
    if (j.new_time && *j.new_time != j.limit) d.rewrite.time_limit_min = *j.new_time;
  }
  std::string head = w.model.name + " (" + text::format("%.3g", w.model.params) + " parameters, " +
                     text::format("%.3g", w.tokens) + " tokens) on " + rules::gpus_str(j.gpus) + " " +
                     j.part.gpu.name + " in " + j.part.name + " (" + to_string(j.part.capacity) + ")";
  if (j.spare_nodes > 0)
    head += text::format(" + %d spare node%s (%s)", j.spare_nodes, j.spare_nodes == 1 ? "" : "s",
                         rules::gpus_str(j.spare_gpus).c_str());
  const char* verdict = d.action == Action::accept ? "accepted"
                        : d.action == Action::warn  ? "accepted with warnings"
                        : d.action == Action::rewrite ? "rewritten"
                                                      : "refused";
  d.message = "scaleguard: " + head + ": " + verdict + ".";
  if (j.have_plan) {
    d.message += " Plan: " + rules::plan_line(chosen);
    if (chosen.evaluations > 0)  // --train-eval-every: part of those hours, not extra
      d.message += text::format(" (%.0f evaluations of %.3g tokens: %s h of it)", chosen.evaluations, w.eval_tokens,
                                text::num(chosen.eval_hours, 2).c_str());
    d.message += ".";
    double spare_cost = 0;
    d.message += spares_line(j, chosen, &spare_cost);
  }
  for (const auto& r : d.rules) d.message += " [" + r.id + "] " + r.detail + ".";
  if (!j.have_plan && !j.suggestion) return;
  std::string ids;
  for (const auto& r : d.rules) ids += (ids.empty() ? " [" : ",") + r.id;
  if (!ids.empty()) ids += "]";
  // A refused job shows what to run instead; the others show the plan that will run.
  const Plan& shown = (d.action == Action::reject || !j.have_plan) && j.suggestion ? *j.suggestion : chosen;
  // With spares the cost is the whole allocation's (their idle share on top of the plan's).
  double spare_cost = 0;
  spares_line(j, shown, &spare_cost);
  // comm= (exposed communication / compute) and ckpt= (seconds) feed `scaleguard report`'s
  // comm_heavy flag and its checkpoint-aware waste (docs/report.md).
  d.summary = text::format(
      "scaleguard: %s%s: %s%s gpus=%d nodes=%d tp=%d pp=%d dp=%d zero=%d %sh ~%s %s comm=%s ckpt=%lds%s",
      to_string(d.action), ids.c_str(), &shown == &chosen ? "" : "use ", to_string(shown.strategy), shown.gpus,
      shown.nodes, shown.layout.tp, shown.layout.pp, shown.layout.dp, shown.layout.zero,
      text::num(shown.wall_hours, 1).c_str(),
      text::money((j.spot ? shown.cost_spot : shown.cost_on_demand) + spare_cost).c_str(), to_string(j.part.capacity),
      text::num(shown.comm_ratio, 3).c_str(), ckpt_seconds(shown, j.job),
      j.spare_nodes > 0 ? text::format(" spares=%d", j.spare_nodes).c_str() : "");
}

// Every job's verdict: the action, a request's rewrite, the bounds and what to ask for instead.
Decision finish(Judge& j) {
  Decision& d = j.d;
  d.action = j.max_action;
  if (d.action != Action::rewrite) d.rewrite = Rewrite{};
  if (d.action == Action::rewrite && !j.job.has_intent()) {
    if (j.new_gpus && *j.new_gpus != j.gpus) cut_gpus(j, d.rewrite);
    if (j.new_time && *j.new_time != j.limit) d.rewrite.time_limit_min = *j.new_time;
  }
  if (d.action == Action::rewrite && d.rewrite.empty()) d.action = Action::warn;  // nothing to change after all
  if (d.action != Action::reject) {
    d.bound_max_nodes = j.env.bound_max_nodes;
    d.bound_time_min = j.env.bound_time_min;
    d.granted_gpu_hours = j.granted;
  }
  if (d.summary.empty())
    d.summary = text::format("scaleguard: %s: %d GPU(s) x %s h = %s GPU-hours in %s", to_string(d.action),
                             j.held_gpus(j.gpus), text::num(j.hours).c_str(),
                             text::num(j.held_gpus(j.gpus) * j.hours, 1).c_str(), j.part.name.c_str());
  if (d.message.empty()) {
    d.message = d.summary + ".";
    for (const auto& r : d.rules) d.message += " [" + r.id + "] " + r.detail + ".";
  }
  if ((j.ask_gpus || j.ask_time || j.ask_partition) && d.action != Action::accept)
    d.message += " Ask for instead:" + j.ask_text() + ".";
  return std::move(d);
}

// Judges the job in one governed partition: the envelope, then the rule table over the job's
// request (no intent) or the plan for it (rules/table.cpp, docs/policy.md "Order of judgement").
Decision decide_in(const JobRequest& job, const Policy& policy, const Partition* part) {
  // What Slurm may grant the job here, whatever the request's literal numbers say.
  const Envelope env = envelope_of(job, *part);
  auto judged = [&](Decision r) {
    r.governed = true, r.shadow = part->shadow, r.envelope = env;
    return r;
  };
  if (auto refused = check_request(job, *part, env)) return judged(std::move(*refused));
  Judge j(job, policy, *part, env);
  if (!job.has_intent()) {
    rules::run(rules::table(Basis::request), j);
    j.d.plan_env.emplace_back("SCALEGUARD_GPUS", std::to_string(j.new_gpus.value_or(j.gpus)));
    j.d.plan_env.emplace_back("SCALEGUARD_NODES", std::to_string(j.new_nodes.value_or(j.nodes)));
    if (job.spare_nodes > 0) j.d.plan_env.emplace_back("SCALEGUARD_SPARE_NODES", std::to_string(job.spare_nodes));
    if (!job.ckpt_dir.empty()) j.d.plan_env.emplace_back("SCALEGUARD_CKPT_DIR", job.ckpt_dir);
    return judged(finish(j));
  }
  Planning p;
  if (auto refused = plan_training(j, p)) return judged(std::move(*refused));
  if (job.probe)
    return judged(judge_probe(job, policy, *part, env, p.single_fits ? &p.single.value() : nullptr,
                              p.asked ? &p.asked.value() : nullptr, j));
  j.plan = &p;
  if (p.asked) j.chosen = p.asked.value(), j.have_plan = true;
  rules::run(rules::table(Basis::plan), j);
  if (j.have_plan) keep_plan(j);
  write_plan_decision(j);
  return judged(finish(j));
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

// The partitions a job is judged in, as one list: those it asks for (its --partition list as
// written, empty names skipped; none: the policy's default), then the Alternate= partitions
// Slurm may move it to (JobRequest::alternate_partitions): judged like the others, never written
// back. `text`: the list as messages name it.
struct PartitionList {
  std::vector<std::string> asked;
  std::vector<std::string> alternates;  // none of them asked for, each once
  std::string text;
};

PartitionList partition_list(const JobRequest& job, const Policy& policy) {
  PartitionList l;
  for (auto& n : text::split(job.partition, ','))
    if (!n.empty()) l.asked.push_back(n);
  l.text = job.partition;
  if (job.alternate_partitions.empty()) return l;
  std::vector<std::string> asked = l.asked;
  if (asked.empty()) {
    const Partition* def = policy.default_partition();
    if (!def) return l;
    asked.push_back(def->name);
  }
  std::vector<std::string> alternates;
  for (const auto& alt : job.alternate_partitions)
    if (!alt.empty() && std::find(asked.begin(), asked.end(), alt) == asked.end() &&
        std::find(alternates.begin(), alternates.end(), alt) == alternates.end())
      alternates.push_back(alt);
  if (alternates.empty()) return l;
  l.asked = std::move(asked), l.alternates = std::move(alternates);
  std::vector<std::string> all = l.asked;
  all.insert(all.end(), l.alternates.begin(), l.alternates.end());
  l.text = text::join(all, ",");
  return l;
}

// One partition, or each of a list: a job may start in any partition listed, so it is kept
// only in those that accept it (the list is rewritten) and bounded by the tightest. `*written`:
// the partitions the decision's rewrite names (those kept, or the one it moves the job to).
Decision decide_list(const JobRequest& job, const Policy& policy, const std::vector<std::string>& names,
                     const std::string& listed, std::vector<std::string>* written) {
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
  if (!first && !first_refusal) return not_governed(listed);
  if (kept.empty()) {
    Decision d = *first_refusal;
    d.message = "scaleguard: refused in every partition listed (" + listed + ")." + refusals;
    return d;
  }
  Decision d = first ? *first : not_governed(listed);
  if (!first) {  // only ungoverned partitions accept: keep the refusal's numbers for the record
    d.governed = true, d.envelope = first_refusal->envelope, d.shadow = first_refusal->shadow;
  }
  if (d.rewrite.partition) *written = {*d.rewrite.partition};  // moved to a twin
  if (!refused.empty()) {
    const std::string list = text::join(kept, ",");
    d.rewrite.partition = list;
    d.action = Action::rewrite;
    d.message += " Partition list rewritten to " + list + " (refused elsewhere)." + refusals;
    *written = std::move(kept);
  }
  return d;
}

// With Alternate= partitions: the job is judged as one list, the partitions asked for (or the
// default) and their alternates. An alternate that refuses refuses the job: Slurm moves it there
// while the partition asked for is drained, which no partition list written back prevents. The
// list written back holds the partitions asked for that were kept, never the alternates (Slurm
// reaches them).
Decision decide_impl(const JobRequest& job, const Policy& policy) {
  const PartitionList list = partition_list(job, policy);
  std::vector<std::string> names = list.asked, kept;
  names.insert(names.end(), list.alternates.begin(), list.alternates.end());
  Decision d = decide_list(job, policy, names, list.text, &kept);
  if (list.alternates.empty() || d.action == Action::reject || !d.rewrite.partition) return d;
  auto in_kept = [&](const std::string& n) { return std::find(kept.begin(), kept.end(), n) != kept.end(); };
  std::vector<std::string> refused, kept_asked;
  for (const auto& alt : list.alternates)
    if (!in_kept(alt)) refused.push_back(alt);
  if (!refused.empty()) {
    d.action = Action::reject;
    d.summary = "scaleguard: reject: refused in Alternate=" + text::join(refused, ",");
    d.message = "scaleguard: reject: Slurm sends this job to Alternate=" + text::join(refused, ",") +
                " while its partition is drained, and it is refused there." + d.message;
    return d;
  }
  for (const auto& n : list.asked)
    if (in_kept(n)) kept_asked.push_back(n);
  if (kept_asked.empty()) {  // only alternates accept: Slurm reaches them only from a refusing partition
    d.action = Action::reject;
    d.summary = "scaleguard: reject: refused in " + text::join(list.asked, ",");
    d.message = "scaleguard: reject: refused in every partition asked for (" + text::join(list.asked, ",") + ")." + d.message;
    return d;
  }
  // The job named no partition (the default was kept), or every one it named was kept.
  if (job.partition.empty() || kept_asked.size() == list.asked.size()) d.rewrite.partition.reset();
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
