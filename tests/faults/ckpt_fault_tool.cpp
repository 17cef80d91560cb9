// Test driver for the checkpoint library under real mpirun ranks. It saves checkpoints of
// tensors whose values are a known function of (name, step), so a reader on any number of
// ranks can check every element bit for bit, and exits with a code the fault scripts check.
//   save --dir D --steps 1,2,3 [--async [--copy-now | --per-tensor]] [--big-mb N (+1001 bytes) [--big-steps 2,3]] [--keep K]
//        [--on-save-error continue|stop]
//   load --dir D --expect-step N [--no-verify (no whole-file checksums)]
//   fence      (the per-tensor fence of an async snapshot, without a writer thread)
//   interval   (checks interval parsing, Daly's formula and agree_due across the ranks)
//   graft --dir D --out O --from NAME --to NAME
//              (one rank: rewrites the newest checkpoint of a one-rank scaleguard-run job into
//              O with dataset FROM also stored as TO, a valid checkpoint holding a name the
//              model lacks; manifest and checksums come from the library, not hand edits)
// Both take [--model-hash H]. Exit: 0 ok, 1 data mismatch, 2 error (message on stderr),
// 3 no checkpoint to load, 4 a save failed and on_save_error=stop.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ckpt/commit_comm.h"
#include "ckpt/interval.h"
#include "ckpt/reader.h"
#include "ckpt/saver.h"
#include "ckpt/store.h"

namespace ck = scaleguard::ckpt;

namespace {

int g_rank = 0;

void log(const std::string& line) { std::fprintf(stderr, "[rank %d] %s\n", g_rank, line.c_str()); }

struct Spec {
  std::string name;
  std::vector<int64_t> shape;
  at::ScalarType dtype;
  int owner;   // -1: split along dim 0 over all ranks; else the rank holding all of it
};

std::vector<Spec> specs(int world, int64_t big_bytes) {
  std::vector<Spec> s = {
      {"params/embed.weight", {10, 6}, at::kFloat, -1},
      {"params/blocks.0.attn.qkv.weight", {7, 3}, at::kDouble, -1},   // 7 rows: uneven split
      {"optim/blocks.0.attn.qkv.weight/exp_avg", {7, 3}, at::kFloat, -1},
      {"optim/blocks.0.attn.qkv.weight/exp_avg_sq", {7, 3}, at::kFloat, -1},
      {"buffers/counts", {3, 2, 2}, at::kLong, -1},
      {"params/head.bias", {5}, at::kBFloat16, world - 1},
      {"params/ln.scale", {4}, at::kHalf, 0},
      {"params/temperature", {}, at::kFloat, 0},
  };
  if (big_bytes > 0) s.push_back({"params/big", {big_bytes}, at::kByte, -1});
  return s;
}

// The value of every element is a function of its global index and the step.
at::Tensor expected(const Spec& s, int64_t step) {
  int64_t n = 1;
  for (auto d : s.shape) n *= d;
  at::Tensor idx = at::arange(n, at::kDouble);
  at::Tensor v = s.dtype == at::kByte ? (idx + static_cast<double>(step)).fmod(251) : at::sin(idx * 0.37) * 3 + step * 0.25;
  if (s.dtype == at::kLong) v = idx * 1000 + step;
  return v.to(s.dtype).reshape(s.shape);
}

// Rows [lo, hi) of dim 0 this rank holds when `world` ranks split a tensor.
std::pair<int64_t, int64_t> rows(int64_t total, int rank, int world) {
  return {total * rank / world, total * (rank + 1) / world};
}

at::Tensor rng_state(int64_t step, int rank) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(step * 1000 + rank));
  at::rand({16}, gen);   // advance it, so the state is not just the seed
  return gen.get_state();
}

