#include "train/trainer.h"

#include "data/arrays.h"
#include "models/script_model.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "config/exit_codes.h"
#include "scaleguard/decide.h"
#include "timing/step_timer.h"

namespace scaleguard::run {
namespace {

volatile std::sig_atomic_t g_stop_signal = 0;

void on_stop_signal(int sig) { g_stop_signal = sig; }

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string fmt_duration(double s) {
  char buf[32];
  long t = static_cast<long>(s + 0.5);
  std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  return buf;
}

// --memory-report: the c10 CPU allocator (ProfiledCPUMemoryReporter) reports every
// allocation and free made while a memory-profiling debug info is installed on the thread;
// this one keeps the live total and its peak. Only allocations made while installed count
// (frees of older blocks are ignored by c10), so it measures what the steps allocate on
// top of the parameters, gradients and optimizer state: activations, the bf16 weight
// copies, logits, temporaries. The calling thread only: intra-op threads (--threads > 1)
// are not covered.
struct PeakMemory : c10::MemoryReportingInfoBase {
  std::atomic<int64_t> live{0}, peak{0};
  void reportMemoryUsage(void* /*ptr*/, int64_t size, int64_t /*allocated*/, int64_t /*reserved*/,
                         c10::Device /*device*/) override {
    int64_t now = live += size;
    int64_t p = peak.load();
    while (now > p && !peak.compare_exchange_weak(p, now)) {}
  }
  bool memoryProfilingEnabled() const override { return true; }
};

}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // MPI and file I/O continue; the loop polls the flag
  sigaction(SIGUSR1, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int stop_signal() { return g_stop_signal; }

Trainer::Trainer(const Config& cfg, const Launch& launch, ProcessGrid& grid, Tokens tokens, at::Device device,
                 std::shared_ptr<ArrayData> arrays)
    : cfg_(cfg), launch_(launch), grid_(grid), tokens_(std::move(tokens)), arrays_(std::move(arrays)), device_(device),
      sampler_(arrays_ ? arrays_->n() : (tokens_.size() - 1) / static_cast<uint64_t>(cfg.seq_len), cfg.seed) {
  accum_ = cfg.global_batch / grid_.dp / cfg.micro_batch;
  ModelPart part;
  part.tp_group = grid_.tp > 1 ? grid_.tp_group.get() : nullptr;
  if (grid_.pp > 1) {
    stage_bounds_ = split_stages(stage_costs(cfg), cfg.n_layer, grid_.pp);
    part.first_block = stage_bounds_[static_cast<size_t>(grid_.pp_rank)];
    part.end_block = stage_bounds_[static_cast<size_t>(grid_.pp_rank) + 1];
    part.has_embedding = grid_.first_stage();
    part.has_head = grid_.last_stage();
  }
  // comm_ms, the pipeline phase and step_ms: host clocks on the CPU, CUDA events on a GPU.
  timer_ = make_step_timer(device_.is_cuda(), device_.is_cuda() ? device_.index() : -1);
  set_step_timer(timer_);
  // Set-up details: rank 0 prints them with --verbose (warnings always).
  const bool details = launch_.rank == 0 && cfg.verbose;
  if (details && device_.is_cuda())
    std::fprintf(stderr, "scaleguard-run: timings (step_ms, comm_ms, pipeline bubble): %s\n",
                 std::strcmp(timer_->clock(), "host") == 0
                     ? "HOST CLOCKS (SCALEGUARD_STEP_TIMER=host: enqueue times, not for calibration)"
                     : "CUDA events on the training stream, resolved with one synchronisation per step");
  // A --model-file module comes initialised from its file; ours on the CPU
  model_ = cfg.model == "script" ? load_script_model(cfg.effective.at("model-file"))
                                 : make_model(cfg, part);  // initialised on the CPU: the same values on every device
  model_->to(device_);
  if (grid_.pp > 1) pipeline_ = std::make_unique<Pipeline>(cfg, grid_, *model_, device_);
  // ZeRO-1 (issue 6 part A): the layout, and so the optimizer state, sharded over dp;
  // ZeRO-2 the gradients too, ZeRO-3 the parameters too (issue 27).
  layout_ = std::make_unique<FlatLayout>(*model_, static_cast<int64_t>(cfg.bucket_mb * (1 << 20)),
                                         cfg.zero >= 1 ? grid_.dp_group.get() : nullptr, static_cast<int>(cfg.zero));
  if (layout_->params_sharded()) {
    zero3_ = std::make_unique<ZeroThree>(*layout_);
    model_->set_block_hooks(zero3_.get());
  }
  const bool compress = cfg.compress != "none" && grid_.dp > 1;
  // Top-k: no bucket all-reduce from the hooks; the compressor exchanges after backward.
  dp_ = std::make_unique<DataParallel>(*layout_, *grid_.dp_group, !cfg.no_overlap && !compress);
  optim_ = std::make_unique<AdamW>(*layout_, cfg);
  if (compress) {
    compress_ = std::make_unique<TopKCompressor>(*layout_, *grid_.dp_group, cfg);
    if (compress_->momentum_correction()) optim_->set_beta1(0);
  }
  if (launch_.rank == 0 && cfg.compress != "none" && (details || !compress))
    std::fprintf(stderr, "scaleguard-run: %s\n",
                 compress ? ("top-k compression " + cfg.compress + " over dp=" + std::to_string(grid_.dp) +
                             (compress_->momentum_correction()
                                  ? ", momentum correction " + std::to_string(cfg.compress_momentum) + " (AdamW beta1 0)"
                                  : ", residual accumulation (no momentum correction)") +
                             ", density warm-up over " + std::to_string(cfg.compress_warmup >= 0 ? cfg.compress_warmup : cfg.warmup) +
                             " steps, local clipping at grad-clip/sqrt(dp)")
                                .c_str()
                          : ("--compress " + cfg.compress + " does nothing with one data-parallel rank (no gradient exchange): "
                             "training uncompressed").c_str());
  if (details)
    std::fprintf(stderr, "scaleguard-run: tp=%d%s: optimizer state %lld bytes per rank\n", grid_.tp,
                 cfg.zero >= 1 ? (", ZeRO-" + std::to_string(cfg.zero) +
                                  (cfg.zero == 1   ? " (optimizer state sharded over dp)"
                                   : cfg.zero == 2 ? " (optimizer state and gradients sharded over dp)"
                                                   : " (optimizer state, gradients and parameters sharded over dp)") +
                                  (grid_.dp == 1 ? ", nothing to shard with dp=1" : ""))
                                     .c_str()
                               : "",
                 static_cast<long long>(optim_->state_bytes()));
  if (details)
    std::fprintf(stderr, "scaleguard-run: precision %s%s, recompute %s\n", cfg.precision.c_str(),
                 cfg.precision == "bf16" ? " (bf16 forward/backward; fp32 master weights, gradients and AdamW state)" : "",
                 cfg.recompute.c_str());
  if (details && grid_.tp > 1 && (cfg.model == "gpt" || cfg.model == "llama"))
    std::fprintf(stderr, "scaleguard-run: %s\n",
                 cfg.vocab_size % grid_.tp == 0
                     ? ("vocab-parallel embedding, head and cross-entropy: " + std::to_string(cfg.vocab_size / grid_.tp) +
                        " of " + std::to_string(cfg.vocab_size) + " logits per rank").c_str()
                     : ("tp=" + std::to_string(grid_.tp) + " does not divide vocab-size " + std::to_string(cfg.vocab_size) +
                        ": embedding and head replicated, full logits on every rank").c_str());
  if (details) {
    int64_t n = 0;
    for (const auto& p : layout_->params()) n += p.numel;
    std::fprintf(stderr,
                 "scaleguard-run: model %s: %lld parameters (%lld bytes) in %zu buckets; %lld micro-batches of %lld "
                 "per rank; %llu samples per epoch\n",
                 cfg.model.c_str(), static_cast<long long>(n), static_cast<long long>(n * static_cast<int64_t>(layout_->buckets()[0].params.element_size())), layout_->buckets().size(),
                 static_cast<long long>(accum_), static_cast<long long>(cfg.micro_batch),
                 static_cast<unsigned long long>(sampler_.n()));
    if (grid_.pp > 1) {
      std::string stages;
      for (int st = 0; st < grid_.pp; ++st)
        stages += " [" + std::to_string(stage_bounds_[static_cast<size_t>(st)]) + "," +
                  std::to_string(stage_bounds_[static_cast<size_t>(st) + 1]) + ")";
      std::fprintf(stderr, "scaleguard-run: pipeline pp=%d x dp=%d x tp=%d, schedule %s, blocks per stage:%s\n",
                   grid_.pp, grid_.dp, grid_.tp, cfg.schedule.c_str(), stages.c_str());
    }
  }
  if (launch_.rank == 0 && !cfg.metrics.empty()) {
    metrics_ = std::fopen(cfg.metrics.c_str(), "w");
    if (!metrics_) throw RunError("cannot write metrics file '" + cfg.metrics + "': " + std::strerror(errno));
  }
  if (launch_.rank == 0 && !cfg.metrics_csv.empty()) {
    // One row per logged step (eval_loss empty) or evaluation (only step, tokens, eval_loss).
    csv_ = std::fopen(cfg.metrics_csv.c_str(), "w");
    if (!csv_) throw RunError("cannot write metrics file '" + cfg.metrics_csv + "': " + std::strerror(errno));
    std::fprintf(csv_, "step,tokens,loss,lr,grad_norm,tokens_per_s,step_ms,eval_loss\n");
    std::fflush(csv_);
  }
  if (launch_.rank == 0 && !cfg.tensorboard.empty()) tb_ = std::make_unique<EventWriter>(cfg.tensorboard);
  if (!cfg.sample_log.empty()) {
    std::string path = cfg.sample_log + ".rank" + std::to_string(launch_.rank);
    sample_log_ = std::fopen(path.c_str(), "w");
    if (!sample_log_) throw RunError("cannot write sample log '" + path + "': " + std::strerror(errno));
  }
  if (cfg.eval_every > 0) open_eval_data();
}

void Trainer::open_eval_data() {
  // The evaluation set: the first windows of --eval-data (rows, for arrays), the same ones at
  // every evaluation, enough for --eval-tokens rounded up to whole micro-batches on each dp
  // rank; every layout of the same global batch then evaluates the same windows.
  const bool arrays = ArrayData::applies(cfg_.eval_data, cfg_.data_format);
  if (arrays != static_cast<bool>(arrays_))
    throw RunError("--eval-data " + cfg_.eval_data + " is " + (arrays ? "an array dataset" : "a token file") +
                   " but the training data is " + (arrays_ ? "an array dataset" : "tokens") + ": give the same kind");
  uint64_t available = 0;
  if (arrays) {
    eval_arrays_ = ArrayData::open(cfg_.eval_data, cfg_.data_format);
    available = eval_arrays_->n();
  } else {
    eval_tokens_ = std::make_unique<Tokens>(Tokens::open(cfg_.eval_data, cfg_.vocab_size, cfg_.data_format, cfg_.data_vocab));
    available = eval_tokens_->size() > 0 ? (eval_tokens_->size() - 1) / static_cast<uint64_t>(cfg_.seq_len) : 0;
  }
  const double tokens = scaleguard::parse_count(cfg_.eval_tokens).value();  // checked with the configuration
  const int64_t per_round = static_cast<int64_t>(grid_.dp) * cfg_.micro_batch;  // windows in one micro-batch on every rank
  const double windows = std::ceil(tokens / static_cast<double>(cfg_.seq_len));
  eval_micro_ = static_cast<int64_t>(std::ceil(windows / static_cast<double>(per_round)));
  const uint64_t needed = static_cast<uint64_t>(eval_micro_ * per_round);
  if (needed > available)
    throw RunError("--eval-tokens " + cfg_.eval_tokens + " needs " + std::to_string(needed) + " windows of seq-len " +
                   std::to_string(cfg_.seq_len) + " (whole micro-batches of " + std::to_string(cfg_.micro_batch) +
                   " on " + std::to_string(grid_.dp) + " data-parallel ranks) but --eval-data " + cfg_.eval_data +
                   " holds " + std::to_string(available) + ": give fewer --eval-tokens or more data");
  if (launch_.rank == 0 && cfg_.verbose)
    std::fprintf(stderr,
                 "scaleguard-run: evaluation every %lld steps on the first %llu windows of %s (%llu tokens: %lld "
                 "micro-batches of %lld per data-parallel rank)\n",
                 static_cast<long long>(cfg_.eval_every), static_cast<unsigned long long>(needed), cfg_.eval_data.c_str(),
                 static_cast<unsigned long long>(needed * static_cast<uint64_t>(cfg_.seq_len)),
                 static_cast<long long>(eval_micro_), static_cast<long long>(cfg_.micro_batch));
}

std::pair<at::Tensor, at::Tensor> Trainer::eval_batch(int64_t u) {
  // dp rank r evaluates windows [r * n, (r + 1) * n), n = eval_micro_ * micro_batch.
  const int64_t m = cfg_.micro_batch;
  std::vector<uint64_t> ids(static_cast<size_t>(m));
  for (int64_t j = 0; j < m; ++j)
    ids[static_cast<size_t>(j)] = static_cast<uint64_t>((grid_.dp_rank * eval_micro_ + u) * m + j);
  return samples(eval_tokens_ ? *eval_tokens_ : tokens_, eval_arrays_.get(), ids);
}

double Trainer::evaluate() {
  const double start = now_s();
  double loss_sum = 0;  // this rank's micro-batch mean losses (the last stage's with pp)
  {
    c10::AutoGradMode no_grad(false);  // no graph: a forward's activations are freed as it goes
    model_->set_evaluating(true);
    if (zero3_) zero3_->gather_unblocked();  // embedding, norm and head; the blocks through their hooks
    if (pipeline_) {
      loss_sum = pipeline_->evaluate(eval_micro_, [&](int64_t u) { return eval_batch(u); });
    } else {
      at::Tensor sum = at::zeros({}, at::TensorOptions(at::kDouble).device(device_));
      for (int64_t u = 0; u < eval_micro_; ++u) {
        auto [x, y] = eval_batch(u);
        sum += model_->loss(x, y).to(at::kDouble);
      }
      loss_sum = sum.item<double>();
    }
    if (zero3_) zero3_->end_step();
    model_->set_evaluating(false);
  }
  // Each micro-batch is a mean over the same number of windows: the mean of the means is the
  // mean over the set. tp ranks hold the same loss, and only last stages hold one (as in run()).
  double loss = loss_sum / static_cast<double>(eval_micro_);
  MPI_Allreduce(MPI_IN_PLACE, &loss, 1, MPI_DOUBLE, MPI_SUM, launch_.world_comm);
  loss *= static_cast<double>(grid_.pp) / grid_.world->size();
  timer_->resolve();  // the evaluation's intervals do not count in the next step's timings
  const double seconds = now_s() - start;
  if (launch_.rank == 0) {
    const long long tokens = static_cast<long long>(eval_micro_ * cfg_.micro_batch * grid_.dp * cfg_.seq_len);
    if (metrics_) {
      std::fprintf(metrics_, "{\"eval_step\":%lld,\"eval_loss\":%.6f,\"eval_tokens\":%lld,\"eval_ms\":%.3f}\n",
                   static_cast<long long>(state_.step), loss, tokens, seconds * 1e3);
      std::fflush(metrics_);
    }
    if (csv_) {
      std::fprintf(csv_, "%lld,%lld,,,,,,%.6f\n", static_cast<long long>(state_.step), tokens_done(), loss);
      std::fflush(csv_);
    }
    if (tb_) tb_->scalars(state_.step, {{"eval/loss", loss}});
    if (!cfg_.quiet)
      std::fprintf(stderr, "eval %lld/%lld  loss %.4f  %lld tokens  %.2f s\n", static_cast<long long>(state_.step),
                   static_cast<long long>(cfg_.steps), loss, tokens, seconds);
  }
  return loss;
}

Trainer::~Trainer() {
  set_step_timer(nullptr);
  if (metrics_) std::fclose(metrics_);
  if (csv_) std::fclose(csv_);
  if (sample_log_) std::fclose(sample_log_);
}

std::pair<at::Tensor, at::Tensor> Trainer::batch(int64_t step, int64_t u) {
  const int64_t m = cfg_.micro_batch;
  std::vector<uint64_t> ids(static_cast<size_t>(m));
  for (int64_t j = 0; j < m; ++j)
    ids[static_cast<size_t>(j)] = sampler_.sample_at(Sampler::position(step, cfg_.global_batch, grid_.dp_rank, accum_, m, u, j));
  if (sample_log_) {
    std::fprintf(sample_log_, "%lld %lld", static_cast<long long>(step), static_cast<long long>(u));
    for (uint64_t id : ids) std::fprintf(sample_log_, " %llu", static_cast<unsigned long long>(id));
    std::fputc('\n', sample_log_);
  }
  return samples(tokens_, arrays_.get(), ids);
}

std::pair<at::Tensor, at::Tensor> Trainer::samples(const Tokens& tokens, const ArrayData* arrays,
                                                   const std::vector<uint64_t>& ids) const {
  if (arrays) {
    auto [x, y] = arrays->rows(ids);
    return {x.to(device_), y.to(device_)};
  }
  const int64_t m = static_cast<int64_t>(ids.size()), T = cfg_.seq_len;
  at::Tensor window = at::empty({m, T + 1}, at::kLong);  // (m, T+1): sample id covers tokens [id*T, id*T + T]
  int64_t* w = window.data_ptr<int64_t>();
  for (int64_t j = 0; j < m; ++j) {
    const uint64_t start = ids[static_cast<size_t>(j)] * static_cast<uint64_t>(T);
    for (int64_t t = 0; t <= T; ++t) w[j * (T + 1) + t] = tokens[start + static_cast<uint64_t>(t)];
  }
  at::Tensor x = window.narrow(1, 0, T).contiguous();                 // (m, T)
  at::Tensor y = model_->predicts_every_position()
                     ? window.narrow(1, 1, T).contiguous()            // (m, T) next token at each position
                     : window.select(1, T).contiguous();              // (m) token after the window
  return {x.to(device_), y.to(device_)};
}

int Trainer::run() {
  dp_->broadcast_parameters();
  log_run();
  run_start_s_ = now_s();
  first_step_ = state_.step;
  // Pre-divide: each micro-batch's mean loss counts 1 / (micro-batches x dp ranks) of the
  // global batch, so summing gradients over ranks gives the global-batch average.
  const double scale = 1.0 / static_cast<double>(accum_ * grid_.dp);
  double loss = 0;
  std::shared_ptr<PeakMemory> mem;
  std::unique_ptr<c10::DebugInfoGuard> mem_guard;
  if (cfg_.memory_report) {
    mem = std::make_shared<PeakMemory>();
    mem_guard = std::make_unique<c10::DebugInfoGuard>(c10::DebugInfoKind::PROFILER_STATE, mem);
  }
  timer_->resolve();  // nothing before the first step counts in it
  while (state_.step < cfg_.steps) {
    if (health) health->enter(Section::kStep, state_.step);
    const double step_wall_start = now_s();
    const StepTimer::Mark step_start = timer_->begin();
    double lr = lr_at(cfg_, state_.step);
    layout_->zero_grad();
    if (zero3_) zero3_->begin_step();
    double loss_sum = 0;  // this rank's micro-batch losses (the last stage's with pp)
    PipelineStep pipe;
    if (pipeline_) {
      pipe = pipeline_->run([&](int64_t u) { return batch(state_.step, u); },
                            [&](int64_t u) { dp_->begin_backward(u == accum_ - 1); }, scale);
      loss_sum = pipe.loss_sum;
      pp_send_bytes_ = pipe.send_bytes;
    } else {
      at::Tensor sum = at::zeros({}, at::TensorOptions(at::kDouble).device(device_));
      for (int64_t u = 0; u < accum_; ++u) {
        auto [x, y] = batch(state_.step, u);
        dp_->begin_backward(u == accum_ - 1);
        at::Tensor l = model_->loss(x, y);
        sum += l.detach().to(at::kDouble);
        (l * scale).backward();
      }
      loss_sum = sum.item<double>();
    }
    if (compress_) compress_->exchange(state_.step);
    else dp_->finish();
    sync_tied_embedding();
    // Every gradient once: over the tp and pp groups, and the dp shards under ZeRO-1. Top-k
    // clipped each rank's gradient before selection (DGC's local clipping): norm only here.
    double grad_norm = clip_grad_norm(*layout_, compress_ ? 0.0 : cfg_.grad_clip, {grid_.tp_group.get(), grid_.pp_group.get()});
    optim_->step(lr, hooks.before_update);
    if (zero3_) zero3_->end_step();
    ++state_.step;
    state_.position = static_cast<uint64_t>(state_.step * cfg_.global_batch);
    state_.epoch = static_cast<int64_t>(state_.position / sampler_.n());
    state_.lr = lr;

    // One small all-reduce per step: the global loss and whether any rank was signalled (so
    // every rank stops at the same step boundary). Only the last stage's world / pp ranks
    // compute a loss.
    double agree[2] = {loss_sum / static_cast<double>(accum_), stop_signal() ? 1.0 : 0.0};
    const double agree_start = now_s();
    MPI_Allreduce(MPI_IN_PLACE, agree, 2, MPI_DOUBLE, MPI_SUM, launch_.world_comm);
    const double agree_s = now_s() - agree_start;  // waiting for the slowest rank: not compute
    loss = agree[0] * grid_.pp / grid_.world->size();
    bool stopping = agree[1] > 0;
    // The step's timings, resolved once (on a GPU: the step's one event synchronisation).
    timer_->end(step_start, Timed::kStep);
    const StepTimes times = timer_->resolve();
    const double step_s = times[Timed::kStep], comm_s = times[Timed::kComm];
    state_.step_seconds = step_s;
    // The pipeline phase lasts until the slowest stage is done (every stage started it when
    // the previous step's all-reduce returned); a stage's bubble is the part of it it spent
    // not computing: waiting for activations or gradients, and sending them.
    double pipeline_s = times[Timed::kPipeline], busy_s = times[Timed::kPipelineBusy];
    if (pipeline_) {
      MPI_Allreduce(MPI_IN_PLACE, &pipeline_s, 1, MPI_DOUBLE, MPI_MAX, launch_.world_comm);
      MPI_Allreduce(MPI_IN_PLACE, &busy_s, 1, MPI_DOUBLE, MPI_SUM, launch_.world_comm);
    }
    double bubble_s = pipeline_ ? pipeline_s - busy_s / grid_.world->size() : 0;
    if (state_.step % cfg_.log_every == 0 || state_.step == cfg_.steps || stopping)
      log_step(loss, lr, step_s, comm_s, grad_norm, pipeline_s, bubble_s);
    if (health) {
      // The step's wall time teaches its limit; the compute seconds (less what it waited
      // for in communication) go to the straggler check.
      health->record(Section::kStep, now_s() - step_wall_start);
      check_stragglers(std::max(0.0, step_s - comm_s - agree_s));
    }
    if (hooks.after_step) {
      if (health) health->enter(Section::kCheckpoint, state_.step);
      const double hook_start = now_s();
      hooks.after_step(*this, stopping);
      if (health) health->record(Section::kCheckpoint, now_s() - hook_start);
    }
    // After the checkpoint: a stop signal's save is never delayed by an evaluation.
    if (eval_micro_ > 0 && state_.step % cfg_.eval_every == 0) {
      if (health) health->enter(Section::kEval, state_.step);
      const double eval_start = now_s();
      evaluate();
      if (health) health->record(Section::kEval, now_s() - eval_start);
    }
    if (stopping) {
      if (launch_.rank == 0)
        std::fprintf(stderr, "scaleguard-run: stop requested (signal) at step %lld of %lld: all ranks stop here\n",
                     static_cast<long long>(state_.step), static_cast<long long>(cfg_.steps));
      return kExitStoppedAfterCheckpoint;
    }
  }
  if (mem && launch_.rank == 0) {
    // What persists between steps (ZeRO-2/3: the shards; the full buckets they free are
    // allocated inside the steps and so counted in the step peak).
    const int64_t params = layout_->param_bytes(), grads = layout_->grad_bytes(), optim = optim_->state_bytes();
    const int64_t peak = mem->peak.load();
    std::fprintf(stderr,
                 "scaleguard-run: memory (rank 0): parameters %lld, gradients %lld, optimizer state %lld bytes; "
                 "step peak %lld bytes on top (activations and temporaries%s; c10 CPU allocator reporting); "
                 "total peak %lld bytes\n",
                 static_cast<long long>(params), static_cast<long long>(grads), static_cast<long long>(optim),
                 static_cast<long long>(peak),
                 layout_->params_sharded() ? ", gathered parameters and full gradients"
                 : layout_->grads_sharded() ? ", full gradients" : "",
                 static_cast<long long>(params + grads + optim + peak));
  }
  mem_guard.reset();
  if (health) health->enter(Section::kFinish, state_.step);
  finish_run(loss);
  return kExitOk;
}

void Trainer::check_stragglers(double compute_s) {
  const std::vector<NodeVerdict> verdicts = health->add_compute(state_.step, compute_s);
  if (launch_.rank != 0) return;
  const StragglerSettings& st = health->straggler();
  for (const NodeVerdict& v : verdicts) {
    if (v.streak < 2 && !v.named) continue;  // one slow window is noise on a shared machine
    std::fprintf(stderr,
                 "scaleguard-run: straggler check at step %lld: node %s computes %.2fx the other nodes' median "
                 "(threshold %.0f%%; %d of %d windows of %ld steps)%s\n",
                 static_cast<long long>(state_.step), v.node.c_str(), v.ratio, 100 * st.threshold, v.streak, st.windows,
                 st.every, v.named ? ": STRAGGLER named" : "");
    if (v.named && metrics_) {
      std::fprintf(metrics_,
                   "{\"straggler\":{\"step\":%lld,\"node\":\"%s\",\"ratio\":%.4f,\"windows\":%d,\"every\":%ld,"
                   "\"threshold\":%.4g}}\n",
                   static_cast<long long>(state_.step), v.node.c_str(), v.ratio, v.streak, st.every, st.threshold);
      std::fflush(metrics_);
    }
  }
}

void Trainer::sync_tied_embedding() {
  if (!grid_.embedding_group || cfg_.untied_head) return;
  TimedInterval timed(Timed::kComm);
  for (const auto& p : layout_->params())
    if (is_tied_embedding(p.name)) grid_.embedding_group->all_reduce(p.param.grad(), ReduceOp::kSum)->wait();
}

void Trainer::log_run() {
  // Each parameter once: tensor-parallel slices add up, replicated ones and the tied copy
  // count where counts_in_norm says; dp replicas are divided out.
  long long params = 0;
  for (const auto& p : layout_->params())
    if (model_->counts_in_norm(p.name)) params += p.numel;
  MPI_Allreduce(MPI_IN_PLACE, &params, 1, MPI_LONG_LONG, MPI_SUM, launch_.world_comm);
  params /= grid_.dp;
  if (!metrics_) return;
  std::fprintf(metrics_,
               "{\"run\":{\"model\":\"%s\",\"n_layer\":%lld,\"n_head\":%lld,\"n_embd\":%lld,\"seq_len\":%lld,"
               "\"vocab_size\":%lld,\"global_batch\":%lld,\"micro_batch\":%lld,\"micro_batches\":%lld,\"tp\":%d,"
               "\"pp\":%d,\"dp\":%d,\"zero\":%lld,\"world\":%d,\"threads\":%d,\"params\":%lld,"
               "\"schedule\":\"%s\",\"device\":\"%s\",\"precision\":\"%s\",\"recompute\":\"%s\"}}\n",
               cfg_.model.c_str(), static_cast<long long>(cfg_.n_layer), static_cast<long long>(cfg_.n_head),
               static_cast<long long>(cfg_.n_embd), static_cast<long long>(cfg_.seq_len),
               static_cast<long long>(cfg_.vocab_size), static_cast<long long>(cfg_.global_batch),
               static_cast<long long>(cfg_.micro_batch), static_cast<long long>(accum_), grid_.tp, grid_.pp, grid_.dp,
               static_cast<long long>(cfg_.zero), launch_.world, at::get_num_threads(), params,
               grid_.pp > 1 ? cfg_.schedule.c_str() : "none", device_.is_cuda() ? "cuda" : "cpu", cfg_.precision.c_str(),
               cfg_.recompute.c_str());
  std::fflush(metrics_);
}

void Trainer::log_step(double loss, double lr, double step_s, double comm_s, double grad_norm, double pipeline_s,
                       double bubble_s) {
  if (launch_.rank != 0) return;
  // Bytes this rank sent for the data-parallel gradient exchange (compress.h: ring model):
  // the top-k all-gather, or the dense all-reduce, which comm_bytes_dense always gives.
  int64_t n = 0;
  for (const auto& p : layout_->params()) n += p.numel;
  const int64_t dense_bytes = dense_allreduce_bytes(n, grid_.dp);
  const int64_t comm_bytes = compress_ ? compress_->last_bytes() : dense_bytes;
  double tokens = static_cast<double>(cfg_.global_batch * cfg_.seq_len);
  double tok_s = tokens / step_s;
  if (metrics_) {
    std::fprintf(metrics_,
                 "{\"step\":%lld,\"loss\":%.6f,\"lr\":%.6g,\"tokens_per_s\":%.1f,\"samples_per_s\":%.2f,"
                 "\"step_ms\":%.3f,\"comm_ms\":%.3f,\"comm_fraction\":%.4f,\"grad_norm\":%.5f,"
                 "\"pipeline_ms\":%.3f,\"bubble_fraction\":%.4f,\"comm_bytes\":%lld,\"comm_bytes_dense\":%lld,"
                 "\"density\":%.6g,\"pp_send_bytes\":%lld}\n",
                 static_cast<long long>(state_.step), loss, lr, tok_s, cfg_.global_batch / step_s, step_s * 1e3,
                 comm_s * 1e3, comm_s / step_s, grad_norm, pipeline_s * 1e3,
                 // A stage that left the previous step's all-reduce before rank 0 started this
                 // step earlier: its span may exceed rank 0's step.
                 bubble_s / std::max(step_s, pipeline_s), static_cast<long long>(comm_bytes),
                 static_cast<long long>(dense_bytes), compress_ ? compress_->density_at(state_.step - 1) : 1.0,
                 static_cast<long long>(pp_send_bytes_));
    std::fflush(metrics_);
  }
  if (csv_) {
    std::fprintf(csv_, "%lld,%lld,%.6f,%.17g,%.6f,%.1f,%.3f,\n", static_cast<long long>(state_.step), tokens_done(),
                 loss, lr, grad_norm, tok_s, step_s * 1e3);
    std::fflush(csv_);
  }
  if (tb_)
    tb_->scalars(state_.step, {{"train/loss", loss}, {"train/lr", lr}, {"train/grad_norm", grad_norm},
                               {"train/tokens_per_s", tok_s}});
  if (!cfg_.quiet) {
    double elapsed = now_s() - run_start_s_;
    double per_step = elapsed / static_cast<double>(state_.step - first_step_);
    std::fprintf(stderr, "step %lld/%lld  loss %.4f  lr %.2e  %.0f tok/s  comm %.0f%%  eta %s\n",
                 static_cast<long long>(state_.step), static_cast<long long>(cfg_.steps), loss, lr, tok_s,
                 100 * comm_s / step_s,
                 fmt_duration(per_step * static_cast<double>(cfg_.steps - state_.step)).c_str());
  }
}

std::vector<std::pair<std::string, at::Tensor>> Trainer::all_parameters() const {
  if (grid_.pp > 1) return gather_parameters(*layout_, *model_, *grid_.pp_group, grid_.tp > 1 ? grid_.tp_group.get() : nullptr);
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& p : layout_->params())  // tensor parallel: the whole tensor from the tp slices
    out.emplace_back(p.name, grid_.tp > 1 ? gather_slices(p.param.detach(), p.slice, *grid_.tp_group) : p.param.detach());
  return out;
}

std::string Trainer::params_checksum() const {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  for (const auto& [name, param] : all_parameters()) {
    at::Tensor t = param.cpu().contiguous();
    XXH3_64bits_update(st, t.data_ptr(), static_cast<size_t>(t.numel()) * t.element_size());
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH3_64bits_digest(st)));
  XXH3_freeState(st);
  return hex;
}

