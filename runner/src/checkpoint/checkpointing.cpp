#include "checkpoint/checkpointing.h"

#include <ATen/ATen.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <map>
#include <set>

#include "checkpoint/device_staging.h"
#include "ckpt/local_tier.h"
#include "scaleguard/goodput.h"
#include "scaleguard/catalog.h"
#include "train/trainer.h"
#include "scaleguard/build_info.h"
#include "checkpoint/weights.h"

namespace scaleguard::run {
namespace ck = scaleguard::ckpt;
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Unix seconds: goodput's marks (compared across runs, and so across processes and nodes).
double wall_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// This process's start in Unix seconds (/proc: boot time + start ticks), else now.
double process_start() {
  std::FILE* f = std::fopen("/proc/self/stat", "r");
  std::string stat;
  if (f) {
    char buf[1024];
    size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    stat.assign(buf, n);
  }
  unsigned long long ticks = 0;
  const size_t paren = stat.rfind(')');
  if (paren != std::string::npos) {
    // Fields after the command: state is field 3; starttime is field 22.
    const char* p = stat.c_str() + paren + 2;
    for (int field = 3; field < 22 && *p; ++field) p = std::strchr(p, ' ') ? std::strchr(p, ' ') + 1 : "";
    ticks = std::strtoull(p, nullptr, 10);
  }
  double btime = 0;
  if (std::FILE* s = std::fopen("/proc/stat", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, s))
      if (std::strncmp(line, "btime ", 6) == 0) btime = std::strtod(line + 6, nullptr);
    std::fclose(s);
  }
  const long hz = ::sysconf(_SC_CLK_TCK);
  if (ticks == 0 || btime <= 0 || hz <= 0) return wall_now();
  return std::min(wall_now(), btime + static_cast<double>(ticks) / static_cast<double>(hz));
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
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

// A box of a global tensor that this rank holds: the view of the rank's tensor that holds
// it and where it sits in the global tensor.
struct Piece {
  at::Tensor local;
  std::vector<int64_t> offset;
};

// A box of the local tensor that is contiguous in its row-major flattening.
struct Box {
  std::vector<int64_t> offset, extent;
  int64_t flat = 0;  // flat index of its first element
};

int64_t volume(at::IntArrayRef extent) {
  int64_t n = 1;
  for (int64_t e : extent) n *= e;
  return n;
}

// The flat range [lo, hi) (relative to the sub-tensor at `prefix`, whose element 0 has flat
// index `base`) as contiguous boxes: a partial leading row, whole rows, a partial trailing
// row, the partial rows split the same way in the inner dimensions.
void flat_boxes(at::IntArrayRef shape, const std::vector<int64_t>& prefix, int64_t lo, int64_t hi, int64_t base,
                std::vector<Box>& out) {
  if (lo >= hi) return;
  const size_t d = prefix.size();
  if (d == shape.size()) {  // a 0-d tensor
    out.push_back({prefix, {}, base});
    return;
  }
  const int64_t inner = volume(shape.slice(d + 1));
  auto part_row = [&](int64_t r, int64_t a, int64_t b) {
    std::vector<int64_t> p = prefix;
    p.push_back(r);
    flat_boxes(shape, p, a, b, base + r * inner, out);
  };
  int64_t r = lo / inner;
  if (lo % inner != 0) {
    const int64_t end = std::min(hi, (r + 1) * inner);
    part_row(r, lo - r * inner, end - r * inner);
    lo = end, ++r;
  }
  if (const int64_t whole = hi / inner - r; lo < hi && whole > 0) {
    Box b{prefix, std::vector<int64_t>(d, 1), base + r * inner};
    b.offset.push_back(r);
    b.extent.push_back(whole);
    for (size_t i = d + 1; i < shape.size(); ++i) b.offset.push_back(0), b.extent.push_back(shape[i]);
    out.push_back(std::move(b));
    lo += whole * inner, r += whole;
  }
  if (lo < hi) part_row(r, 0, hi - r * inner);
}

// Elements [lo, hi) of the flattened local piece of parameter `p` as boxes of the global
// tensor. `t` holds the local elements from flat index `t_base` on (the whole piece, or a
// ZeRO-1 range of it). A tensor-parallel slice maps local index c along its dim to group
// c / P (P = local size / interleave), at g * G + index * P + c % P globally (G = P x parts).
std::vector<Piece> pieces_of(const at::Tensor& t, int64_t t_base, const FlatParam& p, int64_t lo, int64_t hi) {
  const at::Tensor flat = t.detach().reshape({-1});
  const at::IntArrayRef shape = p.param.sizes();
  std::vector<Box> boxes;
  flat_boxes(shape, {}, lo, hi, 0, boxes);
  std::vector<Piece> out;
  const Slice& s = p.slice;
  for (const Box& b : boxes) {
    at::Tensor v = flat.narrow(0, b.flat - t_base, volume(b.extent)).view(b.extent);
    if (s.whole()) {
      out.push_back({v, b.offset});
      continue;
    }
    const auto d = static_cast<size_t>(s.dim);
    const int64_t P = shape[d] / s.interleave, G = P * s.parts;
    for (int64_t c = b.offset[d], end = c + b.extent[d]; c < end;) {
      const int64_t within = c % P, n = std::min(P - within, end - c);
      Piece pc{v.narrow(s.dim, c - b.offset[d], n), b.offset};
      pc.offset[d] = c / P * G + s.index * P + within;
      out.push_back(std::move(pc));
      c += n;
    }
  }
  return out;
}

// This rank's index among the ranks holding identical copies of a tensor, and their count:
// the dp group (not for a ZeRO-1 shard, which one dp rank owns), and the tp group too when
// the parameter is replicated rather than sliced.
std::pair<int, int> replica(const ProcessGrid& g, bool sliced, bool sharded) {
  int member = sharded ? 0 : g.dp_rank, members = sharded ? 1 : g.dp;
  if (!sliced) member = member * g.tp + g.tp_rank, members *= g.tp;
  return {member, members};
}

// The last pipeline stage's copy of the tied token embedding: saved once, by the first stage.
bool tied_copy(const ProcessGrid& g, const std::string& name) { return g.pp > 1 && !g.first_stage() && is_tied_embedding(name); }

std::string strategy_name(const Config& cfg, int world) {
  if (world == 1) return "single";
  std::string s;
  auto add = [&](bool on, const char* part) {
    if (on) s += (s.empty() ? "" : "+") + std::string(part);
  };
  add(cfg.tp > 1, "tp");
  add(cfg.pp > 1, "pp");
  add(cfg.dp > 1, cfg.zero > 0 ? ("zero" + std::to_string(cfg.zero)).c_str() : "ddp");
  return s;
}

}  // namespace