ck::Snapshot snapshot(int64_t step, int rank, int world, int64_t big, bool copy, std::vector<at::Tensor>& live) {
  ck::Snapshot snap(step, copy);
  live.clear();
  for (const auto& s : specs(world, big)) {
    at::Tensor full = expected(s, step);
    if (s.owner == -1) {
      auto [lo, hi] = rows(s.shape[0], rank, world);
      if (hi == lo) continue;
      std::vector<int64_t> offset(s.shape.size(), 0);
      offset[0] = lo;
      at::Tensor part = full.narrow(0, lo, hi - lo).contiguous();
      snap.add_slice(s.name, part, s.shape, offset);
      live.push_back(part);
    } else if (s.owner == rank) {
      snap.add_whole(s.name, full);
      live.push_back(full);
    }
  }
  snap.add_rank_state("state/rng/cpu", rng_state(step, rank));
  snap.set_scalar("state", "step", step);
  snap.set_scalar("state", "epoch", step / 3);
  snap.set_scalar("state", "sampler_position", step * 128 + rank);
  snap.set_scalar("state", "restart_count", int64_t{0});
  snap.set_scalar("state", "lr", 0.001 * static_cast<double>(step));
  snap.set_scalar("optim/blocks.0.attn.qkv.weight", "step", step);
  return snap;
}

std::string arg(int argc, char** argv, const std::string& key, const std::string& def) {
  for (int i = 2; i + 1 < argc; ++i)
    if (argv[i] == key) return argv[i + 1];
  return def;
}
bool flag(int argc, char** argv, const std::string& key) {
  for (int i = 2; i < argc; ++i)
    if (argv[i] == key) return true;
  return false;
}

std::vector<int64_t> numbers(const std::string& list) {
  std::vector<int64_t> out;
  for (size_t at = 0; at < list.size();) {
    size_t end = list.find(',', at);
    if (end == std::string::npos) end = list.size();
    out.push_back(std::stoll(list.substr(at, end - at)));
    at = end + 1;
  }
  return out;
}

int save(int argc, char** argv, ck::CommitComm& comm) {
  const std::string dir = arg(argc, argv, "--dir", "");
  const bool async = flag(argc, argv, "--async");
  // --copy-now: the snapshot copies on the main thread; default: on the writer thread.
  const bool copy_now = flag(argc, argv, "--copy-now");
  // --per-tensor: wait for each live tensor's copy just before changing it (the optimizer's
  // fence) instead of for the whole snapshot.
  const bool per_tensor = flag(argc, argv, "--per-tensor");
  const int64_t big_mb = std::stoll(arg(argc, argv, "--big-mb", "0"));
  // N MiB + 1001 bytes: no rank's share is a multiple of 4 KiB, so the shard writer's raw
  // path writes whole blocks with O_DIRECT and a tail through the page cache.
  const int64_t big = big_mb > 0 ? (big_mb << 20) + 1001 : 0;
  auto on_error = ck::parse_on_save_error(arg(argc, argv, "--on-save-error", "stop"));
  if (!on_error) {
    log(on_error.error().message);
    return 2;
  }
  ck::CheckpointMeta meta;
  meta.strategy = comm.size() > 1 ? "ddp" : "single";
  meta.dp = comm.size();
  meta.model_name = "fault-test";
  meta.config_hash = arg(argc, argv, "--model-hash", "model-A");
  meta.code_version = "test";
  ck::Saver saver(dir, meta, comm, std::stoi(arg(argc, argv, "--keep", "0")), log);
  ck::Store store(dir, log);
  if (comm.rank() == 0) store.remove_partials();
  comm.all_min(1);   // nobody writes before the clean-up is done

  const std::vector<int64_t> steps = numbers(arg(argc, argv, "--steps", "1"));
  // The extra "params/big" tensor (to fill a disk) goes into these steps, default all.
  const std::vector<int64_t> big_steps = numbers(arg(argc, argv, "--big-steps", arg(argc, argv, "--steps", "1")));
  auto handle = [&](const scaleguard::Result<ck::Committed>& r, int64_t step) {
    if (r) {
      log("saved step " + std::to_string(step) + ": " + std::to_string(r->bytes) + " bytes in shard, snapshot " +
          std::to_string(r->snapshot_bytes) + " bytes");
      return 0;
    }
    log("SAVE FAILED step " + std::to_string(step) + ": " + r.error().message);
    return *on_error == ck::OnSaveError::stop ? 4 : 0;
  };
  std::vector<at::Tensor> live;
  for (int64_t step : steps) {
    const bool with_big = std::find(big_steps.begin(), big_steps.end(), step) != big_steps.end();
    ck::Snapshot snap = snapshot(step, comm.rank(), comm.size(), with_big ? big : 0, async && copy_now, live);
    if (!async) {
      if (int rc = handle(saver.save(snap), step)) return rc;
      continue;
    }
    if (auto done = saver.finish()) {
      if (int rc = handle(*done, step)) return rc;
    }
    saver.start(std::move(snap));
    // "Training" goes on: once the copy exists the live tensors change; the snapshot must not.
    if (!per_tensor) saver.wait_snapshot();
    // Per tensor in reverse: the first tensor changed is the one the writer thread copies last.
    if (per_tensor) std::reverse(live.begin(), live.end());
    for (auto& t : live) {
      if (per_tensor) saver.wait_snapshot(t);
      t.add_(1);
    }
    for (int i = 0; i < 3; ++i) {
      if (auto done = saver.poll()) {
        if (int rc = handle(*done, step)) return rc;
      }
    }
  }
  if (auto done = saver.finish()) {
    if (int rc = handle(*done, steps.back())) return rc;
  }
  return 0;
}

