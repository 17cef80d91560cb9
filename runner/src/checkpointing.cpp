#include "checkpointing.h"

#include <ATen/ATen.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "scaleguard/catalog.h"
#include "trainer.h"

namespace scaleguard::run {
namespace ck = scaleguard::ckpt;
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Rows [lo, hi) of dim 0 that member `i` of `n` writes.
std::pair<int64_t, int64_t> rows(int64_t total, int i, int n) { return {total * i / n, total * (i + 1) / n}; }

std::string shape_text(at::IntArrayRef s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

// Saved scalars: group "state" holds the trainer's position in the run.
constexpr const char* kState = "state";

}  // namespace

std::string model_identity(const Config& cfg) {
  std::string text;
  for (const char* key : {"model", "vocab-size", "seq-len", "n-layer", "n-head", "n-embd", "hidden", "untied-head"}) {
    auto it = cfg.effective.find(key);
    text += std::string(key) + "=" + (it == cfg.effective.end() ? "" : it->second) + "\n";
  }
  return text;
}

std::string model_hash(const Config& cfg) {
  const std::string id = model_identity(cfg);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH3_64bits(id.data(), id.size())));
  return hex;
}

Checkpointing::Checkpointing(const Config& cfg, const Launch& launch)
    : cfg_(cfg), launch_(launch), comm_(std::make_unique<ck::MpiCommitComm>(launch.world_comm)),
      store_(cfg.ckpt_dir, [this](const std::string& line) { log(line); }),
      on_error_(cfg.ckpt_on_error == "continue" ? ck::OnSaveError::keep_training : ck::OnSaveError::stop) {
  ck::CheckpointMeta meta;
  meta.strategy = launch.world > 1 ? "ddp" : "single";
  meta.tp = static_cast<int>(cfg.tp);
  meta.pp = static_cast<int>(cfg.pp);
  meta.dp = static_cast<int>(cfg.dp);
  std::string id = model_identity(cfg);
  id.pop_back();
  for (char& ch : id) ch = ch == '\n' ? ' ' : ch;
  meta.model_name = id;
  meta.config_hash = model_hash(cfg);
  meta.code_version = SCALEGUARD_VERSION;
  saver_ = std::make_unique<ck::Saver>(cfg.ckpt_dir, meta, *comm_, static_cast<int>(cfg.ckpt_keep),
                                       [this](const std::string& line) { log(line); });

  // Interval: the option, else the plan's seconds, else auto. `auto` uses the job's MTBF:
  // one node's MTBF divided by the nodes the job spans.
  ck::IntervalSpec spec{ck::IntervalSpec::Kind::automatic, 0, 0};
  if (!cfg.ckpt_every.empty()) {
    spec = ck::parse_interval(cfg.ckpt_every).value();  // validated by parse_train_args
    describe_ = "--ckpt-every " + cfg.ckpt_every;
  } else if (cfg.ckpt_interval_s > 0) {
    spec = {ck::IntervalSpec::Kind::minutes, 0, cfg.ckpt_interval_s / 60};
    describe_ = "the plan's " + std::to_string(static_cast<long>(cfg.ckpt_interval_s)) + " s";
  } else {
    describe_ = "auto";
  }
  const double node_mtbf = cfg.ckpt_mtbf_hours > 0 ? cfg.ckpt_mtbf_hours : Assumptions{}.node_mtbf_hours;
  const double job_mtbf = node_mtbf / std::max(1, launch.nodes);
  if (spec.kind == ck::IntervalSpec::Kind::automatic)
    describe_ += " (Daly from the measured save time, job MTBF " + std::to_string(static_cast<long>(job_mtbf)) + " h)";
  clock_ = std::make_unique<ck::IntervalClock>(spec, job_mtbf, now_s());
}

Checkpointing::~Checkpointing() = default;

void Checkpointing::log(const std::string& line) const {
  std::fprintf(stderr, "scaleguard-run: rank %d: checkpoint: %s\n", launch_.rank, line.c_str());
}

std::string Checkpointing::prepare() const {
  // Each rank here writes rows of whole parameters and Adam moments: right for data
  // parallel, where every rank holds all of them. Tensor-parallel slices, pipeline stages
  // (a tied embedding on two stages) and ZeRO-sharded moments need their global offsets.
  if (cfg_.tp != 1 || cfg_.pp != 1 || cfg_.zero != 0)
    return "--ckpt-dir: checkpoints support single and ddp (data parallel) runs so far, not tp=" +
           std::to_string(cfg_.tp) + " pp=" + std::to_string(cfg_.pp) + " zero=" + std::to_string(cfg_.zero);
  std::error_code ec;
  std::filesystem::create_directories(cfg_.ckpt_dir, ec);
  if (ec) return "cannot create checkpoint directory '" + cfg_.ckpt_dir + "': " + ec.message();
  if (::access(cfg_.ckpt_dir.c_str(), W_OK | X_OK) != 0)
    return "checkpoint directory '" + cfg_.ckpt_dir + "' is not writable: " + std::strerror(errno) +
           " (give a --ckpt-dir this user can write)";
  return "";
}

