// Checkpoint manifest (manifest.json) and directory layout, without HDF5: read, validate and
// verify a checkpoint from plain C++ (the `scaleguard ckpt` verbs, and the runner before it
// opens any shard). Format and commit protocol: docs/checkpoint-format.md.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "scaleguard/result.h"

namespace scaleguard::ckpt {

inline constexpr int kFormatVersion = 1;
inline constexpr const char* kManifestName = "manifest.json";
inline constexpr const char* kLatestName = "latest";
inline constexpr const char* kPartialSuffix = ".partial";

// One HDF5 dataset: a box [offset, offset+extent) of a global tensor, or (scope "rank") state
// that belongs to the writing rank only, e.g. its RNG bytes.
struct DatasetEntry {
  std::string name;                   // "params/blocks.0.attn.qkv.weight"
  std::string dtype;                  // "float32", see dtype_size()
  bool rank_scoped = false;
  std::vector<int64_t> global_shape;
  std::vector<int64_t> offset;
  std::vector<int64_t> extent;
  uint64_t bytes = 0;                 // product(extent) * dtype_size
  uint64_t xxh3 = 0;                  // of the raw little-endian data
};

struct ShardEntry {
  int rank = 0;
  std::string file;                   // "shard-0.h5", relative to the checkpoint directory
  uint64_t bytes = 0;                 // whole file
  uint64_t xxh3 = 0;                  // whole file
  std::vector<DatasetEntry> datasets;
};

struct Manifest {
  int format_version = kFormatVersion;
  int64_t step = 0;
  std::string created;                // UTC, ISO 8601
  std::string code_version;
  std::string strategy;               // "single", "ddp", ...
  int tp = 1, pp = 1, dp = 1;
  int world_size = 1;
  std::string model_name;
  std::string config_hash;
  // The model's configuration keys (model, n-layer, n-embd, ...) as the run had them:
  // what `scaleguard-run export` writes a config.json from. Optional (model.config):
  // absent in checkpoints written before it existed.
  std::map<std::string, std::string> model_config;
  std::vector<ShardEntry> shards;     // sorted by rank
  // "shared" (the default, absent in the file): one directory holds every shard, and slices
  // of a tensor never overlap. "local" (--ckpt-local-dir): each node's directory holds its
  // ranks' shards and its partners' copies; each shard holds everything its rank needs to
  // resume on the same layout (replicas are not split), so slices in different shards may
  // overlap (within one shard they may not).
  std::string tier = "shared";
  // local tier: partners[r] = the rank on another node whose directory holds a copy of
  // shard r (-1: no copy, e.g. one node). Empty for the shared tier.
  std::vector<int> partners;
};

// Bytes per element of a manifest dtype name, 0 when the name is unknown.
size_t dtype_size(const std::string& dtype);

std::string step_dir_name(int64_t step);                  // "step-00000100"
std::string shard_file_name(int rank);                    // "shard-0.h5"

std::string manifest_to_json(const Manifest& m);
// Parses and validates: every field present and typed, shapes consistent (offset+extent
// within the global shape, bytes = elements * dtype size), one dtype and global shape per
// name, slices of one name not overlapping. `origin` names the file in errors.
Result<Manifest> parse_manifest(const std::string& text, const std::string& origin);
Result<Manifest> read_manifest(const std::string& checkpoint_dir);

// A problem found while verifying: the file it concerns and why.
struct Problem {
  std::string file;
  std::string why;
};
// Every shard file exists, has the recorded size and whole-file XXH3-64 (reads every byte).
std::vector<Problem> verify_files(const std::string& checkpoint_dir, const Manifest& m);

enum class Status { committed, partial, broken };
const char* status_name(Status s);

struct Listed {
  std::string name;                   // directory name, e.g. "step-00000100.partial"
  std::string path;
  int64_t step = 0;
  Status status = Status::broken;
  std::string why;                    // for broken: e.g. "manifest.json missing"
  uint64_t bytes = 0;                 // sum of the directory's regular files
  int64_t mtime = 0;                  // seconds since the epoch
};
// Checkpoint directories under root (step-N and step-N.partial), oldest step first.
// Committed means the manifest parses; its files are not read (see verify_files).
Result<std::vector<Listed>> list_checkpoints(const std::string& root);

// The name stored in root/latest, empty when there is none.
std::string read_latest(const std::string& root);

}  // namespace scaleguard::ckpt