int load(int argc, char** argv, ck::CommitComm& comm) {
  const std::string dir = arg(argc, argv, "--dir", "");
  const int64_t expect_step = std::stoll(arg(argc, argv, "--expect-step", "-1"));
  ck::Store store(dir, log);
  ck::OpenOptions opts;
  opts.expect_config_hash = arg(argc, argv, "--model-hash", "model-A");
  opts.verify_files = !flag(argc, argv, "--no-verify");   // only the per-dataset checksums
  auto resumed = ck::resume(store, comm, opts);
  if (!resumed) {
    log("ERROR " + resumed.error().message);
    return 2;
  }
  if (!resumed->has_value()) {
    log("no checkpoint in " + dir);
    return 3;
  }
  const ck::Reader& reader = **resumed;
  const auto& m = reader.manifest();
  int bad = 0;
  auto check = [&](const std::string& what, const at::Tensor& got, const at::Tensor& want) {
    if (got.scalar_type() != want.scalar_type() || got.sizes() != want.sizes() || !at::equal(got, want)) {
      log("MISMATCH " + what);
      ++bad;
    }
  };
  if (m.step != expect_step) {
    log("MISMATCH resumed step " + std::to_string(m.step) + ", expected " + std::to_string(expect_step));
    return 1;
  }
  const int writer_world = m.world_size;
  const int64_t big = [&] {
    auto shape = reader.global_shape("params/big");
    return shape.empty() ? int64_t{0} : shape[0];
  }();
  for (const auto& s : specs(writer_world, big)) {
    const at::Tensor want = expected(s, m.step);
    if (comm.rank() == 0) {   // the whole tensor, assembled from every writer's shard
      auto whole = reader.read(s.name);
      if (!whole) {
        log("ERROR " + whole.error().message);
        return 2;
      }
      check(s.name + " (whole)", *whole, want);
    }
    if (s.shape.empty()) continue;
    // This rank's share for the current world size, read in place into an existing tensor.
    auto [lo, hi] = rows(s.shape[0], comm.rank(), comm.size());
    std::vector<int64_t> offset(s.shape.size(), 0), extent = s.shape;
    offset[0] = lo;
    extent[0] = hi - lo;
    at::Tensor mine = at::zeros(extent, at::TensorOptions().dtype(s.dtype));
    void* before = mine.data_ptr();
    auto ok = reader.read_into(s.name, mine, offset);
    if (!ok) {
      log("ERROR " + ok.error().message);
      return 2;
    }
    check(s.name + " (rows " + std::to_string(lo) + ".." + std::to_string(hi) + ")", mine, want.narrow(0, lo, hi - lo));
    if (mine.data_ptr() != before) {
      log("MISMATCH read_into moved the tensor");
      ++bad;
    }
  }
  for (int r = 0; r < writer_world; ++r) {
    if (r % comm.size() != comm.rank()) continue;
    auto rng = reader.read_rank_state(r, "state/rng/cpu");
    if (!rng) {
      log("ERROR " + rng.error().message);
      return 2;
    }
    check("state/rng/cpu of rank " + std::to_string(r), *rng, rng_state(m.step, r));
    auto pos = reader.scalar_int(r, "state", "sampler_position");
    auto lr = reader.scalar_double(r, "state", "lr");
    auto adam = reader.scalar_int(r, "optim/blocks.0.attn.qkv.weight", "step");
    if (!pos || !lr || !adam || *pos != m.step * 128 + r || *lr != 0.001 * static_cast<double>(m.step) || *adam != m.step) {
      log("MISMATCH scalars of rank " + std::to_string(r));
      ++bad;
    }
  }
  bad = comm.all_min(bad == 0 ? 1 : 0) ? 0 : 1;
  if (bad) return 1;
  if (comm.rank() == 0)
    std::printf("LOADED step %lld on %d rank(s), written by %d rank(s)\n", static_cast<long long>(m.step), comm.size(),
                writer_world);
  return 0;
}

