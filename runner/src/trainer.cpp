#include "trainer.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <xxhash.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "exit_codes.h"

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

Trainer::Trainer(const Config& cfg, const Launch& launch, ProcessGrid& grid, Tokens tokens, at::Device device)
    : cfg_(cfg), launch_(launch), grid_(grid), tokens_(std::move(tokens)), device_(device),
      sampler_((tokens_.size() - 1) / static_cast<uint64_t>(cfg.seq_len), cfg.seed) {
  accum_ = cfg.global_batch / grid_.dp / cfg.micro_batch;
  model_ = make_model(cfg);  // initialised on the CPU: the same values on every device
  model_->to(device_);
  layout_ = std::make_unique<FlatLayout>(*model_, static_cast<int64_t>(cfg.bucket_mb * (1 << 20)));
  dp_ = std::make_unique<DataParallel>(*layout_, *grid_.dp_group, !cfg.no_overlap);
  optim_ = std::make_unique<AdamW>(*layout_, cfg);
  if (launch_.rank == 0) {
    int64_t n = 0;
    for (const auto& p : layout_->params()) n += p.numel;
    std::fprintf(stderr,
                 "scaleguard-run: model %s: %lld parameters (%lld bytes) in %zu buckets; %lld micro-batches of %lld "
                 "per rank; %llu samples per epoch\n",
                 cfg.model.c_str(), static_cast<long long>(n), static_cast<long long>(n * static_cast<int64_t>(layout_->buckets()[0].params.element_size())), layout_->buckets().size(),
                 static_cast<long long>(accum_), static_cast<long long>(cfg.micro_batch),
                 static_cast<unsigned long long>(sampler_.n()));
  }
  if (launch_.rank == 0 && !cfg.metrics.empty()) {
    metrics_ = std::fopen(cfg.metrics.c_str(), "w");
    if (!metrics_) throw RunError("cannot write metrics file '" + cfg.metrics + "': " + std::strerror(errno));
  }
  if (!cfg.sample_log.empty()) {
    std::string path = cfg.sample_log + ".rank" + std::to_string(launch_.rank);
    sample_log_ = std::fopen(path.c_str(), "w");
    if (!sample_log_) throw RunError("cannot write sample log '" + path + "': " + std::strerror(errno));
  }
}

Trainer::~Trainer() {
  if (metrics_) std::fclose(metrics_);
  if (sample_log_) std::fclose(sample_log_);
}

std::pair<at::Tensor, at::Tensor> Trainer::batch(int64_t step, int64_t u) {
  const int64_t m = cfg_.micro_batch, T = cfg_.seq_len;
  at::Tensor window = at::empty({m, T + 1}, at::kLong);  // (m, T+1)
  int64_t* w = window.data_ptr<int64_t>();
  if (sample_log_) std::fprintf(sample_log_, "%lld %lld", static_cast<long long>(step), static_cast<long long>(u));
  for (int64_t j = 0; j < m; ++j) {
    uint64_t pos = Sampler::position(step, cfg_.global_batch, grid_.dp_rank, accum_, m, u, j);
    uint64_t id = sampler_.sample_at(pos);
    uint64_t start = id * static_cast<uint64_t>(T);
    for (int64_t t = 0; t <= T; ++t) w[j * (T + 1) + t] = tokens_[start + static_cast<uint64_t>(t)];
    if (sample_log_) std::fprintf(sample_log_, " %llu", static_cast<unsigned long long>(id));
  }
  if (sample_log_) std::fputc('\n', sample_log_);
  at::Tensor x = window.narrow(1, 0, T).contiguous();                 // (m, T)
  at::Tensor y = model_->predicts_every_position()
                     ? window.narrow(1, 1, T).contiguous()            // (m, T) next token at each position
                     : window.select(1, T).contiguous();              // (m) token after the window
  return {x.to(device_), y.to(device_)};
}