std::string Checkpointing::resume(Trainer& t) {
  if (launch_.rank == 0)
    log("directory " + cfg_.ckpt_dir + ", every " + describe_ + ", " + (cfg_.ckpt_async ? "async" : "sync") +
        ", keep " + std::to_string(cfg_.ckpt_keep) + ", on error " + cfg_.ckpt_on_error);
  ck::OpenOptions opts;
  opts.expect_config_hash = model_hash(cfg_);  // what the saver writes
  auto found = ck::resume(store_, *comm_, opts);  // collective; same outcome everywhere
  if (!found) return found.error().str();
  if (!found->has_value()) {
    if (launch_.rank == 0) log("no checkpoint in " + cfg_.ckpt_dir + ": starting at step 0");
    return "";
  }
  const ck::Reader& reader = **found;
  const std::string& dir = reader.dir();
  try {
    // Parameters and Adam moments, whole, in place (they stay the tensors the optimizer and
    // the gradient buckets point into).
    const auto all = reader.tensor_names();
    std::set<std::string> names(all.begin(), all.end());
    auto load = [&](const std::string& name, const at::Tensor& dst) -> std::string {
      if (!names.count(name)) return dir + ": has no " + name + " (a checkpoint of another model?)";
      const auto shape = reader.global_shape(name);
      if (at::IntArrayRef(shape) != dst.sizes())
        return dir + ": " + name + " has shape " + shape_text(shape) + " but this model's is " +
               shape_text(dst.sizes());
      names.erase(name);
      at::Tensor target = dst.detach();
      if (target.device().is_cpu() && target.is_contiguous()) {
        auto ok = reader.read_into(name, target, std::vector<int64_t>(shape.size(), 0));
        return ok ? "" : ok.error().str();
      }
      auto whole = reader.read(name);
      if (!whole) return whole.error().str();
      target.copy_(*whole);
      return "";
    };
    for (const auto& p : t.parameters())
      if (auto e = load("params/" + p.name, p.param); !e.empty()) return e;
    for (const auto& s : t.optimizer().named_state())
      if (auto e = load("optim/" + s.param + "/" + s.kind, s.tensor); !e.empty()) return e;
    // With pipeline stages a rank holds only its stage's parameters.
    if (cfg_.pp == 1 && !names.empty())
      return dir + ": holds " + *names.begin() + ", which this model does not have (a checkpoint of another model?)";

    // Rank-local state: this rank's RNG when the writer had this rank, else rank 0's.
    const int writer = launch_.rank < reader.manifest().world_size ? launch_.rank : 0;
    auto rng = reader.read_rank_state(writer, "state/rng/cpu");
    if (!rng) return rng.error().str();
    t.set_rng_state(*rng);

    auto get = [&](const std::string& group, const std::string& key) {
      auto v = reader.scalar_int(writer, group, key);
      if (!v) throw RunError(v.error().str());
      return *v;
    };
    TrainState& st = t.state();
    st.step = get(kState, "step");
    st.epoch = get(kState, "epoch");
    st.position = static_cast<uint64_t>(get(kState, "sampler_position"));
    st.restarts = static_cast<uint32_t>(get(kState, "restart_count") + 1);
    auto lr = reader.scalar_double(writer, kState, "lr");
    if (!lr) return lr.error().str();
    st.lr = *lr;
    t.optimizer().set_steps_taken(get("optim", "step"));
    // The sampler is stateless (position = step x global batch): another global batch
    // would silently train on other samples.
    if (st.position != static_cast<uint64_t>(st.step * cfg_.global_batch))
      return dir + ": saved at sample position " + std::to_string(st.position) + " after " +
             std::to_string(st.step) + " steps, which needs global-batch " +
             std::to_string(st.step > 0 ? st.position / static_cast<uint64_t>(st.step) : 0) + ", not " +
             std::to_string(cfg_.global_batch) + " (resume with the same global batch)";
  } catch (const std::exception& e) {
    return dir + ": " + e.what();
  }
  last_committed_ = t.state().step;
  if (launch_.rank == 0)
    log("resumed from " + ck::step_dir_name(t.state().step) + " (restart #" + std::to_string(t.state().restarts) +
        ", written by " + std::to_string(reader.manifest().world_size) + " rank(s), now " +
        std::to_string(launch_.world) + ")");
  return "";
}