// Interval rules with hand-computed numbers; agree_due with only the last rank due.
int interval(ck::CommitComm& comm) {
  int bad = 0;
  auto expect = [&](bool ok, const std::string& what) {
    if (!ok) {
      log("MISMATCH " + what);
      ++bad;
    }
  };
  auto steps = ck::parse_interval("500");
  expect(steps && steps->kind == ck::IntervalSpec::Kind::steps && steps->steps == 500, "500 -> every 500 steps");
  auto minutes = ck::parse_interval("7.5min");
  expect(minutes && minutes->kind == ck::IntervalSpec::Kind::minutes && minutes->minutes == 7.5, "7.5min");
  expect(ck::parse_interval("auto") && ck::parse_interval("auto")->kind == ck::IntervalSpec::Kind::automatic, "auto");
  for (const char* badtext : {"", "-3", "0", "2.5", "10h", "abc"}) {
    auto r = ck::parse_interval(badtext);
    expect(!r && r.error().hint.find("auto") != std::string::npos, std::string("'") + badtext + "' rejected with a hint");
  }
  expect(!ck::parse_on_save_error("ignore") && ck::parse_on_save_error("continue") && ck::parse_on_save_error("stop"),
         "on_save_error values");
  // C = 60 s, M = 24 h: sqrt(2*60*86400) = 3219.94; r = 60/172800; Daly adds
  // (1 + sqrt(r)/3 + r/9) and subtracts C: 3219.94 * 1.00625 - 60 = 3180.06.
  const double daly = ck::daly_interval_seconds(60, 86400);
  expect(daly > 3179.9 && daly < 3180.1, "Daly(60 s, 24 h) = 3180 s, got " + std::to_string(daly));
  expect(ck::daly_interval_seconds(100, 40) == 40, "C >= 2M gives M");
  ck::IntervalClock every(*steps, 0, 0);
  expect(!every.due(499, 0) && every.due(500, 0) && every.due(1000, 0), "every 500 steps");
  ck::IntervalClock aut(ck::IntervalSpec{ck::IntervalSpec::Kind::automatic, 0, 0}, 24, 0);
  expect(aut.due(1, 0), "auto saves first to measure");
  aut.saved(100, 60);
  expect(!aut.due(2, 100 + 3000) && aut.due(3, 100 + 3181), "auto waits Daly's interval after a 60 s save");
  const bool agreed = ck::agree_due(comm, comm.rank() == comm.size() - 1);
  expect(agreed, "agree_due: one due rank makes every rank save");
  expect(!ck::agree_due(comm, false), "agree_due: nobody due");
  if (bad == 0 && comm.rank() == 0) std::printf("INTERVAL OK\n");
  return bad ? 1 : 0;
}

