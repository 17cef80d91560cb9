// The local checkpoint tier (--ckpt-local-dir): frequent saves to node-local storage, each
// rank's shard also copied into a partner node's local directory, so that losing one node
// (its disk with it) loses no checkpoint. SCR's "partner" scheme (LLNL/scr), on the format
// of docs/checkpoint-format.md ("Local tier").
//
// Save (collective, synchronous; every rank):
//   1. writes DIR/step-N.partial/shard-<rank>.h5 with its whole state (replicas not split:
//      the shard alone resumes the rank) and fsyncs it;
//   2. sends the file to its partner (the rank with the same local index on the next node)
//      and receives the files of the ranks it is the partner of, into the same directory,
//      hashing them on the way (non-blocking point-to-point in 64 MiB chunks);
//   3. gather: rank 0 merges the manifest (tier "local", the partner table) and broadcasts it;
//   4. every rank checks the copies it received against the manifest's size and XXH3-64; the
//      lowest rank of each node writes manifest.json, renames step-N.partial to step-N,
//      updates `latest` and applies retention in its node's directory; the verdict is agreed.
// Restore (collective): every rank reports the local checkpoints its directory holds for
// this layout and which shards; rank 0 picks the newest step newer than the shared tier's
// newest for which every shard is somewhere (its own node, else a partner's copy); ranks
// whose own copy is gone receive it from the holder, which writes it back into their local
// directory; every rank verifies its shard (size, whole-file XXH3-64); any failure tries the
// next older step, then gives the decision to the shared tier.
#pragma once
#include <mpi.h>

#include <optional>
#include <string>
#include <vector>

#include "ckpt/commit_comm.h"
#include "ckpt/saver.h"
#include "ckpt/snapshot.h"

namespace scaleguard::ckpt {

// Rank r's partner: the rank with r's local index (modulo that node's count) on the next
// node (nodes ordered by their lowest rank); -1 on a single node. node_of[r] = r's node.
std::vector<int> partner_table(const std::vector<int>& node_of);

struct LocalRestore {
  int64_t step = 0;
  std::string dir;         // DIR/step-N on this rank's node: open it with only_rank = rank
  int from_partner = 0;    // shards that came from a partner's copy (all ranks)
};

class LocalTier {
 public:
  // Collective (duplicates `world`). dir: this node's local directory. node_of: every
  // rank's node (the same table on every rank). keep_last: committed local checkpoints kept.
  LocalTier(std::string dir, CheckpointMeta meta, MPI_Comm world, std::vector<int> node_of, int keep_last, Log log);
  ~LocalTier();
  LocalTier(const LocalTier&) = delete;
  LocalTier& operator=(const LocalTier&) = delete;

  const std::string& dir() const { return dir_; }
  int partner() const { return partners_[static_cast<size_t>(rank_)]; }
  bool node_leader() const { return leader_; }

  // Local: creates the directory, checks it is writable; the node's leader removes
  // unfinished saves and transfers. "" or the error.
  std::string prepare() const;
  // Collective, synchronous: the save of steps 1-4 above. Committed.write_seconds is this
  // rank's shard write, Committed.bytes its shard's size.
  Result<Committed> save(const Snapshot& snap);
  // Collective: the newest local checkpoint of a step >= newer_than (a tie goes to the local
  // tier: it restores from node-local disks) that every shard can be
  // restored from (own copy or partner copy), its shards moved to where they belong and
  // verified; nullopt when there is none (the caller then resumes from the shared tier).
  // expect: the manifest's layout must equal it (config hash, world size, tp, pp, dp,
  // strategy); another layout resumes from the shared tier, which reshards.
  std::optional<LocalRestore> restore(int64_t newer_than, const CheckpointMeta& expect);

 private:
  struct Flow {   // one file moving from one rank to another
    int src, dst;
    std::string path_src, path_dst;
  };
  // Moves every flow's file (non-blocking, chunked); this rank takes part in the flows that
  // name it. Received files are written and fsynced; their XXH3-64 and size land in
  // got_hash/got_bytes (by dst flow index). "" or this rank's error.
  std::string transfer(const std::vector<Flow>& flows, std::vector<uint64_t>* got_hash,
                       std::vector<uint64_t>* got_bytes);
  std::string commit_node(int64_t step, const std::string& manifest_text);

  std::string dir_;
  CheckpointMeta meta_;
  std::unique_ptr<MpiCommitComm> comm_;
  MPI_Comm p2p_ = MPI_COMM_NULL;
  int rank_ = 0, world_ = 1;
  std::vector<int> node_of_, partners_;
  bool leader_ = false;
  int keep_last_;
  Log log_;
};

}  // namespace scaleguard::ckpt
