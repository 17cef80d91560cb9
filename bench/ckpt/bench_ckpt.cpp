// Checkpoint throughput on one rank, printed as key=value lines for run.sh, which measures
// the dd baselines on the same bytes and disk and prints the ratios.
//   bench_ckpt save DIR MB         synchronous save of MB MiB of float32 (step 1)
//   bench_ckpt load DIR [verify]   read every tensor of step 1 (whole-file checksums first with verify)
//   bench_ckpt async DIR MB        sync saves vs the training-thread time blocked by async saves (medians of 3)
#include <ATen/ATen.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "ckpt/commit_comm.h"
#include "ckpt/reader.h"
#include "ckpt/saver.h"

namespace ck = scaleguard::ckpt;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void quiet(const std::string&) {}

// 16 float32 tensors (like a model's parameters) of MB MiB in all.
std::vector<at::Tensor> model(int64_t mb) {
  std::vector<at::Tensor> ts;
  const int64_t rows = (mb << 20) / 4 / 16 / 1024;
  for (int i = 0; i < 16; ++i) ts.push_back(at::randn({rows, 1024}));
  return ts;
}

ck::Snapshot snapshot(int64_t step, const std::vector<at::Tensor>& ts, bool copy) {
  ck::Snapshot s(step, copy);
  for (size_t i = 0; i < ts.size(); ++i) s.add_whole("params/layer" + std::to_string(i) + ".weight", ts[i]);
  s.set_scalar("state", "step", step);
  return s;
}

ck::CheckpointMeta meta() {
  ck::CheckpointMeta m;
  m.model_name = "bench";
  m.config_hash = "bench";
  m.code_version = "bench";
  return m;
}

int save(ck::CommitComm& comm, const std::string& dir, int64_t mb) {
  auto ts = model(mb);
  ck::Saver saver(dir, meta(), comm, 0, quiet);
  const auto t0 = Clock::now();
  auto r = saver.save(snapshot(1, ts, false));
  const double s = since(t0);
  if (!r) {
    std::fprintf(stderr, "%s\n", r.error().message.c_str());
    return 1;
  }
  std::printf("save_seconds=%.4f\nsave_bytes=%llu\nshard=%s/shard-0.h5\n", s, static_cast<unsigned long long>(r->bytes),
              r->dir.c_str());
  return 0;
}

int load(const std::string& dir, bool verify) {
  // Parameters exist before a resume and load in place, so the destination memory is
  // allocated and touched before the clock starts (as dd's /dev/null needs none).
  auto t0 = Clock::now();
  auto reader = ck::Reader::open(dir + "/step-00000001", {verify, ""});
  if (!reader) {
    std::fprintf(stderr, "%s\n", reader.error().message.c_str());
    return 1;
  }
  double seconds = since(t0);
  // In the model's order, as the trainer loads its parameters (= the order they were saved).
  std::vector<std::pair<std::string, at::Tensor>> params;
  for (const auto& d : reader->manifest().shards.front().datasets)
    if (!d.rank_scoped) params.push_back({d.name, at::zeros(d.global_shape)});
  uint64_t bytes = 0;
  t0 = Clock::now();
  for (auto& [name, t] : params) {
    auto ok = reader->read_into(name, t, std::vector<int64_t>(t.dim(), 0));   // checksummed on the way
    if (!ok) {
      std::fprintf(stderr, "%s\n", ok.error().message.c_str());
      return 1;
    }
    bytes += t.nbytes();
  }
  seconds += since(t0);
  std::printf("%s_seconds=%.4f\nload_bytes=%llu\n", verify ? "verify_load" : "load", seconds,
              static_cast<unsigned long long>(bytes));
  return 0;
}

// One training-like step: compute that only reads the parameters (forward/backward), then
// an update that writes every parameter (the optimizer step).
void compute(at::Tensor& a, at::Tensor& b) {
  for (int i = 0; i < 8; ++i) a = at::tanh(at::mm(a, b));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int async(ck::CommitComm& comm, const std::string& dir, int64_t mb) {
  auto ts = model(mb);
  at::Tensor a = at::randn({256, 256}), b = at::randn({256, 256}) * 0.05;
  ck::Saver saver(dir, meta(), comm, 0, quiet);
  // As the runner does at start-up: the host copies exist before the first async save.
  const auto r0 = Clock::now();
  saver.reserve(snapshot(0, ts, false));
  const double reserve_s = since(r0);

  // Round 0 is the first async save of the process, reported on its own (the saver's I/O
  // buffers and the file system are cold); rounds 1-3 each time a synchronous save (the
  // training thread stalled for all of it) and an asynchronous one: start at step 0, poll
  // at every step boundary, wait for each tensor's copy before its update, run until the
  // commit. Blocked = time the training thread spent inside the saver. Medians of rounds 1-3 are reported (one save is a noisy sample).
  std::vector<double> sync_saves, blocked_times;
  double with_async = 0, first_blocked = 0;
  int committed_at = -1, async_steps = 0;
  for (int round = 0; round < 4; ++round) {
    if (round > 0) {
      const auto t0 = Clock::now();
      if (!saver.save(snapshot(100 + round, ts, false))) return 1;
      sync_saves.push_back(since(t0));
    }
    double blocked = 0;
    committed_at = -1;
    const auto t0 = Clock::now();
    int s = 0;
    for (; committed_at < 0 && s < 100000; ++s) {
      if (s == 0) {
        const auto b0 = Clock::now();
        saver.start(snapshot(200 + round, ts, false));
        blocked += since(b0);
      }
      compute(a, b);
      // The optimizer step, fenced per tensor as the runner's AdamW does per bucket.
      for (auto& t : ts) {
        const auto f0 = Clock::now();
        saver.wait_snapshot(t);
        blocked += since(f0);
        t.add_(1e-3);
      }
      auto b1 = Clock::now();
      auto done = saver.poll();
      blocked += since(b1);
      if (done) {
        if (!*done) return 1;
        committed_at = s;
      }
    }
    if (round > 0) blocked_times.push_back(blocked);
    else first_blocked = blocked;
    with_async = since(t0);
    async_steps = s;
  }
  // The same number of steps without a save, for the slow-down the writer thread causes.
  const auto t0 = Clock::now();
  for (int s = 0; s < async_steps; ++s) {
    compute(a, b);
    for (auto& t : ts) t.add_(1e-3);
  }
  const double plain_same = since(t0);
  std::printf("plain_steps_seconds=%.4f\nsync_save_seconds=%.4f\nasync_blocked_seconds=%.4f\n"
              "async_steps_seconds=%.4f\nasync_committed_at_step=%d\nsnapshot_bytes=%llu\n"
              "reserve_seconds=%.4f\nfirst_async_blocked_seconds=%.4f\n",
              plain_same, median(sync_saves), median(blocked_times), with_async, committed_at,
              static_cast<unsigned long long>(snapshot(0, ts, false).bytes()), reserve_s, first_blocked);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rc = 2;
  {
    ck::MpiCommitComm comm(MPI_COMM_WORLD);
    const std::string mode = argc > 2 ? argv[1] : "";
    if (mode == "save" && argc > 3) rc = save(comm, argv[2], std::stoll(argv[3]));
    else if (mode == "load") rc = load(argv[2], argc > 3 && std::string(argv[3]) == "verify");
    else if (mode == "async" && argc > 3) rc = async(comm, argv[2], std::stoll(argv[3]));
    else std::fprintf(stderr, "usage: bench_ckpt save DIR MB | load DIR [verify] | async DIR MB\n");
  }
  MPI_Finalize();
  return rc;
}