// A runner checkpoint (its scalars are the ones scaleguard-run writes) plus one extra dataset.
int graft(int argc, char** argv, ck::CommitComm& comm) {
  if (comm.size() != 1) {
    log("graft runs on one rank");
    return 2;
  }
  const std::string dir = arg(argc, argv, "--dir", ""), out = arg(argc, argv, "--out", "");
  const std::string from = arg(argc, argv, "--from", ""), to = arg(argc, argv, "--to", "");
  ck::Store store(dir, log);
  ck::OpenOptions opts;
  auto found = ck::resume(store, comm, opts);
  if (!found || !found->has_value()) {
    log("ERROR no checkpoint to graft in " + dir + (found ? "" : ": " + found.error().message));
    return 2;
  }
  const ck::Reader& reader = **found;
  const auto& m = reader.manifest();
  if (m.world_size != 1) {
    log("graft needs a checkpoint written by one rank");
    return 2;
  }
  ck::Snapshot snap(m.step, false);
  std::vector<std::string> names = reader.tensor_names();
  names.push_back(to);
  for (const auto& name : names) {
    auto t = reader.read(name == to ? from : name);
    if (!t) {
      log("ERROR " + t.error().message);
      return 2;
    }
    snap.add_whole(name, *t);
  }
  auto rng = reader.read_rank_state(0, "state/rng/cpu");
  auto lr = reader.scalar_double(0, "state", "lr");
  if (!rng || !lr) {
    log("ERROR no RNG state or lr in " + reader.dir());
    return 2;
  }
  snap.add_rank_state("state/rng/cpu", *rng);
  snap.set_scalar("state", "lr", *lr);
  const std::pair<const char*, const char*> ints[] = {{"state", "step"},         {"state", "epoch"},
                                                      {"state", "sampler_position"}, {"state", "restart_count"},
                                                      {"state", "global_batch"}, {"optim", "step"}};
  for (const auto& [group, key] : ints) {
    auto v = reader.scalar_int(0, group, key);
    if (!v) {
      log("ERROR " + v.error().message);
      return 2;
    }
    snap.set_scalar(group, key, *v);
  }
  ck::CheckpointMeta meta;
  meta.strategy = m.strategy;
  meta.tp = m.tp;
  meta.pp = m.pp;
  meta.dp = m.dp;
  meta.model_name = m.model_name;
  meta.config_hash = m.config_hash;
  meta.code_version = m.code_version;
  ck::Saver saver(out, meta, comm, 0, log);
  auto saved = saver.save(snap);
  if (!saved) {
    log("ERROR " + saved.error().message);
    return 2;
  }
  std::printf("GRAFTED %s as %s into %s\n", from.c_str(), to.c_str(), saved->dir.c_str());
  return 0;
}

}  // namespace

// The per-tensor fence without a writer thread, so nothing races: copy_overlapping() on
// each live tensor (in reverse, one chunk-straddling big tensor included) before changing
// it, then copy() of whatever is left must still give the values at the snapshot.
int fence(int rank, int world) {
  const int64_t big = (int64_t{9} << 20) + 1001;
  std::vector<at::Tensor> live;
  ck::Snapshot snap = snapshot(1, rank, world, big, false, live);
  std::vector<at::Tensor> none;
  snap.plan_copies(none);
  std::reverse(live.begin(), live.end());
  for (auto& t : live) {
    snap.copy_overlapping(t.data_ptr(), t.nbytes());
    t.add_(1);
  }
  snap.copy();
  snap.adopt_copies();
  int bad = 0;
  for (const auto& t : snap.tensors()) {
    if (t.rank_scoped) continue;
    for (const auto& s : specs(world, big)) {
      if (s.name != t.name) continue;
      at::Tensor want = expected(s, 1);
      if (want.dim() > 0) want = want.narrow(0, t.offset[0], t.data.size(0));
      if (!at::equal(t.data, want)) {
        log("MISMATCH after the fence: " + t.name);
        ++bad;
      }
    }
  }
  return bad ? 1 : 0;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  int rc = 2;
  {
    ck::MpiCommitComm comm(MPI_COMM_WORLD);
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "save") rc = save(argc, argv, comm);
    else if (mode == "load") rc = load(argc, argv, comm);
    else if (mode == "interval") rc = interval(comm);
    else if (mode == "fence") rc = fence(comm.rank(), comm.size());
    else if (mode == "graft") rc = graft(argc, argv, comm);
    else log("usage: ckpt_fault_tool save|load|interval|fence|graft ...");
    // Every rank leaves with the worst code, so mpirun's exit status is meaningful.
    rc = -comm.all_min(-rc);
  }
  MPI_Finalize();
  return rc;
}