std::string model_identity(const Config& cfg) {
  std::string text;
  for (const char* key : {"model", "vocab-size", "seq-len", "n-layer", "n-head", "n-embd", "hidden", "untied-head"}) {
    auto it = cfg.effective.find(key);
    text += std::string(key) + "=" + (it == cfg.effective.end() ? "" : it->second) + "\n";
  }
  // Llama's own shape keys, for llama only: a GPT's identity (and its checkpoints' model
  // hash) stays what it was before they existed.
  if (cfg.model == "llama")
    for (const char* key : {"n-kv-head", "ffn-hidden", "rope-theta", "norm-eps"}) {
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
  meta.strategy = strategy_name(cfg, launch.world);
  meta.tp = static_cast<int>(cfg.tp);
  meta.pp = static_cast<int>(cfg.pp);
  meta.dp = static_cast<int>(cfg.dp);
  std::string id = model_identity(cfg);
  id.pop_back();
  for (char& ch : id) ch = ch == '\n' ? ' ' : ch;
  meta.model_name = id;
  meta.config_hash = model_hash(cfg);
  for (const std::string& key : model_config_keys())
    if (auto it = cfg.effective.find(key); it != cfg.effective.end()) meta.model_config[key] = it->second;
  // Where the weights came from (absolute): `export` takes that directory's tokenizer files.
  if (!cfg.init_from.empty()) {
    std::error_code ec;
    const auto abs = std::filesystem::absolute(cfg.init_from, ec);
    meta.model_config["init-from"] = ec ? cfg.init_from : abs.lexically_normal().string();
  }
  meta.code_version = build_version();
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
  char mtbf[32];
  std::snprintf(mtbf, sizeof mtbf, "%.4g", job_mtbf);
  if (spec.kind == ck::IntervalSpec::Kind::automatic)
    describe_ += std::string(" (Daly from the measured cost of a save, ") +
                 (cfg.ckpt_async ? "the training thread's stall + I/O contention" : "the save") + ", job MTBF " +
                 mtbf + " h; the first save measures it)";
  else if (spec.kind == ck::IntervalSpec::Kind::steps)
    describe_ += " (fixed: every step divisible by " + std::to_string(spec.steps) + ")";
  else
    describe_ += " (fixed: from one save's start to the next)";
  clock_ = std::make_unique<ck::IntervalClock>(spec, job_mtbf, now_s());
  meta_ = meta;

  // --ckpt-local-dir: the spec above paces the local tier; --ckpt-shared-every the shared one.
  if (!cfg.ckpt_local_dir.empty()) {
    local_clock_ = std::move(clock_);
    local_describe_ = describe_;
    const std::string shared = cfg.ckpt_shared_every.empty() ? "auto" : cfg.ckpt_shared_every;
    const ck::IntervalSpec sspec = ck::parse_interval(shared).value();  // validated by parse_train_args
    describe_ = "--ckpt-shared-every " + shared;
    if (sspec.kind == ck::IntervalSpec::Kind::automatic)
      describe_ += std::string(" (Daly from the measured cost of a shared save, job MTBF ") + mtbf + " h)";
    clock_ = std::make_unique<ck::IntervalClock>(sspec, job_mtbf, now_s());
    // Every rank's node; SCALEGUARD_TEST_RANKS_PER_NODE=N makes ranks [kN, (k+1)N) node k
    // (tests on one machine: one local directory per "node" through %h).
    int node = launch.node;
    std::string host = launch.host;
    if (const char* rpn = std::getenv("SCALEGUARD_TEST_RANKS_PER_NODE"); rpn && std::atoi(rpn) > 0) {
      node = launch.rank / std::atoi(rpn);
      host = "node" + std::to_string(node);
    }
    std::vector<int> node_of(static_cast<size_t>(launch.world));
    MPI_Allgather(&node, 1, MPI_INT, node_of.data(), 1, MPI_INT, launch.world_comm);
    std::string dir = cfg.ckpt_local_dir;
    for (size_t at = dir.find("%h"); at != std::string::npos; at = dir.find("%h", at + host.size()))
      dir.replace(at, 2, host);
    local_ = std::make_unique<ck::LocalTier>(dir, meta, launch.world_comm, node_of, static_cast<int>(cfg.ckpt_local_keep),
                                             [this](const std::string& line) { log(line); });
  }

  // Goodput (rank 0): this run appended to the job's file in the checkpoint directory.
  if (launch.rank == 0) {
    ck::GoodputFile previous;
    const std::string path = cfg.ckpt_dir + "/" + ck::kGoodputName;
    if (std::filesystem::exists(path)) {
      if (auto f = ck::read_goodput(path)) previous = std::move(f).value();
      else log("goodput: " + f.error().message + ": starting a new record");
    }
    ck::GoodputRun run;
    const std::string job = env_or("SLURM_JOB_ID", "");
    if (previous.job.empty()) previous.job = job;
    run.allocation = job.empty() ? "" : job + "." + env_or("SLURM_RESTART_COUNT", "0");
    run.host = launch.host;
    run.ranks = launch.world;
    goodput_ = std::make_unique<ck::GoodputMeter>(std::move(previous), std::move(run), process_start());
    const std::string every = env_or("SCALEGUARD_GOODPUT_WRITE_S", "1");
    goodput_every_s_ = std::strtod(every.c_str(), nullptr);
  }
}

Checkpointing::~Checkpointing() = default;

void Checkpointing::log(const std::string& line) const {
  std::fprintf(stderr, "scaleguard-run: rank %d: checkpoint: %s\n", launch_.rank, line.c_str());
}

std::string Checkpointing::prepare() const {
  std::error_code ec;
  std::filesystem::create_directories(cfg_.ckpt_dir, ec);
  if (ec) return "cannot create checkpoint directory '" + cfg_.ckpt_dir + "': " + ec.message();
  if (::access(cfg_.ckpt_dir.c_str(), W_OK | X_OK) != 0)
    return "checkpoint directory '" + cfg_.ckpt_dir + "' is not writable: " + std::strerror(errno) +
           " (give a --ckpt-dir this user can write)";
  if (local_) return local_->prepare();
  return "";
}

std::string Checkpointing::reserve(Trainer& t) {
  const std::string error = reserve_memory(t);
  // The last start-up step before training: goodput's start-up ends here.
  if (goodput_) {
    ck::GoodputRun& run = const_cast<ck::GoodputRun&>(goodput_->run());
    run.gpus = t.parameters().front().param.is_cuda() ? launch_.world : 0;
    goodput_->ready(wall_now(), t.state().step);
    write_goodput(true);
    t.hooks.final_metrics = [this] { return goodput_line(); };
  }
  return error;
}

void Checkpointing::write_goodput(bool now) {
  if (!goodput_) return;
  const double t = now_s();
  if (!now && t - goodput_written_ < goodput_every_s_) return;
  goodput_written_ = t;
  if (auto e = ck::write_goodput(cfg_.ckpt_dir + "/" + ck::kGoodputName, goodput_->file()); !e.empty())
    log("goodput: " + e);
}

std::string Checkpointing::goodput_line() const {
  if (!goodput_) return "";
  const ck::GoodputRun& r = goodput_->run();
  const ck::GoodputTotals tot = goodput_->file().totals();
  char line[640];
  std::snprintf(line, sizeof line,
                "{\"goodput\":{\"run\":%zu,\"wall_s\":%.3f,\"startup_s\":%.3f,\"restore_s\":%.3f,"
                "\"productive_s\":%.3f,\"lost_s\":%.3f,\"lost_steps\":%lld,\"ckpt_s\":%.3f,\"overhead_s\":%.3f,"
                "\"restart_s\":%.3f,\"job_allocated_s\":%.3f,\"job_goodput\":%.4f,\"job_failures\":%d}}",
                goodput_->file().runs.size() - 1, r.wall(), r.startup_s, r.restore_s, r.productive_s, r.lost_s,
                static_cast<long long>(r.lost_steps), r.ckpt_s, r.overhead_s, r.restart_s, tot.allocated_s,
                tot.goodput(), tot.failures);
  return line;
}

std::string Checkpointing::reserve_memory(Trainer& t) {
  if (!cfg_.ckpt_async) return "";
  try {
    // On a GPU: a pinned mirror of every flat bucket and optimizer-state buffer, reused by
    // every save (device_staging.h).
    if (auto raw = make_device_staging(t.parameters().front().param.device())) {
      auto staging = std::make_unique<StagedBuffers>(std::move(raw));
      if (t.layout().params_sharded())  // ZeRO-3: the shards persist, the full buckets do not
        for (const auto& b : t.layout().buckets()) staging->add_storage_of(b.shard_params);
      else
        for (const auto& p : t.parameters()) staging->add_storage_of(p.param);
      for (const auto& s : t.optimizer().named_state()) staging->add_storage_of(s.tensor);
      if (launch_.rank == 0 && cfg_.verbose)
        log("async snapshots: reserved " + std::to_string(staging->bytes()) + " bytes of host mirrors per rank, " +
            staging->kind());
      staging_ = std::move(staging);
      return "";
    }
    const uint64_t bytes = saver_->reserve(snapshot(t, false));
    if (launch_.rank == 0 && cfg_.verbose) log("async snapshots: reserved " + std::to_string(bytes) + " bytes of host memory per rank");
    return "";
  } catch (const std::exception& e) {
    return "cannot reserve host memory for async checkpoints (--ckpt-async off avoids it): " + std::string(e.what());
  }
}

// Top-k residuals are per-rank state (each rank's unsent gradient). The same dp size loads
// each rank's own, bit for bit. Another dp size folds them: new rank r takes the sum of old
// ranks r, r + dp, r + 2 dp, ... (zeros when none), so the sum over ranks, the gradient
// mass still to be sent, is kept; the run then differs from an uninterrupted one by where
// that mass waits, not by what is sent in total.
std::string Checkpointing::load_compress_state(Trainer& t, const ck::Reader& reader) const {
  auto saved = reader.scalar_int(0, "compress", "dp");  // present iff the writer compressed
  TopKCompressor* c = t.compressor();
  // Test hook: resume without the residuals (tests/runner/topk_compress.sh shows that the run
  // then differs from the uninterrupted one).
  if (const char* skip = std::getenv("SCALEGUARD_TEST_SKIP_RESIDUALS"); skip && std::string(skip) == "1") return "";
  if (!saved) {
    if (c && launch_.rank == 0) log("no top-k residuals in " + reader.dir() + " (written uncompressed): they start at zero");
    return "";
  }
  const int old_dp = static_cast<int>(*saved), new_dp = t.grid().dp, me = t.grid().dp_rank;
  if (!c) {
    if (launch_.rank == 0)
      log("WARNING: " + reader.dir() + " holds top-k residuals of dp=" + std::to_string(old_dp) +
          " (gradient not yet sent); this run does not compress (--compress none or one rank): they are dropped");
    return "";
  }
  for (const char* kind : {"residual", "velocity"}) {
    if (std::string(kind) == "velocity" && !c->momentum_correction()) continue;
    const std::string name = std::string("compress/") + kind;
    at::Tensor sum;
    for (int j = me; j < old_dp; j += new_dp) {
      auto part = reader.read_rank_state(j, name);
      if (!part) {
        if (std::string(kind) == "velocity") {  // written without momentum correction
          if (launch_.rank == 0) log("no top-k velocity in " + reader.dir() + ": momentum correction starts at zero");
          break;
        }
        return part.error().str();
      }
      if (part->numel() != c->numel())
        return reader.dir() + ": " + name + " of rank " + std::to_string(j) + " has " + std::to_string(part->numel()) +
               " elements, the model " + std::to_string(c->numel());
      sum = sum.defined() ? sum.add_(*part) : *part;
    }
    if (sum.defined()) c->set_flat_state(kind, sum);
  }
  if (launch_.rank == 0 && old_dp != new_dp)
    log("top-k residuals of dp=" + std::to_string(old_dp) + " folded into dp=" + std::to_string(new_dp) +
        " (rank r takes the sum of old ranks r, r+" + std::to_string(new_dp) + ", ...; the total is kept)");
  return "";
}

std::string Checkpointing::resume(Trainer& t) {
  if (launch_.rank == 0 && cfg_.verbose)  // without --verbose: main's start-up line names the directory
    log("directory " + cfg_.ckpt_dir + ", every " + describe_ + ", " + (cfg_.ckpt_async ? "async" : "sync") +
        ", keep " + std::to_string(cfg_.ckpt_keep) + ", on error " + cfg_.ckpt_on_error);
  ck::OpenOptions opts;
  opts.expect_config_hash = model_hash(cfg_);  // what the saver writes
  const double restore_t0 = wall_now();
  std::string tier = "shared";
  // The local tier first when it holds a newer checkpoint than the shared one (newest wins).
  auto found = [&]() -> Result<std::optional<ck::Reader>> {
    if (!local_) return ck::resume(store_, *comm_, opts);   // collective; same outcome everywhere
    int64_t shared_newest = -1;
    if (launch_.rank == 0)
      if (auto listed = store_.list())
        for (const auto& l : *listed)
          if (l.status == ck::Status::committed) shared_newest = std::max(shared_newest, l.step);
    shared_newest = std::stoll(comm_->broadcast(std::to_string(shared_newest)));
    if (auto chosen = local_->restore(shared_newest, meta_)) {
      ck::OpenOptions mine = opts;
      mine.only_rank = launch_.rank;
      mine.verify_files = false;   // restore() verified this rank's shard
      auto r = ck::Reader::open(chosen->dir, mine);
      if (comm_->all_min(r ? 1 : 0) == 1) {
        tier = "local";
        if (launch_.rank == 0)
          log("local tier: " + ck::step_dir_name(chosen->step) + " in " + local_->dir() + " (the shared tier's newest: " +
              (shared_newest < 0 ? std::string("none") : ck::step_dir_name(shared_newest)) + "), " +
              std::to_string(chosen->from_partner) + " shard(s) restored from partner copies");
        return std::optional<ck::Reader>(std::move(r).value());
      }
      log("local tier: cannot open " + chosen->dir + (r ? std::string(" on another rank") : ": " + r.error().message) +
          "; resuming from the shared tier");
    }
    return ck::resume(store_, *comm_, opts);
  }();
  if (!found) return found.error().str();
  if (!found->has_value()) {
    if (launch_.rank == 0 && cfg_.verbose) log("no checkpoint in " + cfg_.ckpt_dir + ": starting at step 0");
    return "";
  }
  const ck::Reader& reader = **found;
  const std::string& dir = reader.dir();
  try {
    // Every box this rank holds (its tensor-parallel slice, its stage's parameters, its
    // ZeRO-1 range of the moments), read in place (they stay the tensors the optimizer and
    // the gradient buckets point into) from whichever datasets of whatever layout hold it.
    std::map<std::string, std::vector<const ck::DatasetEntry*>> saved;  // by name without "@k"
    for (const auto& shard : reader.manifest().shards)
      for (const auto& d : shard.datasets)
        if (!d.rank_scoped) saved[ck::base_name(d.name)].push_back(&d);
    std::set<std::string> unused;
    for (const auto& [name, entries] : saved) unused.insert(name);
    auto load = [&](const std::string& name, const at::Tensor& tensor, int64_t t_base, const FlatParam& p, int64_t lo,
                    int64_t hi) -> std::string {
      auto it = saved.find(name);
      if (it == saved.end()) return dir + ": has no " + name + " (a checkpoint of another model?)";
      const auto& shape = it->second.front()->global_shape;
      if (shape != p.global_shape)
        return dir + ": " + name + " has shape " + shape_text(shape) + " but this model's is " +
               shape_text(p.global_shape);
      unused.erase(name);
      for (const Piece& pc : pieces_of(tensor, t_base, p, lo, hi)) {
        // The piece's intersection with every saved box of this name.
        const at::Tensor& dst = pc.local;
        int64_t covered = 0;
        for (const ck::DatasetEntry* d : it->second) {
          std::vector<int64_t> off(pc.offset.size()), ext(pc.offset.size());
          at::Tensor sub = dst;
          bool meets = true;
          for (size_t i = 0; i < off.size() && meets; ++i) {
            off[i] = std::max(pc.offset[i], d->offset[i]);
            ext[i] = std::min(pc.offset[i] + dst.size(static_cast<int64_t>(i)), d->offset[i] + d->extent[i]) - off[i];
            meets = ext[i] > 0;
            if (meets) sub = sub.narrow(static_cast<int64_t>(i), off[i] - pc.offset[i], ext[i]);
          }
          if (!meets) continue;
          if (sub.device().is_cpu() && sub.is_contiguous()) {
            if (auto ok = reader.read_into(d->name, sub, off); !ok) return ok.error().str();
          } else {
            auto box = reader.read_slice(d->name, off, ext);
            if (!box) return box.error().str();
            sub.copy_(*box);
          }
          covered += volume(ext);
        }
        if (covered != dst.numel())
          return dir + ": holds " + std::to_string(covered) + " of the " + std::to_string(dst.numel()) +
                 " elements of " + name + " at " + shape_text(pc.offset) + " extent " + shape_text(dst.sizes()) +
                 " (shards missing from the manifest?)";
      }
      return "";
    };
    const std::string load_error = [&]() -> std::string {
      try {
        at::NoGradGuard no_grad;
        std::map<std::string, const FlatParam*> by_name;
        const bool sharded = t.layout().params_sharded();  // ZeRO-3: this rank's shards of the parameters
        for (const auto& p : t.parameters()) {
          by_name[p.name] = &p;
          if (sharded) continue;
          if (auto e = load("params/" + p.name, p.param, 0, p, 0, p.numel); !e.empty()) return e;
        }
        if (sharded)
          for (const auto& s : t.layout().param_shards()) {
            const FlatParam& p = t.parameters()[s.param];
            if (auto e = load("params/" + p.name, s.tensor, s.offset, p, s.offset, s.offset + s.tensor.numel()); !e.empty())
              return e;
          }
        for (const auto& s : t.optimizer().named_state()) {
          const FlatParam& p = *by_name.at(s.param);
          if (auto e = load("optim/" + s.param + "/" + s.kind, s.tensor, s.offset, p, s.offset,
                            s.offset + s.tensor.numel());
              !e.empty())
            return e;
        }
        return "";
      } catch (const std::exception& e) {
        return dir + ": " + e.what();
      }
    }();
    // A name no rank loaded is not part of this model. One rank cannot tell: with pipeline
    // stages it holds only its stage's parameters, under ZeRO-1 only its range of the
    // moments. So every rank reaches this collective (errors included) and rank 0 takes the
    // names that all ranks left unused.
    std::string names;
    if (!load_error.empty()) names = "\x01";   // this rank failed: no verdict on names
    else
      for (const std::string& name : unused) names += name + "\n";
    std::string extra;
    const std::vector<std::string> all = comm_->gather(names);
    if (comm_->rank() == 0 && std::none_of(all.begin(), all.end(), [](const std::string& n) { return n == "\x01"; })) {
      std::set<std::string> left = unused;
      for (const std::string& other : all) {
        std::set<std::string> theirs;
        for (size_t at = 0, eol; at < other.size(); at = eol + 1) {
          eol = other.find('\n', at);
          theirs.insert(other.substr(at, eol - at));
        }
        std::set<std::string> both;
        std::set_intersection(left.begin(), left.end(), theirs.begin(), theirs.end(), std::inserter(both, both.end()));
        left.swap(both);
      }
      if (!left.empty())
        extra = dir + ": holds " + *left.begin() + ", which this model does not have (a checkpoint of another model?)";
    }
    extra = comm_->broadcast(extra);
    if (!load_error.empty()) return load_error;
    if (!extra.empty()) return extra;

    // Rank-local state: this rank's RNG when the writer had this rank, else rank 0's.
    const int writer = launch_.rank < reader.manifest().world_size ? launch_.rank : 0;
    auto rng = reader.read_rank_state(writer, "state/rng/cpu");
    if (!rng) return rng.error().str();
    t.set_rng_state(*rng);
    if (auto e = load_compress_state(t, reader); !e.empty()) return e;

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
  if (tier == "local") last_committed_ = -1, last_local_ = t.state().step;  // the shared tier lacks it
  resumed_ = true;
  if (goodput_) goodput_->restored(restore_t0, wall_now(), t.state().step, tier);
  if (launch_.rank == 0)
    log("resumed from " + ck::step_dir_name(t.state().step) + " (restart #" + std::to_string(t.state().restarts) +
        ", written by " + std::to_string(reader.manifest().world_size) + " rank(s), now " +
        std::to_string(launch_.world) + ")");
  // The schedule is a function of the step and its horizon: a different rate for the saved
  // step means the options changed (e.g. --steps without --lr-decay-steps). Say so once.
  const double now = lr_at(cfg_, t.state().step - 1);
  if (launch_.rank == 0 && t.state().step > 0 && now != t.state().lr) {
    char line[320];
    std::snprintf(line, sizeof line,
                  "note: the learning-rate schedule changed since this checkpoint: step %lld ran at lr %.6g, the "
                  "schedule now gives %.6g (--lr-decay-steps or --lr-decay-tokens keeps it across --steps changes)",
                  static_cast<long long>(t.state().step), t.state().lr, now);
    log(line);
  }
  return "";
}

void Checkpointing::before_update(const at::Tensor& live) {
  saver_->wait_snapshot(live);
  if (staging_) staging_->fence(live);
}

ck::Snapshot Checkpointing::snapshot(Trainer& t, bool copy, StagedBuffers* staged, bool whole_rank) const {
  const TrainState& st = t.state();
  ck::Snapshot snap(st.step, copy);
  const ProcessGrid& g = t.grid();
  // Elements [lo, hi) of p's local piece (held by `t` from flat index t_base on) are held
  // identically by `members` ranks: each writes its share of the rows, so they write in
  // parallel and every element once. A share that is several boxes of the global tensor
  // (a slice of the fused q|k|v, a ZeRO-1 range) writes box k > 0 as NAME@k.
  auto add = [&](const std::string& name, const at::Tensor& tensor, int64_t t_base, const FlatParam& p, int64_t lo,
                 int64_t hi, bool sharded) {
    if (tied_copy(g, p.name) && !whole_rank) return;
    auto [member, members] = replica(g, !p.slice.whole(), sharded);
    if (whole_rank) member = 0, members = 1;   // the local tier: the shard alone resumes this rank
    const int64_t inner = p.param.dim() == 0 ? 1 : volume(p.param.sizes().slice(1));
    const int64_t n_rows = p.param.dim() == 0 ? 1 : p.param.size(0);
    auto [r0, r1] = rows(n_rows, member, members);
    const auto pieces = pieces_of(tensor, t_base, p, std::max(lo, r0 * inner), std::min(hi, r1 * inner));
    for (size_t k = 0; k < pieces.size(); ++k)
      snap.add_slice(k == 0 ? name : name + "@" + std::to_string(k),
                     staged ? staged->host_view(pieces[k].local) : pieces[k].local, p.global_shape, pieces[k].offset);
  };
  std::map<std::string, const FlatParam*> by_name;
  const bool sharded = t.layout().params_sharded();
  for (const auto& p : t.parameters()) {
    by_name[p.name] = &p;
    if (!sharded) add("params/" + p.name, p.param, 0, p, 0, p.numel, false);
  }
  // ZeRO-3: each rank writes its shard of every parameter, by global name and offset, as
  // ZeRO-1 writes its range of the moments.
  if (sharded)
    for (const auto& s : t.layout().param_shards()) {
      const FlatParam& p = t.parameters()[s.param];
      add("params/" + p.name, s.tensor, s.offset, p, s.offset, s.offset + s.tensor.numel(), true);
    }
  for (const auto& s : t.optimizer().named_state()) {
    const FlatParam& p = *by_name.at(s.param);
    add("optim/" + s.param + "/" + s.kind, s.tensor, s.offset, p, s.offset, s.offset + s.tensor.numel(), cfg_.zero > 0);
  }
  snap.add_rank_state("state/rng/cpu", t.rng_state());
  // Top-k compression: this rank's residual (and velocity), what it has not sent yet.
  if (TopKCompressor* c = t.compressor()) {
    snap.add_rank_state("compress/residual", c->flat_state("residual"));  // a fresh copy
    if (c->momentum_correction()) snap.add_rank_state("compress/velocity", c->flat_state("velocity"));
    snap.set_scalar("compress", "dp", static_cast<int64_t>(g.dp));
  }
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
  clock_->started(t0);
  if (staging_) staging_->start(t.state().step);  // GPU: through the pinned mirrors too
  ck::Snapshot snap = snapshot(t, false, staging_.get());
  if (staging_) staging_->wait_all();
  auto r = saver_->save(snap);
  const double took = now_s() - t0;
  handle(r, must_commit);
  // Sync: the training thread waited for all of it.
  committed(ck::SaveCost{took, 0, 0, false}, !must_commit && t.state().step < cfg_.steps);
}

void Checkpointing::save_local(Trainer& t) {
  const double t0 = now_s();
  auto r = local_->save(snapshot(t, false, nullptr, true));
  const double took = now_s() - t0;
  local_clock_->saved(now_s(), took);
  if (!r) {
    // The shared tier stays the durable copy: a failed local save is logged, never fatal.
    if (launch_.rank == 0) log("local save failed: " + r.error().str() + "; training continues");
    return;
  }
  last_local_ = r->step;
  if (launch_.rank == 0) {
    char line[256];
    std::snprintf(line, sizeof line, "local %s committed: %.2f MB in this rank's shard, written in %.3f s, %.3f s with the partner copy",
                  ck::step_dir_name(r->step).c_str(), static_cast<double>(r->bytes) / 1e6, r->write_seconds, took);
    log(line);
    const std::string why = local_clock_->explain(ck::SaveCost{took, 0, 0, false}, cost_.baseline_step());
    if (!why.empty()) log("local tier: " + why);
  }
}

void Checkpointing::committed(const ck::SaveCost& cost, bool log_interval) {
  clock_->committed(now_s(), cost.total());
  if (log_interval && launch_.rank == 0) {
    const std::string line = clock_->explain(cost, cost_.baseline_step());
    if (!line.empty()) log(line);
  }
}

void Checkpointing::after_step(Trainer& t, bool stopping) {
  // The step's own time (from the end of the previous after_step): with a save in flight it
  // tells the I/O contention, without one the baseline (SaveCostMeter).
  if (step_end_ >= 0) cost_.step(now_s() - step_end_, saver_->pending());
  const double t_hook = wall_now();
  after_step_inner(t, stopping);
  step_end_ = now_s();
  if (goodput_) {
    const bool end = stopping || t.state().step >= cfg_.steps;
    goodput_->step(t.state().step, t.state().step_seconds, t_hook, wall_now());
    if (end) goodput_->ended(stopping ? "stopped" : "finished");
    write_goodput(end);
  }
  // Test hook: SCALEGUARD_TEST_HANG_AFTER_STEP=STEP: every rank stops here after that step
  // (its saves and goodput record done), so a test can kill ranks at a known point.
  if (const char* h = std::getenv("SCALEGUARD_TEST_HANG_AFTER_STEP"); h && std::atoll(h) == t.state().step) {
    std::fprintf(stderr, "scaleguard-run: rank %d: test hang after step %lld (pid %d)\n", launch_.rank,
                 static_cast<long long>(t.state().step), static_cast<int>(::getpid()));
    for (;;) ::sleep(60);
  }
}

void Checkpointing::after_step_inner(Trainer& t, bool stopping) {
  const int64_t step = t.state().step;
  const bool last = step >= cfg_.steps;
  // Waits for the async save in flight (if any) and passes its outcome and cost on; the
  // time waited is the training thread's stall.
  auto finish_pending = [&](bool must_commit, bool log_interval) {
    const double t0 = now_s();
    if (auto r = saver_->finish()) {
      cost_.stall(now_s() - t0);
      handle(*r, must_commit);
      committed(cost_.take(), log_interval);
    }
  };
  // An async save in flight commits once every rank's write is done (collective; pending
  // is the same on every rank).
  if (saver_->pending()) {
    const double t0 = now_s();
    auto r = saver_->poll();
    cost_.stall(now_s() - t0);
    if (r) {
      handle(*r, false);
      committed(cost_.take(), !stopping && !last);
    }
  }
  bool due = clock_->due(step, now_s());
  if (clock_->time_based()) due = ck::agree_due(*comm_, due);  // ranks' clocks differ
  // The local tier (synchronous): due by its own clock; not at the stop or the end, which go
  // to the shared tier.
  if (local_ && !stopping && !last && last_local_ != step) {
    bool local_due = local_clock_->due(step, now_s());
    if (local_clock_->time_based()) local_due = ck::agree_due(*comm_, local_due);
    if (local_due) save_local(t);
  }
  if (stopping || last) {
    // Stop or end: everything on disk before returning (exit 85 only after the commit).
    finish_pending(stopping, false);
    if (last_committed_ != step) save_now(t, stopping);
    return;
  }
  if (!due || last_committed_ == step) return;
  if (!cfg_.ckpt_async) {
    save_now(t, false);
    return;
  }
  finish_pending(false, true);  // the next save waits for the previous (a fixed interval)
  const double started = now_s();
  clock_->started(started);
  // On a GPU (or staged): what the training thread spent handing the save over, the stall
  // the pinned staging removes (scripts/gpu-check.sh compares it with and without). Always:
  // that time is part of the save's cost for `auto`.
  const bool report = staging_ || t.parameters().front().param.is_cuda();
  struct HandOver {
    bool on;
    double t0;
    Checkpointing* self;
    int64_t step;
    ~HandOver() {
      const double took = now_s() - t0;
      self->cost_.stall(took);
      if (on && self->launch_.rank == 0) {
        char line[160];
        std::snprintf(line, sizeof line, "async snapshot of step %lld handed to the writer in %.3f ms",
                      static_cast<long long>(step), took * 1e3);
        self->log(line);
      }
    }
  } hand_over{report, started, this, step};
  // The host copy goes on beside the next forward/backward; before_update() makes the
  // optimizer wait for each tensor's copy, and the write goes on in the background.
  if (!staging_) {
    saver_->start(snapshot(t, false));
    return;
  }
  // GPU: the copies go on the side stream now; the writer thread waits for them.
  staging_->start(step);
  ck::Snapshot snap = snapshot(t, false, staging_.get());
  snap.set_staged([s = staging_.get()] { s->wait_all(); });
  saver_->start(std::move(snap));
}

}  // namespace scaleguard::run