void Trainer::finish_run(double loss) {
  if (zero3_) zero3_->gather_all();  // the checksum and the dump read whole parameters
  std::string sum = params_checksum();
  // Data parallel keeps identical replicas (and with pp every stage gathered the same
  // whole model): a differing checksum is a bug, say so loudly.
  std::vector<char> all(17 * static_cast<size_t>(launch_.world));
  MPI_Allgather(sum.c_str(), 17, MPI_CHAR, all.data(), 17, MPI_CHAR, launch_.world_comm);
  // Gathered before rank 0 returns: with pp > 1 this is collective over the pp group.
  std::vector<std::pair<std::string, at::Tensor>> params;
  if (!cfg_.dump_params.empty()) params = all_parameters();
  if (zero3_) {
    for (auto& [name, t] : params) t = t.clone();  // ZeRO-3 frees the gathered buckets next
    zero3_->end_step();
  }
  if (launch_.rank != 0) return;
  for (int r = 1; r < launch_.world; ++r)
    if (sum != &all[17 * static_cast<size_t>(r)])
      std::fprintf(stderr, "scaleguard-run: WARNING: rank %d's parameters (checksum %s) differ from rank 0's (%s)\n", r,
                   &all[17 * static_cast<size_t>(r)], sum.c_str());
  if (metrics_ && hooks.final_metrics)
    if (const std::string line = hooks.final_metrics(); !line.empty()) std::fprintf(metrics_, "%s\n", line.c_str());
  if (metrics_) {
    std::fprintf(metrics_, "{\"final\":true,\"step\":%lld,\"loss\":%.6f,\"params_checksum\":\"%s\"}\n",
                 static_cast<long long>(state_.step), loss, sum.c_str());
    std::fflush(metrics_);
  }
  std::fprintf(stderr, "scaleguard-run: done: %lld steps, loss %.4f, params_checksum %s\n",
               static_cast<long long>(state_.step), loss, sum.c_str());
  if (!cfg_.dump_params.empty()) {
    // "SGPARAMS", u32 count, then per parameter: u32 name length, name, u32 ndim,
    // i64 dims[ndim], float32 data.
    FILE* f = std::fopen(cfg_.dump_params.c_str(), "wb");
    if (!f) throw RunError("cannot write '" + cfg_.dump_params + "': " + std::strerror(errno));
    std::fwrite("SGPARAMS", 1, 8, f);
    uint32_t n = static_cast<uint32_t>(params.size());
    std::fwrite(&n, 4, 1, f);
    for (const auto& [name, param] : params) {
      at::Tensor t = param.to(at::kFloat).cpu().contiguous();
      uint32_t len = static_cast<uint32_t>(name.size()), ndim = static_cast<uint32_t>(t.dim());
      std::fwrite(&len, 4, 1, f);
      std::fwrite(name.data(), 1, len, f);
      std::fwrite(&ndim, 4, 1, f);
      std::fwrite(t.sizes().data(), 8, ndim, f);
      std::fwrite(t.data_ptr(), 4, static_cast<size_t>(t.numel()), f);
    }
    if (std::fclose(f) != 0) throw RunError("error writing '" + cfg_.dump_params + "'");
  }
}

at::Tensor Trainer::rng_state() const {
  at::Generator gen = at::detail::getDefaultCPUGenerator();  // a handle to the global generator
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void Trainer::set_rng_state(const at::Tensor& state) {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

}  // namespace scaleguard::run