ck::Snapshot Checkpointing::snapshot(Trainer& t, bool copy) const {
  const TrainState& st = t.state();
  ck::Snapshot snap(st.step, copy);
  // The ranks holding the same parameters (the dp group) split each one by rows.
  const int member = t.grid().dp_rank, members = t.grid().dp;
  auto add = [&](const std::string& name, const at::Tensor& v) {
    if (v.dim() == 0) {
      if (member == 0) snap.add_whole(name, v);
      return;
    }
    auto [lo, hi] = rows(v.size(0), member, members);
    if (hi == lo) return;
    std::vector<int64_t> offset(static_cast<size_t>(v.dim()), 0);
    offset[0] = lo;
    snap.add_slice(name, v.narrow(0, lo, hi - lo), v.sizes().vec(), offset);
  };
  for (const auto& p : t.parameters()) add("params/" + p.name, p.param);
  for (const auto& s : t.optimizer().named_state()) add("optim/" + s.param + "/" + s.kind, s.tensor);
  snap.add_rank_state("state/rng/cpu", t.rng_state());
  snap.set_scalar(kState, "step", st.step);
  snap.set_scalar(kState, "epoch", st.epoch);
  snap.set_scalar(kState, "sampler_position", static_cast<int64_t>(st.position));
  snap.set_scalar(kState, "restart_count", static_cast<int64_t>(st.restarts));
  snap.set_scalar(kState, "lr", st.lr);
  snap.set_scalar(kState, "global_batch", cfg_.global_batch);
  snap.set_scalar("optim", "step", t.optimizer().steps_taken());
  return snap;
}

void Checkpointing::handle(const Result<ck::Committed>& r, bool must_commit) {
  // The verdict is broadcast by the commit, so every rank takes the same branch here.
  if (r) {
    last_committed_ = r->step;
    if (launch_.rank == 0) {
      char line[256];
      std::snprintf(line, sizeof line, "%s committed: %.2f MB in this rank's shard, written in %.3f s%s",
                    ck::step_dir_name(r->step).c_str(), static_cast<double>(r->bytes) / 1e6, r->write_seconds,
                    cfg_.ckpt_async ? (", host snapshot " + std::to_string(r->snapshot_bytes) + " bytes").c_str() : "");
      log(line);
    }
    return;
  }
  const std::string what = "save failed: " + r.error().str() + "; the previous checkpoint is kept";
  if (launch_.rank == 0) log(what);
  if (must_commit) throw CheckpointStop("checkpoint before stopping " + what + "; not exiting 85 (nothing to requeue from)");
  if (on_error_ == ck::OnSaveError::stop) throw CheckpointStop("checkpoint " + what + " (--ckpt-on-error stop)");
  if (launch_.rank == 0) log("training continues (--ckpt-on-error continue)");
}

void Checkpointing::save_now(Trainer& t, bool must_commit) {
  const double t0 = now_s();
  auto r = saver_->save(snapshot(t, false));
  clock_->saved(now_s(), now_s() - t0);
  handle(r, must_commit);
}

void Checkpointing::after_step(Trainer& t, bool stopping) {
  const int64_t step = t.state().step;
  // An async save in flight commits once every rank's write is done (collective; pending
  // is the same on every rank).
  if (saver_->pending()) {
    if (auto r = saver_->poll()) {
      clock_->saved(now_s(), now_s() - save_started_);
      handle(*r, false);
    }
  }
  const bool last = step >= cfg_.steps;
  bool due = clock_->due(step, now_s());
  if (clock_->time_based()) due = ck::agree_due(*comm_, due);  // ranks' clocks differ
  if (stopping || last) {
    // Stop or end: everything on disk before returning (exit 85 only after the commit).
    if (auto r = saver_->finish()) handle(*r, stopping);
    if (last_committed_ != step) save_now(t, stopping);
    return;
  }
  if (!due || last_committed_ == step) return;
  if (!cfg_.ckpt_async) {
    save_now(t, false);
    return;
  }
  if (auto r = saver_->finish()) handle(*r, false);  // the next save waits for the previous
  save_started_ = now_s();
  saver_->start(snapshot(t, false));
  // The host copy must exist before the next optimizer step changes the parameters; the
  // write itself goes on in the background.
  saver_->wait_snapshot();
}

}  // namespace scaleguard::run
