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

// The divisors of n, ascending, in O(sqrt n): decide() runs this for every split it tries.
void divisors(int n, std::vector<int>& out) {
  int d = 1;
  for (; d * d < n; ++d)
    if (n % d == 0) out.push_back(d);
  const size_t low = out.size();
  if (d * d == n) out.push_back(d);
  for (size_t i = low; i-- > 0;) out.push_back(n / out[i]);
}

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
  bool batch_limited = false; // some split was skipped because dp would exceed the global batch
};

RungResult search_rung(Strategy rung, const Workload& w, const Hardware& hw, int gpus, const Pins& pins,
                       const Goals& goals) {
  RungResult r;
  const ModelSpec& m = w.model;
  const int gpn = std::max(1, hw.gpus_per_node);
  const int B = w.global_batch > 0 ? w.global_batch : default_global_batch(m, w.tokens);
  std::vector<int> tps, pps, sizes;
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
      // The batch is a constraint: more data-parallel ranks than sequences cannot be used.
      if (dp > B) {
        r.batch_limited = true;
        continue;
      }
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
      // zero1_fits[recompute] is micro-batch sizes[i].
      std::array<std::uint64_t, 3> zero1_fits{};
      // Micro-batches that divide the per-rank batch (dp x micro-batch x accumulation is the
      // batch asked, issue 37), smallest first; a pinned size (any size) is the only one tried.
      sizes.clear();
      if (pins.micro_batch) sizes.push_back(*pins.micro_batch);
      else
        divisors(local, sizes);
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
          for (size_t i = 0; i < sizes.size(); ++i) {
            const int b = sizes[i];
            const std::uint64_t mask = i < 64 ? std::uint64_t{1} << i : 0;
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

// Where the global batch came from and how the layout splits it (issue 37).
std::string batch_line(const Plan& p) {
  const Layout& l = p.layout;
  std::string out = text::format("global batch %d sequences (%sM tokens) = dp %d x micro-batch %d x %d accumulation",
                                 p.global_batch, text::num(p.tokens_per_step / 1e6, 2).c_str(), l.dp, l.micro_batch,
                                 p.micro_batches);
  if (p.global_batch != p.batch_asked)
    out += text::format(" (%d rounded up to whole micro-batches on %d data-parallel ranks)", p.batch_asked, l.dp);
  if (p.batch_law_tokens > 0)
    out += "; the default: DeepSeek LLM's batch law 0.292 x C^0.3271 gives " + text::num(p.batch_law_tokens / 1e6, 2) +
           "M tokens for this run" +
           (p.batch_law_tokens > kMaxDefaultBatchTokens ? ", capped at 4.19M (Llama 2's batch)" : std::string()) +
           ", rounded to a power of two sequences (--global-batch sets it)";
  else
    out += "; as asked (--global-batch)";
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
  out.push_back(batch_line(p));
  out.push_back(text::num(p.tflops_per_gpu, 1) + " TFLOP/s per GPU (MFU " + text::num(100 * p.mfu, 1) + "%), " +
                text::num(p.steps, 0) + " steps of " + std::to_string(p.global_batch) + " sequences");
  out.push_back(text::num(p.wall_hours, 2) + " h wall, " + text::num(p.gpu_hours, 1) + " GPU-hours, " +
                text::money(p.cost_on_demand) + " on-demand / " + spot_cost_text(p));
  if (p.evaluations > 0)
    out.push_back("evaluation: " + text::num(p.evaluations, 0) + " forward passes, " + text::num(p.eval_hours, 2) +
                  " h of the " + text::num(p.train_hours, 2) + " h before failures (" +
                  text::num(100 * p.eval_hours / p.train_hours, 1) + "%)");
  if (p.ckpt_local_interval_s > 0)
    out.push_back("local checkpoint every " + text::num(p.ckpt_local_interval_s / 60, 1) + " min (Daly; save + partner copy " +
                  text::num(p.ckpt_local_save_s, 1) + " s), shared every " + text::num(p.ckpt_interval_s / 60, 1) +
                  " min (save " + text::num(p.ckpt_save_s, 1) + " s), restart " + text::num(p.restart_s / 60, 1) +
                  " min: failures add " + text::num(100 * p.failure_overhead, 2) + "%");
  else
    out.push_back("checkpoint every " + text::num(p.ckpt_interval_s / 60, 1) + " min (Daly; save " +
                  text::num(p.ckpt_save_s, 1) + " s): failures add " + text::num(100 * p.failure_overhead, 2) + "%");
  if (std::string topk = topk_reason(p); !topk.empty()) out.push_back(topk);
  return out;
}

Result<Plan> best_plan_at(const Workload& work, const Hardware& hw, int gpus, const Pins& pins, const Goals& goals) {
  Workload w = work;  // the default batch is resolved once, not in every evaluate()
  resolve_batch(w);
  if (gpus < 1 || gpus > goals.max_gpus)
    return Error{text::format("%d GPUs is out of range", gpus), "", 0, "gpus",
                 text::format("ask for 1 to %d GPUs", goals.max_gpus)};
  std::vector<std::string> skipped;
  RungResult fallback;
  double least_memory = 0;
  std::optional<Plan> no_progress;
  bool batch_limited = false;
  for (Strategy rung : kLadder) {
    if (pins.strategy && *pins.strategy != rung) continue;
    RungResult r = search_rung(rung, w, hw, gpus, pins, goals);
    batch_limited |= r.batch_limited;
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
  if (least_memory == 0 && batch_limited)
    return Error{text::format("%d GPU(s) are more than the global batch of %d sequences can use: ", gpus, w.global_batch) +
                     "every layout would need more data-parallel ranks than sequences, and more GPUs than the "
                     "batch can use are not a speed-up",
                 "", 0, "gpus", "ask for fewer GPUs, or a larger --global-batch"};
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

// The most GPUs the goals allow: max_gpus, and max_nodes whole nodes of the partition.
static int gpu_limit(const Hardware& hw, const Goals& goals, std::string* why) {
  int limit = goals.max_gpus;
  if (why) *why = text::format("max_gpus %d", goals.max_gpus);
  const long long by_nodes = 1LL * goals.max_nodes * std::max(1, hw.gpus_per_node);
  if (goals.max_nodes > 0 && by_nodes < limit) {
    limit = static_cast<int>(by_nodes);
    if (why)
      *why = (goals.where.empty() ? std::string("the partition") : goals.where) +
             text::format("'s limit of %d node(s) x %d GPUs (max_nodes)", goals.max_nodes, hw.gpus_per_node);
  }
  return limit;
}

Result<Plan> choose_plan(const Workload& work, const Hardware& hw, const Pins& pins, const Goals& goals) {
  if (pins.tp && pins.pp && pins.dp) return best_plan_at(work, hw, *pins.tp * *pins.pp * *pins.dp, pins, goals);
  Workload w = work;
  resolve_batch(w);  // one batch for every GPU count tried
  std::string limit_why;
  Goals within = goals;
  within.max_gpus = gpu_limit(hw, goals, &limit_why);
  Result<Plan> cur = fewest_gpus_plan(w, hw, 1, pins, within);
  if (!cur) {
    Error e = cur.error();
    if (within.max_gpus < goals.max_gpus) e.message += " (" + limit_why + ")";
    return e;
  }
  int n = cur.value().gpus;
  Plan plan = cur.value();
  const bool deadline = goals.deadline_hours > 0;
  auto note = [&](std::string line) {
    if (goals.explain) plan.reasons.push_back(std::move(line));
  };
  // One GPU is enough for a small or short job (the seeds' rules of thumb): a rule about
  // whether to distribute at all, not a wall-time target for the runs that must.
  if (n == 1 && !deadline) {
    if (plan.gpu_hours < goals.distributed_min_gpu_hours) {
      note("stays on one GPU: " + text::num(plan.gpu_hours, 1) + " GPU-hours < " +
           text::num(goals.distributed_min_gpu_hours, 0) + " (distributed_min_gpu_hours)");
      return plan;
    }
    if (plan.wall_hours <= goals.single_gpu_max_hours) {
      note("stays on one GPU: it finishes in " + text::num(plan.wall_hours, 1) + " h <= " +
           text::num(goals.single_gpu_max_hours, 0) + " h (single_gpu_max_hours)");
      return plan;
    }
  }
  // Double while it pays: each doubling must speed up >= min_doubling_speedup and keep the
  // comm ratio within max_comm_ratio; a deadline stops at the fewest GPUs that meet it.
  std::string stop;
  while (true) {
    if (deadline && plan.wall_hours <= goals.deadline_hours) {
      stop = text::format("it is the fewest that meet the %s h deadline", text::num(goals.deadline_hours).c_str());
      break;
    }
    if (plan.layout.dp >= w.global_batch) {
      stop = text::format("dp %d already gives each rank one sequence of the %d-sequence batch: more GPUs than the "
                          "batch can use are not a speed-up (a larger --global-batch would use them)",
                          plan.layout.dp, w.global_batch);
      break;
    }
    if (n * 2 > within.max_gpus) {
      stop = text::format("doubling to %d GPUs would exceed ", n * 2) + limit_why;
      break;
    }
    auto next = best_plan_at(w, hw, n * 2, pins, within);
    if (!next) {
      stop = text::format("no plan on %d GPUs: ", n * 2) + next.error().message;
      break;
    }
    const double speedup = plan.wall_hours / next.value().wall_hours;
    if (speedup < goals.min_doubling_speedup) {
      stop = text::format("doubling to %d GPUs speeds up only %.2fx < %s (min_doubling_speedup)", n * 2, speedup,
                          text::num(goals.min_doubling_speedup).c_str());
      break;
    }
    if (next.value().comm_ratio > goals.max_comm_ratio) {
      stop = text::format("at %d GPUs the comm ratio %.2f exceeds %s (max_comm_ratio)", n * 2, next.value().comm_ratio,
                          text::num(goals.max_comm_ratio).c_str());
      break;
    }
    plan = next.value();
    n *= 2;
  }
  if (deadline && plan.wall_hours > goals.deadline_hours)
    note(text::format("the %s h deadline cannot be met: %d GPU(s) take %s h, and the search stopped because ",
                      text::num(goals.deadline_hours).c_str(), n, text::num(plan.wall_hours, 1).c_str()) +
         stop);
  else
    note(text::format("%d GPU(s), %s h: the GPU count stops here because ", n, text::num(plan.wall_hours, 1).c_str()) +
         stop);
  // A run longer than the partition's max_time goes on in requeued segments (it checkpoints
  // at Daly's interval and requeues on the signal before the limit).
  if (goals.max_time_hours > 0 && plan.wall_hours > goals.max_time_hours)
    note(text::format("longer than max_time (%s h): runs as %d requeued segments, resuming from its checkpoint "
                      "(every %s min)",
                      text::num(goals.max_time_hours, 0).c_str(),
                      static_cast<int>(std::ceil(plan.wall_hours / goals.max_time_hours)),
                      text::num(plan.ckpt_interval_s / 60, 1).c_str()));
  return plan;
}

}  // namespace scaleguard
