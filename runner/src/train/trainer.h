// The training loop, top to bottom in Trainer::run(). Strategies plug in through the
// process grid (which group to talk to), the model part this rank builds, the gradient
// synchroniser (data parallel over the dp group) and, with pp > 1, the pipeline schedule.
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "parallel/compress.h"
#include "config/config.h"
#include "parallel/data_parallel.h"
#include "comm/grid.h"
#include "launch/launch.h"
#include "models/model.h"
#include "train/optim.h"
#include "parallel/pipeline.h"
#include "timing/step_timer.h"
#include "train/tensorboard.h"
#include "health/health.h"
#include "data/tokens.h"

namespace scaleguard::run {

// SIGUSR1 and SIGTERM set a flag (Slurm sends them before preemption / the time limit);
// the trainer checks it at every step boundary.
void install_stop_handlers();
int stop_signal();  // the signal received, 0 when none

// Everything besides parameters and optimizer state that a resumed run needs.
struct TrainState {
  int64_t step = 0;           // optimizer steps completed
  int64_t epoch = 0;          // epoch of the next sample in the stream
  uint64_t position = 0;      // sampler position: samples consumed = step * global_batch
  double lr = 0;              // learning rate of the last step (the schedule: lr_at(cfg, step), lr_schedule.h)
  uint32_t restarts = 0;      // how often this run was resumed (set by the checkpoint loader)
  double step_seconds = 0;    // the last step's time (StepTimer kStep): goodput's productive/lost time
};

class Trainer;
class ArrayData;  // arrays.h
struct TrainHooks {
  // Runs on every rank after each optimizer step, once all ranks agreed whether to stop
  // (`stopping`). The checkpoint library saves here when a save is due or when stopping;
  // without it nothing is saved.
  std::function<void(Trainer&, bool stopping)> after_step;
  // Runs before the optimizer changes a tensor (AdamW::step's BeforeWrite): an asynchronous
  // checkpoint started after the previous step waits here for that tensor's host copy, so
  // the copy overlaps this step's forward and backward.
  BeforeWrite before_update;
  // Rank 0, at the end: one JSON line for the metrics file before the final one (goodput).
  std::function<std::string()> final_metrics;
};

class Trainer {
 public:
  // device: where the model and batches live (CPU, or this rank's GPU with the NCCL
  // backend); the grid's communicators must handle tensors on it.
  // arrays: an HDF5/npy dataset (arrays.h) to sample x, y from instead of token windows.
  Trainer(const Config& cfg, const Launch& launch, ProcessGrid& grid, Tokens tokens, at::Device device,
          std::shared_ptr<ArrayData> arrays = nullptr);
  ~Trainer();
  // Trains to cfg.steps or until signalled; returns the process exit code.
  int run();

  // For checkpoints: state, parameters and optimizer state by name (load in place), and
  // the ranks to agree with (launch().world_comm, grid().dp_group).
  const Config& config() const { return cfg_; }
  const Launch& launch() const { return launch_; }
  ProcessGrid& grid() { return grid_; }
  TrainState& state() { return state_; }
  const std::vector<FlatParam>& parameters() const { return layout_->params(); }
  // The flat buckets; under ZeRO-3 (layout().params_sharded()) a parameter's view holds
  // data only while gathered: save and load layout().param_shards() instead.
  const FlatLayout& layout() const { return *layout_; }
  AdamW& optimizer() { return *optim_; }
  TopKCompressor* compressor() { return compress_.get(); }  // --compress topk with dp > 1, else null
  at::Tensor rng_state() const;                // default CPU generator
  void set_rng_state(const at::Tensor& state);
  // XXH3-64 hex over all parameters of the whole model, name order. With pp > 1 the stages'
  // parameters are gathered first: then it is collective over grid().pp_group.
  std::string params_checksum() const;
  TrainHooks hooks;
  // The hang watchdog and straggler check (health/health.h), owned by the caller; null: none.
  // The loop enters its sections (step, checkpoint, evaluation, finish) and reports each
  // step's time and compute seconds.
  Health* health = nullptr;

 private:
  // (micro, T) inputs and targets ((micro, T) or (micro)) for micro-batch u of `step`;
  // with an array dataset its x and y rows of the same samples.
  std::pair<at::Tensor, at::Tensor> batch(int64_t step, int64_t u);
  // x, y of these sample ids: token windows [id*T, id*T + T] of `tokens`, or rows of `arrays`.
  std::pair<at::Tensor, at::Tensor> samples(const Tokens& tokens, const ArrayData* arrays,
                                            const std::vector<uint64_t>& ids) const;
  // --eval-data / --eval-every / --eval-tokens: the held-out set and its mean loss, a forward
  // pass on every rank (collective over the world), logged by rank 0 and returned everywhere.
  void open_eval_data();
  std::pair<at::Tensor, at::Tensor> eval_batch(int64_t u);
  double evaluate();
  void log_run();  // the metrics file's first line: what ran, for planner calibration
  // pipeline_s: the pipeline phase (slowest stage); bubble_s: a stage's mean idle time in it.
  void log_step(double loss, double lr, double step_s, double comm_s, double grad_norm, double pipeline_s,
                double bubble_s);
  // Every --straggler-every steps (collective): the nodes' compute times compared; rank 0
  // logs nodes over the threshold and names a straggler (stderr, the metrics file).
  void check_stragglers(double compute_s);
  // Tokens trained on so far: step x global-batch x seq-len.
  long long tokens_done() const { return static_cast<long long>(state_.step * cfg_.global_batch * cfg_.seq_len); }
  // The whole model's parameters by name (gathered over the pp group when pp > 1).
  std::vector<std::pair<std::string, at::Tensor>> all_parameters() const;
  // Sums the tied embedding's gradient between the first and last stage (timed as comm).
  void sync_tied_embedding();
  void finish_run(double loss);

  const Config& cfg_;
  const Launch& launch_;
  ProcessGrid& grid_;
  Tokens tokens_;
  std::shared_ptr<ArrayData> arrays_;  // set: samples are its rows, not token windows
  std::unique_ptr<Tokens> eval_tokens_;       // --eval-data of tokens
  std::shared_ptr<ArrayData> eval_arrays_;    // --eval-data of arrays
  int64_t eval_micro_ = 0;                    // evaluation micro-batches per rank; 0 = no evaluation
  at::Device device_;
  Sampler sampler_;
  std::shared_ptr<LanguageModel> model_;
  std::unique_ptr<FlatLayout> layout_;
  std::unique_ptr<DataParallel> dp_;
  std::unique_ptr<ZeroThree> zero3_;  // ZeRO-3 over dp > 1: the gathers around the blocks
  std::unique_ptr<AdamW> optim_;
  std::unique_ptr<TopKCompressor> compress_;
  std::unique_ptr<Pipeline> pipeline_;  // pp > 1
  std::vector<int64_t> stage_bounds_;   // pp > 1: stage s runs blocks [b[s], b[s+1])
  TrainState state_;
  int64_t accum_ = 1;
  int64_t pp_send_bytes_ = 0;  // what rank 0's stage sent to its pipeline neighbours in the last step
  std::shared_ptr<StepTimer> timer_;    // also the process-wide step_timer() while this lives
  double run_start_s_ = 0;
  int64_t first_step_ = 0;
  FILE* metrics_ = nullptr;
  FILE* csv_ = nullptr;                  // --metrics-csv (rank 0)
  std::unique_ptr<EventWriter> tb_;      // --tensorboard (rank 0)
  FILE* sample_log_ = nullptr;
};

}  // namespace scaleguard::run