int Trainer::run() {
  dp_->broadcast_parameters();
  run_start_s_ = now_s();
  first_step_ = state_.step;
  // Pre-divide: each micro-batch's mean loss counts 1 / (micro-batches x dp ranks) of the
  // global batch, so summing gradients over ranks gives the global-batch average.
  const double scale = 1.0 / static_cast<double>(accum_ * grid_.dp);
  double loss = 0;
  while (state_.step < cfg_.steps) {
    double t0 = now_s();
    double lr = lr_at(cfg_, state_.step);
    layout_->zero_grad();
    at::Tensor loss_sum = at::zeros({}, at::TensorOptions(at::kDouble).device(device_));
    for (int64_t u = 0; u < accum_; ++u) {
      auto [x, y] = batch(state_.step, u);
      dp_->begin_backward(u == accum_ - 1);
      at::Tensor l = model_->loss(x, y);
      loss_sum += l.detach().to(at::kDouble);
      (l * scale).backward();
    }
    dp_->finish();
    double comm_s = dp_->take_comm_seconds();
    double grad_norm = clip_grad_norm(*layout_, cfg_.grad_clip);
    optim_->step(lr);
    ++state_.step;
    state_.position = static_cast<uint64_t>(state_.step * cfg_.global_batch);
    state_.epoch = static_cast<int64_t>(state_.position / sampler_.n());
    state_.lr = lr;

    // One small all-reduce per step: the global loss and whether any rank was signalled,
    // so every rank stops at the same step boundary.
    double agree[2] = {loss_sum.item<double>() / static_cast<double>(accum_), stop_signal() ? 1.0 : 0.0};
    MPI_Allreduce(MPI_IN_PLACE, agree, 2, MPI_DOUBLE, MPI_SUM, launch_.world_comm);
    loss = agree[0] / grid_.world->size();
    bool stopping = agree[1] > 0;
    double step_s = now_s() - t0;
    if (state_.step % cfg_.log_every == 0 || state_.step == cfg_.steps || stopping)
      log_step(loss, lr, step_s, comm_s, grad_norm);
    if (hooks.after_step) hooks.after_step(*this, stopping);
    if (stopping) {
      if (launch_.rank == 0)
        std::fprintf(stderr, "scaleguard-run: stop requested (signal) at step %lld of %lld: all ranks stop here\n",
                     static_cast<long long>(state_.step), static_cast<long long>(cfg_.steps));
      return kExitStoppedAfterCheckpoint;
    }
  }
  finish_run(loss);
  return kExitOk;
}

void Trainer::log_step(double loss, double lr, double step_s, double comm_s, double grad_norm) {
  if (launch_.rank != 0) return;
  double tokens = static_cast<double>(cfg_.global_batch * cfg_.seq_len);
  double tok_s = tokens / step_s;
  if (metrics_) {
    std::fprintf(metrics_,
                 "{\"step\":%lld,\"loss\":%.6f,\"lr\":%.6g,\"tokens_per_s\":%.1f,\"samples_per_s\":%.2f,"
                 "\"step_ms\":%.3f,\"comm_ms\":%.3f,\"comm_fraction\":%.4f,\"grad_norm\":%.5f}\n",
                 static_cast<long long>(state_.step), loss, lr, tok_s, cfg_.global_batch / step_s, step_s * 1e3,
                 comm_s * 1e3, comm_s / step_s, grad_norm);
    std::fflush(metrics_);
  }
  if (!cfg_.quiet) {
    double elapsed = now_s() - run_start_s_;
    double per_step = elapsed / static_cast<double>(state_.step - first_step_);
    std::fprintf(stderr, "step %lld/%lld  loss %.4f  lr %.2e  %.0f tok/s  comm %.0f%%  eta %s\n",
                 static_cast<long long>(state_.step), static_cast<long long>(cfg_.steps), loss, lr, tok_s,
                 100 * comm_s / step_s,
                 fmt_duration(per_step * static_cast<double>(cfg_.steps - state_.step)).c_str());
  }
}

std::string Trainer::params_checksum() const {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  for (const auto& p : layout_->params()) {
    at::Tensor t = p.param.detach().cpu().contiguous();
    XXH3_64bits_update(st, t.data_ptr(), static_cast<size_t>(t.numel()) * t.element_size());
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH3_64bits_digest(st)));
  XXH3_freeState(st);
  return hex;
}

void Trainer::finish_run(double loss) {
  std::string sum = params_checksum();
  // Data parallel keeps identical replicas: a differing checksum is a bug, say so loudly.
  std::vector<char> all(17 * static_cast<size_t>(launch_.world));
  MPI_Allgather(sum.c_str(), 17, MPI_CHAR, all.data(), 17, MPI_CHAR, launch_.world_comm);
  if (launch_.rank != 0) return;
  for (int r = 1; r < launch_.world; ++r)
    if (sum != &all[17 * static_cast<size_t>(r)])
      std::fprintf(stderr, "scaleguard-run: WARNING: rank %d's parameters (checksum %s) differ from rank 0's (%s)\n", r,
                   &all[17 * static_cast<size_t>(r)], sum.c_str());
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
    uint32_t n = static_cast<uint32_t>(layout_->params().size());
    std::fwrite(&n, 4, 1, f);
    for (const auto& p : layout_->params()) {
      at::Tensor t = p.param.detach().to(at::kFloat).cpu().contiguous();
      uint32_t len = static_cast<uint32_t>(p.name.size()), ndim = static_cast<uint32_t>(t.dim());
      std::fwrite(&len, 4, 1, f);
      std::fwrite(p.name.data(), 1, len, f);
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
