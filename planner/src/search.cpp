// The strategy search: the ladder single -> ddp -> zero -> pipeline -> tensor -> hybrid at a
// given GPU count, and the choice of the GPU count itself.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cmath>
#include <optional>

#include "scaleguard/plan.h"
#include "scaleguard/text.h"

namespace scaleguard {

namespace {
constexpr double kGiB = 1024.0 * 1024 * 1024;
constexpr Strategy kLadder[] = {Strategy::single, Strategy::ddp, Strategy::zero,
                                Strategy::pipeline, Strategy::tensor, Strategy::hybrid};

bool better(const Plan& a, const Plan& b) {  // is a better than b?
  // Step times within 0.1% are a tie: then less recompute and bigger micro-batches win.
  if (std::fabs(a.step_seconds - b.step_seconds) > 1e-3 * b.step_seconds) return a.step_seconds < b.step_seconds;
  if (a.layout.recompute != b.layout.recompute) return a.layout.recompute < b.layout.recompute;
  return a.layout.micro_batch > b.layout.micro_batch;
}

// The best layout of one rung at `gpus`, over tp, pp, ZeRO stage, recompute and micro-batch.
struct RungResult {
  bool any = false;          // some layout of this rung exists at this GPU count
  bool fits = false;
  Plan best;                 // fastest fitting plan (valid when fits)
  double least_memory = 0;   // bytes, smallest need seen (for "does not fit" reasons)
  std::optional<Plan> no_progress;  // a layout that fits memory but whose failures outpace progress
};

RungResult search_rung(Strategy rung, const Workload& w, const Hardware& hw, int gpus, const Pins& pins,
                       const Goals& goals) {
  RungResult r;
  const ModelSpec& m = w.model;
  const int gpn = std::max(1, hw.gpus_per_node);
  const int B = w.global_batch > 0 ? w.global_batch : default_global_batch(m);
  std::vector<int> tps, pps;
  const bool tensor = rung == Strategy::tensor || rung == Strategy::hybrid;
  const bool pipeline = rung == Strategy::pipeline || rung == Strategy::hybrid;
  if (tensor) {
    for (int t = 2; t <= std::min(gpn, gpus); t *= 2)
      if (gpus % t == 0 && m.heads % t == 0) tps.push_back(t);
  } else {
    tps.push_back(1);
  }
  if (pipeline) {
    for (int p = 2; p <= std::min(gpus, m.layers); ++p)
      if (gpus % p == 0) pps.push_back(p);
  } else {
    pps.push_back(1);
  }
  for (int tp : tps) {
    if (pins.tp && *pins.tp != tp) continue;
    for (int pp : pps) {
      if (pins.pp && *pins.pp != pp) continue;
      if (gpus % (tp * pp) != 0) continue;
      const int dp = gpus / (tp * pp);
      if (pins.dp && *pins.dp != dp) continue;
      if (rung == Strategy::single && gpus != 1) continue;
      if ((rung == Strategy::ddp || rung == Strategy::zero) && dp < 2) continue;
      int zlo = 0, zhi = 0;
      if (rung == Strategy::zero) zlo = 1, zhi = 3;
      // Model parallelism combines with ZeRO-1; tensor parallelism alone also with ZeRO-2/3
      // (sharded within each dp group, as the runner does); pipelines keep ZeRO-1 at most
      // (the runner refuses pp with ZeRO-2/3: every micro-batch would re-gather a stage).
      else if (pipeline) zhi = dp > 1 ? 1 : 0;
      else if (tensor) zhi = dp > 1 ? 3 : 0;
      // Never propose a stage the runner cannot execute (policy max_zero_stage).
      zhi = std::min(zhi, goals.max_zero_stage);
      const int local = (B + dp - 1) / dp;
      // ZeRO-2 times exactly like ZeRO-1 (same reduce-scatter and all-gather) and only needs
      // less memory, so it is evaluated only where ZeRO-1 did not fit: bit i of
      // zero1_fits[recompute] is micro-batch first * 2^i.
      std::array<std::uint64_t, 3> zero1_fits{};
      for (int zero = zlo; zero <= zhi; ++zero) {
        if (pins.zero && *pins.zero != zero) continue;
        for (Recompute rc : {Recompute::none, Recompute::selective, Recompute::full}) {
          if (pins.recompute && *pins.recompute != rc) continue;
          if (!pins.recompute && m.recompute && *m.recompute != rc) continue;
          // Recompute only adds FLOPs: once a plan of this rung loses nothing to
          // communication or bubbles, no recomputing layout can be faster.
          if (rc != Recompute::none && r.fits && r.best.step_seconds - r.best.fixed_seconds <= r.best.compute_seconds * (1 + 1e-9) &&
              r.best.layout.recompute == Recompute::none)
            continue;
          // Powers of two up to the local batch; a pinned size (any size, even beyond
          // the local batch) is the only one tried.
          const int first = pins.micro_batch.value_or(1);
          const int last = pins.micro_batch ? first : local;
          int bit = 0;
          for (int b = first; b <= last; b *= 2, ++bit) {
            const std::uint64_t mask = bit < 64 ? std::uint64_t{1} << bit : 0;
            if (zero == 2 && (zero1_fits[int(rc)] & mask)) continue;
            Layout l{tp, pp, dp, zero, b, rc, pins.interleave.value_or(1)};
            if (!valid_interleave(m, l, B)) continue;
            r.any = true;
            // Memory first: it is cheap, and a layout that does not fit needs no timing.
            const double need = memory_per_gpu(m, l, B, hw.assume).total();
            if (r.least_memory == 0 || need < r.least_memory) r.least_memory = need;
            if (need > hw.gpu.memory_gib * kGiB) break;  // larger micro-batches only grow
            Plan p = evaluate(w, hw, l);
            if (zero == 1 && p.fits) zero1_fits[int(rc)] |= mask;
            if (p.fits && (!r.fits || better(p, r.best))) r.best = p, r.fits = true;
            // Fits in memory, but the job fails faster than it checkpoints and restarts.
            if (!p.fits && std::isinf(p.failure_overhead) && !r.no_progress) r.no_progress = p;
          }
        }
      }
    }
  }
  return r;
}

// " (ZeRO-1 at most, max_zero_stage)" for the zero rung when the runner caps the stage.
std::string capped_zero(Strategy rung, const Goals& goals) {
  if (rung != Strategy::zero || goals.max_zero_stage >= 3) return "";
  return text::format(" (ZeRO-%d at most, max_zero_stage)", goals.max_zero_stage);
}

// What a rung must keep within max_comm_ratio to "meet the policy": all time that is not
// compute (exposed communication and pipeline bubbles) relative to compute.
// The fixed per-step costs (optimizer update, host) are not communication: left out.
double overhead_ratio(const Plan& p) {
  return (p.step_seconds - p.fixed_seconds - p.compute_seconds) / p.compute_seconds;
}

std::string gib(double bytes) { return text::num(bytes / kGiB, 1) + " GiB"; }

// Why a layout that fits in memory can never finish (failure factor infinite).
std::string outpaced(const Plan& p) {
  return "failures outpace progress: on " + std::to_string(p.nodes) + " node(s) the job fails every " +
         text::num(p.job_mtbf_hours * 60, 1) + " min on average, and each failure costs half a checkpoint interval (" +
         text::num(p.ckpt_interval_s / 120, 1) + " min, checkpoint save " + text::num(p.ckpt_save_s, 0) +
         " s) plus a restart (" + text::num(p.restart_s / 60, 1) + " min)";
}

// Why a ZeRO-3 plan rather than model parallelism (issue 27): what sharding costs and saves,
// and the pipeline and tensor rungs' best at the same GPU count, searched for the explanation.
std::string why_zero3(const Plan& p, const Workload& w, const Hardware& hw, const Pins& pins, const Goals& goals) {
  Pins other = pins;
  other.strategy.reset(), other.zero.reset(), other.tp.reset(), other.pp.reset(), other.dp.reset();
  std::string out = text::format(
      "why ZeRO-3: weights, gradients and optimizer state at 1/%d (%s of model states + %s of gathered units per "
      "GPU); 1.5x the DDP traffic every micro-batch, %s s of its %s s exposed; step %s s",
      p.layout.dp, gib(p.memory.states()).c_str(), gib(p.memory.gathered).c_str(),
      text::num(p.dp_exposed_seconds, 3).c_str(), text::num(p.dp_comm_seconds, 3).c_str(),
      text::num(p.step_seconds, 3).c_str());
  if (!goals.compare_rungs) return out + " (scaleguard plan compares it with the pipeline and tensor rungs)";
  for (Strategy rung : {Strategy::pipeline, Strategy::tensor}) {
    const RungResult r = search_rung(rung, w, hw, p.gpus, other, goals);
    if (!r.any) continue;
    out += std::string(" vs ") + to_string(rung);
    if (!r.fits) {
      out += " not fitting (" + gib(r.least_memory) + ")";
      continue;
    }
    const Layout& l = r.best.layout;
    out += " " + text::num(r.best.step_seconds, 3) + " s" +
           (rung == Strategy::pipeline
                ? text::format(" (pp=%d, bubble %.0f%%)", l.pp, 100 * r.best.bubble_fraction)
                : text::format(" (tp=%d, tensor-parallel comm %s s)", l.tp, text::num(r.best.tp_comm_seconds, 3).c_str()));
  }
  return out;
}

// The explanation lines of a chosen plan.
void explain(Plan& p, const std::vector<std::string>& skipped, std::string verdict, const Workload& w,
             const Hardware& hw, const Pins& pins, const Goals& goals) {
  for (auto& s : skipped) p.reasons.push_back("ladder: " + s);
  p.reasons.push_back(std::move(verdict));
  if (p.layout.zero == 3 && p.layout.tp == 1 && p.layout.pp == 1) p.reasons.push_back(why_zero3(p, w, hw, pins, goals));
  for (auto& s : describe_plan(p)) p.reasons.push_back(std::move(s));
}

}  // namespace

std::vector<std::string> describe_plan(const Plan& p) {
  std::vector<std::string> out;
  const auto& l = p.layout;
  const auto& mem = p.memory;
  out.push_back(text::format("layout: tp=%d pp=%d dp=%d zero=%d micro-batch=%d recompute=%s%s on %d GPU(s), %d node(s)",
                             l.tp, l.pp, l.dp, l.zero, l.micro_batch, to_string(l.recompute),
                             l.interleave > 1 ? text::format(" interleave=%d", l.interleave).c_str() : "", p.gpus,
                             p.nodes));
  out.push_back("memory per GPU " + gib(mem.total()) + " of " + text::num(p.gpu_memory_gib, 0) +
                " GiB (weights " + gib(mem.weights) + ", gradients " + gib(mem.gradients) + ", optimizer " +
                gib(mem.optimizer) + ", activations " + gib(mem.activations) +
                (mem.gathered > 0 ? ", gathered " + gib(mem.gathered) : std::string()) + ", buffers " +
                gib(mem.overhead) + ")");
  out.push_back("step " + text::num(p.step_seconds, 3) + " s: compute " + text::num(p.compute_seconds, 3) +
                " s (" + text::num(p.memory_bound_seconds, 3) + " s of it memory-bound), exposed communication " +
                text::num(p.tp_comm_seconds + p.pp_comm_seconds + p.dp_exposed_seconds, 3) + " s (comm ratio " +
                text::num(p.comm_ratio, 3) + "), pipeline bubble " + text::num(100 * p.bubble_fraction, 1) +
                "%, fixed per step " + text::num(p.fixed_seconds, 3) + " s (optimizer update, host)");
  out.push_back(text::num(p.tflops_per_gpu, 1) + " TFLOP/s per GPU (MFU " + text::num(100 * p.mfu, 1) + "%), " +
                text::num(p.steps, 0) + " steps of " + std::to_string(p.global_batch) + " sequences");
  out.push_back(text::num(p.wall_hours, 2) + " h wall, " + text::num(p.gpu_hours, 1) + " GPU-hours, " +
                text::money(p.cost_on_demand) + " on-demand / " + text::money(p.cost_spot) + " spot");
  if (p.evaluations > 0)
    out.push_back("evaluation: " + text::num(p.evaluations, 0) + " forward passes, " + text::num(p.eval_hours, 2) +
                  " h of the " + text::num(p.train_hours, 2) + " h before failures (" +
                  text::num(100 * p.eval_hours / p.train_hours, 1) + "%)");
  out.push_back("checkpoint every " + text::num(p.ckpt_interval_s / 60, 1) + " min (Daly; save " +
                text::num(p.ckpt_save_s, 1) + " s): failures add " + text::num(100 * p.failure_overhead, 2) + "%");
  if (std::string topk = topk_reason(p); !topk.empty()) out.push_back(topk);
  return out;
}

Result<Plan> best_plan_at(const Workload& work, const Hardware& hw, int gpus, const Pins& pins, const Goals& goals) {
  Workload w = work;  // the default batch is resolved once, not in every evaluate()
  if (w.global_batch <= 0) w.global_batch = default_global_batch(w.model);
  if (gpus < 1 || gpus > goals.max_gpus)
    return Error{text::format("%d GPUs is out of range", gpus), "", 0, "gpus",
                 text::format("ask for 1 to %d GPUs", goals.max_gpus)};
  std::vector<std::string> skipped;
  RungResult fallback;
  double least_memory = 0;
  std::optional<Plan> no_progress;
  for (Strategy rung : kLadder) {
    if (pins.strategy && *pins.strategy != rung) continue;
    RungResult r = search_rung(rung, w, hw, gpus, pins, goals);
    if (!r.any) continue;
    if (least_memory == 0 || (r.least_memory > 0 && r.least_memory < least_memory)) least_memory = r.least_memory;
    if (!r.fits) {
      if (r.no_progress && !no_progress) no_progress = r.no_progress;
      if (goals.explain)
        skipped.push_back(std::string(to_string(rung)) + capped_zero(rung, goals) +
                          (r.no_progress ? " fits in memory but " + outpaced(*r.no_progress)
                                         : " does not fit (needs at least " + gib(r.least_memory) + " per GPU > " +
                                               text::num(hw.gpu.memory_gib, 0) + " GiB)"));
      continue;
    }
    if (overhead_ratio(r.best) <= goals.max_comm_ratio) {
      Plan p = r.best;
      if (!goals.explain) return p;
      explain(p, skipped,
              std::string("ladder: ") + to_string(rung) + " is the simplest strategy that fits" +
                  (skipped.empty() ? "" : " after the rungs above"),
              w, hw, pins, goals);
      return p;
    }
    if (goals.explain)
      skipped.push_back(std::string(to_string(rung)) + " fits but loses " + text::num(overhead_ratio(r.best), 2) +
                      " of its compute time to communication and pipeline bubbles (> " +
                      text::num(goals.max_comm_ratio, 2) + ", step " + text::num(r.best.step_seconds, 3) + " s" +
                      (r.best.layout.zero > 0 ? text::format(" with ZeRO-%d", r.best.layout.zero) : "") + ")");
    if (!fallback.fits || r.best.step_seconds < fallback.best.step_seconds) fallback = r;
  }
  if (fallback.fits) {
    Plan p = fallback.best;
    if (!goals.explain) return p;
    explain(p, skipped,
            std::string("ladder: no strategy keeps communication and bubbles within ") +
                text::num(goals.max_comm_ratio, 2) + "; taking the fastest that fits, " + to_string(p.strategy),
            w, hw, pins, goals);
    return p;
  }
  std::string what = pins.strategy ? std::string(to_string(*pins.strategy)) + " on " : std::string();
  if (no_progress)
    return Error{w.model.name + " on " + what + text::format("%d GPU(s) of ", gpus) + hw.gpu.name + " would never finish: " +
                     outpaced(*no_progress),
                 "", 0, "gpus",
                 "use fewer nodes, faster checkpoint storage (checkpoint_write_gb_s), or check node_mtbf_hours"};
  if (least_memory == 0)
    return Error{"no " + what + text::format("layout exists on %d GPU(s)", gpus), "", 0, "gpus",
                 pins.interleave && *pins.interleave > 1
                     ? "an interleaved schedule needs pp > 1, layers divisible by pp x interleave and micro-batches "
                       "per step divisible by pp"
                     : "pick a GPU count the strategy can split (e.g. a multiple of the pinned tp*pp)"};
  return Error{w.model.name + " does not fit " + what + text::format("%d GPU(s) of ", gpus) + hw.gpu.name +
                   ": needs at least " + gib(least_memory) + " per GPU" +
                   (goals.max_zero_stage < 3 ? text::format(" with ZeRO stages up to %d (max_zero_stage)", goals.max_zero_stage) : ""),
               "", 0, "gpus",
               goals.max_zero_stage < 3
                   ? "ask for more GPUs or a larger GPU; higher ZeRO stages need a runner that implements them "
                     "(policy max_zero_stage)"
                   : "ask for more GPUs, a larger GPU, or allow sharding/model parallelism"};
}

Result<Plan> fewest_gpus_plan(const Workload& w, const Hardware& hw, int from, const Pins& pins, const Goals& goals) {
  Result<Plan> cur = Error{"", "", 0, "", ""};
  int n = std::max(1, from);
  for (; n <= goals.max_gpus; n *= 2) {
    cur = best_plan_at(w, hw, n, pins, goals);
    if (cur) return cur;
  }
  return best_plan_at(w, hw, std::min(n, goals.max_gpus), pins, goals);
}

Result<Plan> choose_plan(const Workload& w, const Hardware& hw, const Pins& pins, const Goals& goals) {
  if (pins.tp && pins.pp && pins.dp) return best_plan_at(w, hw, *pins.tp * *pins.pp * *pins.dp, pins, goals);
  Result<Plan> cur = fewest_gpus_plan(w, hw, 1, pins, goals);
  if (!cur) return cur;
  int n = cur.value().gpus;
  const double target = goals.deadline_hours > 0 ? goals.deadline_hours : goals.single_gpu_max_hours;
  Plan plan = cur.value();
  if (n == 1 && plan.gpu_hours < goals.distributed_min_gpu_hours && goals.deadline_hours <= 0) {
    if (goals.explain)
      plan.reasons.push_back("stays on one GPU: " + text::num(plan.gpu_hours, 1) + " GPU-hours < " +
                           text::num(goals.distributed_min_gpu_hours, 0) + " (distributed_min_gpu_hours)");
    return plan;
  }
  // Double while the run is longer than the target and doubling still pays.
  while (plan.wall_hours > target && n * 2 <= goals.max_gpus) {
    auto next = best_plan_at(w, hw, n * 2, pins, goals);
    if (!next) break;
    const double speedup = plan.wall_hours / next.value().wall_hours;
    if (speedup < goals.min_doubling_speedup) {
      if (goals.explain)
        plan.reasons.push_back(text::format("stops at %d GPUs: doubling to %d speeds up only %.2fx < %.2g", n, n * 2,
                                          speedup, goals.min_doubling_speedup));
      return plan;
    }
    if (next.value().comm_ratio > goals.max_comm_ratio) {
      if (goals.explain)
        plan.reasons.push_back(text::format("stops at %d GPUs: at %d the comm ratio %.2f exceeds %.2g", n, n * 2,
                                          next.value().comm_ratio, goals.max_comm_ratio));
      return plan;
    }
    plan = next.value();
    n *= 2;
  }
  if (goals.explain)
    plan.reasons.push_back(plan.wall_hours <= target
                             ? text::format("%d GPU(s) finish in %.1f h, within the %.0f h target", n, plan.wall_hours, target)
                             : text::format("%d GPU(s): the most the goals allow (%.1f h)", n, plan.wall_hours));
  return plan;
}

}  // namespace scaleguard
