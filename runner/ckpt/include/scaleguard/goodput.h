// Goodput accounting (issue 38 item 5): where a training job's time went, across every run of
// it (in-job restarts and Slurm requeues), in one small file in its checkpoint directory,
// CKPT_DIR/goodput.json, that the runner's rank 0 rewrites as it goes (tmp + rename) and
// `scaleguard report --goodput` reads. Pure: the caller passes the times. Format and the
// meaning of each component: docs/checkpoint-format.md ("Goodput file").
//
// One run (one scaleguard-run process group) splits its wall time, process start to its last
// record, into components that are differences of the same marks, so they add up exactly:
//   startup   process start -> ready to train, less the restore
//   restore   reading the checkpoint (local or shared tier)
//   productive the step times (the trainer's StepTimer) of steps trained for the first time
//   lost      the step times of steps trained again after a restore (a failure's lost work)
//   ckpt      the after-step checkpoint work on the training thread (saves, polls, commits)
//   overhead  the rest of the loop between steps (logging, evaluation, the agreement)
// The job adds, between runs, the restart gap: the previous run's last record to this run's
// process start (detection, teardown, relaunch; a requeue also waits in the queue, which is
// not allocated time and is kept apart).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "scaleguard/result.h"

namespace scaleguard::ckpt {

inline constexpr const char* kGoodputName = "goodput.json";

struct GoodputRun {
  std::string allocation;       // SLURM_JOB_ID "." SLURM_RESTART_COUNT ("" outside Slurm)
  std::string host;             // rank 0's
  int ranks = 1;
  int gpus = 0;                 // GPUs the run used (0: a CPU run)
  double start = 0;             // process start, Unix seconds
  double last = 0;              // the last record, Unix seconds
  int64_t resumed_from = -1;    // the checkpoint's step, -1 = a fresh start
  std::string resumed_tier;     // "shared" | "local" | "" (fresh)
  int64_t first_step = 0;       // steps done when it started training
  int64_t last_step = 0;        // steps done at the last record
  std::string restart;          // "first" | "in-job" | "requeue": how this run followed the previous
  double restart_s = 0;         // the previous run's last record -> this run's start
  std::string after;            // what ended the previous run: "failure" | "stop" | "" (first)
  double startup_s = 0, restore_s = 0, productive_s = 0, lost_s = 0, ckpt_s = 0, overhead_s = 0;
  int64_t productive_steps = 0, lost_steps = 0;
  std::string state = "running";  // "running" (still, or died: no end recorded) | "finished" | "stopped"

  double wall() const { return last - start; }
  double accounted() const { return startup_s + restore_s + productive_s + lost_s + ckpt_s + overhead_s; }
};

struct GoodputTotals {
  double allocated_s = 0;     // runs' walls + in-job restart gaps
  double requeue_wait_s = 0;  // gaps before requeued runs (queue time, not allocated)
  double productive_s = 0, lost_s = 0, ckpt_s = 0, startup_s = 0, restore_s = 0, overhead_s = 0, restart_s = 0;
  int64_t productive_steps = 0, lost_steps = 0;
  int failures = 0;           // runs that followed a run that died (no end recorded)
  // Time the failures cost: lost work + the restart gaps, start-ups and restores that
  // followed a failure (allocated time only).
  double failure_s = 0;
  double gpu_hours_allocated = 0, gpu_hours_failures = 0;   // x each run's GPUs (ranks on CPU runs)
  double goodput() const { return allocated_s > 0 ? productive_s / allocated_s : 0; }
};

struct GoodputFile {
  std::string job;            // SLURM_JOB_ID ("" outside Slurm)
  std::vector<GoodputRun> runs;
  GoodputTotals totals() const;
};

std::string goodput_to_json(const GoodputFile& f);   // with "totals", for readers
Result<GoodputFile> parse_goodput(const std::string& text, const std::string& origin);
Result<GoodputFile> read_goodput(const std::string& path);
// tmp + rename in the same directory (no fsync: a lost last record only moves time into the
// next restart gap); "" or the error.
std::string write_goodput(const std::string& path, const GoodputFile& f);

// One run's accounting (rank 0 of the runner). Times are Unix seconds from one clock.
class GoodputMeter {
 public:
  // previous: the file as found (empty runs: the job's first run). allocation: this run's
  // SLURM_JOB_ID.SLURM_RESTART_COUNT; equal to the last run's -> an in-job restart.
  GoodputMeter(GoodputFile previous, GoodputRun run, double process_start);
  // The restore took [t0, t1] and resumed `step` from `tier` (none: not called).
  void restored(double t0, double t1, int64_t step, const std::string& tier);
  // Ready to train at t with `step` steps done.
  void ready(double t, int64_t step);
  // A step ended: trainer-measured step_s; the loop reached the after-step hook at t_hook
  // (its interval since the previous mark is step_s + overhead); the hook ended at t_done.
  void step(int64_t step, double step_s, double t_hook, double t_done);
  void ended(const std::string& state);   // "finished" | "stopped"
  const GoodputFile& file() const { return file_; }
  const GoodputRun& run() const { return file_.runs.back(); }

 private:
  GoodputFile file_;
  int64_t redo_until_ = -1;   // steps <= this were trained before: lost work when redone
  double mark_ = 0;
};

}  // namespace scaleguard::ckpt
