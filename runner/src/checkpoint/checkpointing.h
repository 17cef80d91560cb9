// Checkpoints in the training loop: the glue between Trainer and runner/ckpt.
//   start:        prepare() (directory usable?), resume() (newest valid checkpoint -> trainer)
//   every step:   after_step() saves when the interval says so (async or sync), and
//                 synchronously when the ranks agreed to stop (SIGUSR1/SIGTERM) or at the end.
// Every strategy: parameters and Adam moments are saved by global name with their global
// shape, each rank writing the boxes of the global tensor it holds (its tensor-parallel
// slice, its pipeline stage's parameters, its ZeRO-1 range of the moments; ranks holding
// identical copies split the rows) and reading back exactly the boxes its layout needs,
// whatever layout wrote them: a checkpoint resumes on any tp x pp x dp grid, ZeRO or not.
#pragma once
#include <memory>
#include <string>

#include "ckpt/commit_comm.h"
#include "ckpt/interval.h"
#include "ckpt/saver.h"
#include "ckpt/store.h"
#include "config/config.h"
#include "launch/launch.h"

namespace scaleguard::ckpt {
class LocalTier;
class GoodputMeter;
}  // namespace scaleguard::ckpt

namespace scaleguard::run {

class Trainer;
class StagedBuffers;

// Thrown by after_step on every rank at the same step (the commit's verdict is broadcast):
// a save failed and training must not go on. main() exits 1 without MPI_Abort.
struct CheckpointStop : RunError {
  using RunError::RunError;
};

// The text hashed into a checkpoint's config_hash: the keys that shape the parameters.
// Another value of any of them means another model, and its checkpoints are refused.
std::string model_identity(const Config& cfg);
std::string model_hash(const Config& cfg);  // XXH3-64 hex of model_identity

class Checkpointing {
 public:
  // Collective (duplicates the world communicator). cfg.ckpt_dir must be set.
  Checkpointing(const Config& cfg, const Launch& launch);
  ~Checkpointing();

  // Local: creates the directory and checks this rank may write there; "" or the error.
  std::string prepare() const;
  // Collective: removes unfinished saves, loads the newest valid checkpoint (falling back
  // past corrupt ones) into the trainer in place; "" (also when there is none) or the error.
  std::string resume(Trainer& t);
  // After resume(): whether a checkpoint was loaded (the same answer on every rank).
  bool resumed() const { return resumed_; }
  // Local: with --ckpt-async, reserves the host memory of the snapshots (Saver::reserve) and
  // logs its size; "" or the error.
  std::string reserve(Trainer& t);
  // TrainHooks::after_step. Throws CheckpointStop (on every rank) when a save failed and
  // --ckpt-on-error=stop, or when the save before stopping failed.
  void after_step(Trainer& t, bool stopping);
  // TrainHooks::before_update: the optimizer is about to change `live`; an async save in
  // flight copies it first (on a GPU: the update waits on the stream for its bucket's copy).
  void before_update(const at::Tensor& live);
  // Rank 0: this run's goodput as one JSON line for the metrics file ("" on other ranks).
  std::string goodput_line() const;

 private:
  void log(const std::string& line) const;
  // Top-k compression's per-rank residuals from `reader` into t.compressor(); "" or the error.
  std::string load_compress_state(Trainer& t, const ckpt::Reader& reader) const;
  // staged: the tensors as views of its host mirrors (GPU checkpoints) instead of the live ones.
  // whole_rank (the local tier): everything this rank holds, replicas not split among their
  // holders and the last stage's tied embedding included, so the shard alone resumes the rank.
  ckpt::Snapshot snapshot(Trainer& t, bool copy, StagedBuffers* staged = nullptr, bool whole_rank = false) const;
  std::string reserve_memory(Trainer& t);
  // A local-tier save (synchronous, with the partner copy); a failure is logged, not fatal.
  void save_local(Trainer& t);
  // Rank 0: CKPT_DIR/goodput.json, at most every SCALEGUARD_GOODPUT_WRITE_S seconds unless now.
  void write_goodput(bool now);
  void save_now(Trainer& t, bool must_commit);
  void handle(const Result<ckpt::Committed>& r, bool must_commit);
  // The save started last has committed (any outcome): its cost reaches the interval clock,
  // and with `auto` rank 0 logs the interval chosen and why.
  void committed(const ckpt::SaveCost& cost, bool log_interval);
  void after_step_inner(Trainer& t, bool stopping);

  const Config& cfg_;
  const Launch& launch_;
  std::unique_ptr<ckpt::MpiCommitComm> comm_;
  // --ckpt-async on a GPU: pinned mirrors of the buckets and optimizer state, copied on a side
  // stream (device_staging.h); declared before saver_ so a pending write ends first.
  std::unique_ptr<StagedBuffers> staging_;
  std::unique_ptr<ckpt::Saver> saver_;
  ckpt::Store store_;
  std::unique_ptr<ckpt::IntervalClock> clock_;
  // Async: what each save costs the training thread (stall + I/O contention), for `auto`.
  ckpt::SaveCostMeter cost_;
  double step_end_ = -1;        // when after_step last returned (<0 before the first step)
  ckpt::OnSaveError on_error_;
  std::string describe_;        // how the interval was chosen, for the start-up line
  int64_t last_committed_ = -1;
  bool resumed_ = false;
  ckpt::CheckpointMeta meta_;
  // --ckpt-local-dir: the local tier and its clock (clock_ then paces the shared tier).
  std::unique_ptr<ckpt::LocalTier> local_;
  std::unique_ptr<ckpt::IntervalClock> local_clock_;
  std::string local_describe_;
  int64_t last_local_ = -1;
  // Rank 0: this run's goodput, recorded in CKPT_DIR/goodput.json.
  std::unique_ptr<ckpt::GoodputMeter> goodput_;
  double goodput_every_s_ = 1, goodput_written_ = -1e18;
};

}  // namespace scaleguard::run
