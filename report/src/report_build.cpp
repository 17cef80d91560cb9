// Aggregation: GPU-hours, cost, waste and flags over a window (rules in docs/report.md).
#include <algorithm>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "scaleguard/report.h"

namespace scaleguard::report {
namespace {

constexpr std::int64_t kDay = 86400;

// Seconds of a run's elapsed time that produced nothing lasting.
// - A job that broke (FAILED, OUT_OF_MEMORY, BOOT_FAIL, DEADLINE) wasted the whole run.
// - An interrupted run (NODE_FAIL, TIMEOUT, PREEMPTED, REQUEUED) lost the work since its last
//   checkpoint: with a known checkpoint interval I that is on average I/2 (at most the run);
//   without checkpoints the next run starts from zero, so the whole run is lost. A run whose
//   scaleguard-run step stopped at a signal after saving (exit 85) lost nothing.
// - COMPLETED, RUNNING, CANCELLED (the user's choice) and anything else: nothing.
std::int64_t wasted_seconds(const Run& run, std::int64_t ckpt_s) {
  const std::string& state = run.state;
  const std::int64_t elapsed = run.elapsed_s;
  if (state == "FAILED" || state == "OUT_OF_MEMORY" || state == "BOOT_FAIL" || state == "DEADLINE")
    return elapsed;
  if (state == "NODE_FAIL" || state == "TIMEOUT" || state == "PREEMPTED" || state == "REQUEUED") {
    if (run.checkpointed_stop) return 0;   // the runner saved at the signal, then stopped
    return ckpt_s > 0 ? std::min(elapsed, ckpt_s / 2) : elapsed;
  }
  return 0;
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

void add(Usage& u, double gpu_h, double wasted_h, double cost, double wasted_usd) {
  u.runs += 1;
  u.gpu_hours += gpu_h;
  u.wasted_gpu_hours += wasted_h;
  u.cost_usd += cost;
  u.wasted_usd += wasted_usd;
}

struct JobAcc {
  JobSummary summary;
  std::int64_t last_start = -2;
  PlanNote note;
  bool spot = false;
  double util_gpu_hours = 0, util_weighted = 0;   // runs with recorded GPU utilisation
};

}  // namespace

Report build_report(const std::vector<Run>& runs, const Options& options) {
  Report report;
  std::vector<JobAcc> jobs;
  std::map<std::string, std::size_t> job_index;
  // Distinct job ids per group, so a requeued job counts once.
  std::map<std::string, std::set<std::string>> user_jobs, account_jobs, partition_jobs, state_jobs;
  std::map<std::int64_t, std::set<std::string>> day_jobs;
  std::set<std::string> unpriced;
  std::int64_t first = -1, last = -1;

  for (const auto& run : runs) {
    const std::int64_t begin = run.start;
    const std::int64_t finish = run.start >= 0 ? run.start + run.elapsed_s : -1;
    // A run that never started (pending, cancelled while pending) used no GPU: not counted,
    // but a requeued job cancelled while waiting ends in that state.
    if (begin < 0) {
      if (const auto known = job_index.find(run.job_id); known != job_index.end())
        jobs[known->second].summary.state = run.state;
      continue;
    }
    // Part of the run inside the window.
    double share = 1;
    std::int64_t lo = begin, hi = finish;
    if (options.since >= 0) lo = std::max(lo, options.since);
    if (options.until >= 0) hi = std::min(hi, options.until);
    if (run.elapsed_s > 0) {
      if (hi <= lo) continue;   // ran entirely outside the window
      share = static_cast<double>(hi - lo) / static_cast<double>(run.elapsed_s);
    } else if ((options.since >= 0 && begin < options.since) ||
               (options.until >= 0 && begin > options.until)) {
      continue;
    }
    first = first < 0 ? lo : std::min(first, lo);
    last = std::max(last, hi);

    const PlanNote note = parse_plan_note(run.admin_comment);
    const double gpu_h = run.gpus * run.elapsed_s * share / 3600.0;
    const double wasted_h =
        run.gpus * wasted_seconds(run, note.ckpt_interval_s) * share / 3600.0;
    const auto price_it = options.prices.find(run.partition);
    double usd = 0;
    bool spot = false;
    if (price_it != options.prices.end()) {
      usd = price_it->second.usd_per_gpu_hour;
      spot = price_it->second.spot;
    } else if (run.gpus > 0 && run.elapsed_s > 0) {
      unpriced.insert(run.partition);
    }
    const double cost = gpu_h * usd, wasted_usd = wasted_h * usd;

    add(report.total, gpu_h, wasted_h, cost, wasted_usd);
    add(report.by_user[run.user], gpu_h, wasted_h, cost, wasted_usd);
    add(report.by_account[run.account], gpu_h, wasted_h, cost, wasted_usd);
    add(report.by_partition[run.partition], gpu_h, wasted_h, cost, wasted_usd);
    add(report.by_state[run.state], gpu_h, wasted_h, cost, wasted_usd);
    user_jobs[run.user].insert(run.job_id);
    account_jobs[run.account].insert(run.job_id);
    partition_jobs[run.partition].insert(run.job_id);
    state_jobs[run.state].insert(run.job_id);

    // Per day: split the in-window part of the run at midnights, in proportion to wall time.
    if (hi > lo) {
      for (std::int64_t t = lo; t < hi;) {
        const std::int64_t day = (t / kDay) * kDay;
        const std::int64_t piece_end = std::min(hi, day + kDay);
        const double f = static_cast<double>(piece_end - t) / static_cast<double>(hi - lo);
        Usage& u = report.by_day[day];
        u.gpu_hours += gpu_h * f;
        u.wasted_gpu_hours += wasted_h * f;
        u.cost_usd += cost * f;
        u.wasted_usd += wasted_usd * f;
        u.runs += 1;   // each piece is a different day
        day_jobs[day].insert(run.job_id);
        t = piece_end;
      }
    } else {
      const std::int64_t day = (begin / kDay) * kDay;
      report.by_day[day].runs += 1;
      day_jobs[day].insert(run.job_id);
    }

    auto [it, fresh] = job_index.emplace(run.job_id, jobs.size());
    if (fresh) {
      jobs.emplace_back();
      JobSummary& s = jobs.back().summary;
      s.job_id = run.job_id;
      s.user = run.user;
      s.account = run.account;
      s.partition = run.partition;
    }
    JobAcc& acc = jobs[it->second];
    JobSummary& s = acc.summary;
    s.runs += 1;
    s.gpus = std::max(s.gpus, run.gpus);
    s.gpu_hours += gpu_h;
    s.wasted_gpu_hours += wasted_h;
    s.cost_usd += cost;
    s.wasted_usd += wasted_usd;
    // sacct -D lists a job's runs oldest first; the latest start decides the job's state.
    if (run.start >= acc.last_start) {
      acc.last_start = run.start;
      s.state = run.state;
    }
    if (note.present) acc.note = note;
    acc.spot = acc.spot || spot;
    if (run.gpu_util >= 0 && gpu_h > 0) {
      // Percent of the GPUs' time; a release that sums several GPUs of one task is capped.
      acc.util_gpu_hours += gpu_h;
      acc.util_weighted += gpu_h * std::min(run.gpu_util, 100.0);
    }
  }

  auto count_jobs = [](auto& usage, const auto& sets) {
    for (auto& [key, u] : usage) {
      const auto found = sets.find(key);
      u.jobs = found == sets.end() ? 0 : static_cast<int>(found->second.size());
    }
  };
  count_jobs(report.by_user, user_jobs);
  count_jobs(report.by_account, account_jobs);
  count_jobs(report.by_partition, partition_jobs);
  count_jobs(report.by_state, state_jobs);
  count_jobs(report.by_day, day_jobs);
  report.total.jobs = static_cast<int>(jobs.size());

  for (auto& acc : jobs) {
    JobSummary& s = acc.summary;
    const PlanNote& note = acc.note;
    // GPU utilisation: what accounting recorded where it did; the plan's estimate (the GPUs it
    // uses of those allocated) only where not, and labelled so.
    if (acc.util_gpu_hours > 0) {
      s.gpu_util = acc.util_weighted / acc.util_gpu_hours;
      s.gpu_util_source = "accounting";
      if (s.gpu_util < options.min_gpu_util)
        s.flags.push_back("low_gpu_efficiency: " + std::to_string(s.gpus) + " GPU" + (s.gpus == 1 ? "" : "s") +
                          " busy " + fixed(s.gpu_util, 0) + "% of the time (accounting: gres/gpuutil; limit " +
                          fixed(options.min_gpu_util, 0) + "%)");
    } else if (note.present && note.gpus > 0 && s.gpus > 0) {
      s.gpu_util = 100.0 * std::min(note.gpus, s.gpus) / s.gpus;
      s.gpu_util_source = "plan estimate";
      if (s.gpus > note.gpus)
        s.flags.push_back("low_gpu_efficiency (plan estimate, no GPU utilisation in accounting): " +
                          std::to_string(s.gpus) + " GPUs allocated, plan uses " + std::to_string(note.gpus));
    }
    if (note.present && note.comm_ratio > options.max_comm_ratio)
      s.flags.push_back("comm_heavy: plan communicates " + fixed(note.comm_ratio * 100, 0) +
                        "% of compute time (limit " + fixed(options.max_comm_ratio * 100, 0) + "%)");
    if (!note.present && s.gpus > 1 && s.gpu_hours < options.distributed_min_gpu_hours)
      s.flags.push_back("small_distributed: " + std::to_string(s.gpus) + " GPUs for " +
                        fixed(s.gpu_hours, 1) + " GPU-hours (< " +
                        fixed(options.distributed_min_gpu_hours, 0) +
                        "): one GPU is usually cheaper; no scaleguard plan on record");
    if (acc.spot && s.gpus > 0 && note.ckpt_interval_s == 0)
      s.flags.push_back("spot_without_checkpoint: a preemption loses the whole run");
    report.jobs.push_back(std::move(s));
  }

  for (const auto& p : unpriced)
    report.notes.push_back("partition '" + p + "' has no price in the policy: its cost is counted as $0");
  report.since = options.since >= 0 ? options.since : first;
  report.until = options.until >= 0 ? options.until : last;
  return report;
}

}  // namespace scaleguard::report
