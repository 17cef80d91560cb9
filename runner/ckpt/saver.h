// Saves checkpoints with the commit protocol (docs/checkpoint-format.md):
//   1. every rank writes root/step-N.partial/shard-<rank>.h5 and fsyncs it (write_shard);
//   2. gather: rank 0 learns every rank's outcome and manifest entry (the agreement);
//   3. rank 0, if all succeeded: manifest.json + fsync, fsync the directory, rename to
//      step-N, fsync root, replace `latest` atomically (tmp + fsync + rename + fsync root),
//      drop checkpoints beyond keep_last; if any failed: remove the partial directory;
//   4. broadcast: every rank learns the verdict.
// A crash before the rename leaves only step-N.partial, which readers never open and the
// next start removes (Store::remove_partials).
//
// Asynchronous save: start() hands a Snapshot to a background thread, which first takes host
// copies of referenced tensors (the copy overlaps the next forward/backward; the caller
// calls wait_snapshot(tensor) before changing each tensor, or wait_snapshot() before
// changing any, which copy what is still left beside it) and then writes it (step 1 only,
// no collectives). The host copies are kept after the commit and reused by the next async
// save: memory cost = Snapshot::bytes() for as long as async saves are used. poll(), called by every rank at every step boundary on the
// main thread, does one all_min on "my write is done"; when it is 1 everywhere, step 2 (the
// gather) runs right there and rank 0 starts step 3 (its fsyncs and renames) on a background
// thread; at each later poll rank 0 broadcasts whether that is done, and with it the
// verdict (step 4). All collectives thus stay on the main thread in the same order on every
// rank, interleaved with training's, so nothing can deadlock and no MPI_THREAD_MULTIPLE is
// needed, and no rank's training waits for a disk.
#pragma once
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <map>
#include <string>

#include "ckpt/commit_comm.h"
#include "ckpt/snapshot.h"
#include "scaleguard/ckpt_manifest.h"
#include "scaleguard/result.h"

namespace scaleguard::ckpt {

// What the manifest says about the run (same on every rank).
struct CheckpointMeta {
  std::string strategy = "single";
  int tp = 1, pp = 1, dp = 1;
  std::string model_name;
  std::string config_hash;   // a reader refuses a checkpoint whose hash differs
  std::map<std::string, std::string> model_config;  // Manifest::model_config
  std::string code_version;
};

struct Committed {
  int64_t step = 0;
  std::string dir;            // root/step-N
  uint64_t bytes = 0;         // this rank's shard file
  uint64_t snapshot_bytes = 0;
  double write_seconds = 0;   // this rank's write + fsync + checksum
};

using Log = std::function<void(const std::string&)>;

class Saver {
 public:
  // keep_last <= 0 keeps every checkpoint.
  Saver(std::string root, CheckpointMeta meta, CommitComm& comm, int keep_last, Log log);
  ~Saver();  // waits for a running write; an uncommitted save stays .partial
  Saver(const Saver&) = delete;
  Saver& operator=(const Saver&) = delete;

  // Collective, synchronous. A failure (e.g. disk full) leaves earlier checkpoints intact.
  Result<Committed> save(const Snapshot& snap);

  // Local: allocates and touches the host copies an async save of a snapshot like `like`
  // needs (Snapshot::bytes() of memory, kept for the Saver's life), so that the first async
  // save does not pay for fresh pages (1 GiB: ~2.9 s of page faults on the benchmark VM,
  // longer than a sync save) while training waits. Returns the bytes reserved.
  uint64_t reserve(const Snapshot& like);
  // Local: starts copying (if the snapshot holds references) and writing on a background
  // thread. Call finish() first if pending().
  void start(Snapshot snap);
  // Local: returns once the snapshot's host copies exist (helping the writer thread copy);
  // after it the caller may change the saved tensors. Returns at once when nothing is pending.
  void wait_snapshot();
  // Local, the per-tensor fence: returns once every saved byte inside `live`'s memory is
  // copied (copying those chunks first); after it the caller may change `live`. An optimizer
  // that calls it before updating each tensor overlaps the rest of the copy with its update.
  void wait_snapshot(const at::Tensor& live);
  bool pending() const { return pending_; }
  // Collective while pending (every rank calls it at the same step boundaries): the outcome
  // once every rank's write and rank 0's commit have finished (at the earliest one poll
  // after the writes), nullopt before that or when nothing is pending.
  std::optional<Result<Committed>> poll();
  // Collective while pending: waits for the write and the commit, returns the outcome.
  std::optional<Result<Committed>> finish();

 private:
  struct Written {
    Result<std::optional<ShardEntry>> shard;   // nullopt: this rank had nothing to save
    double seconds;
    uint64_t snapshot_bytes;
  };
  Written write(const Snapshot& snap) const;
  Result<Committed> commit(int64_t step, const Written& w);
  // This rank's manifest entry, "none", or the error, for rank 0's commit.
  std::string shard_outcome(int64_t step, const Written& w) const;
  // The pending write's outcome, gathered to rank 0 (collective); frees the snapshot.
  std::vector<std::string> gather_written();
  Result<Committed> outcome(int64_t step, const Written& w, const std::string& verdict) const;
  std::string commit_on_root(int64_t step, const std::vector<std::string>& outcomes);

  std::string root_;
  CheckpointMeta meta_;
  CommitComm& comm_;
  int keep_last_;
  Log log_;
  bool pending_ = false;
  int64_t pending_step_ = 0;
  std::unique_ptr<Snapshot> pending_snapshot_;
  std::vector<at::Tensor> spare_;   // host copies of the last async snapshot, reused
  std::future<Written> pending_write_;
  bool committing_ = false;            // the writes are gathered; rank 0 is committing
  Written written_{std::optional<ShardEntry>{}, 0, 0};   // this rank's write, while committing
  std::future<std::string> root_commit_;   // rank 0: commit_on_root's verdict
};

// fsync of a directory, so a rename or new entry in it survives a crash.
bool fsync_dir(const std::string& dir);

}  // namespace scaleguard::ckpt
