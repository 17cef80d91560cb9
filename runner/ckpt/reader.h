// Opens one committed checkpoint directory, verifies it, and reads tensors back: a whole
// global tensor, or any box of it assembled from the shards that hold its pieces (so a
// checkpoint written by N ranks loads on M ranks), plus each rank's own state and scalars.
#pragma once
#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "scaleguard/ckpt_manifest.h"
#include "scaleguard/result.h"

namespace scaleguard::ckpt {

class RawReader;

// A dataset's tensor name without the "@k" under which a rank saves its extra boxes of it:
// "params/x@2" -> "params/x" (a name not ending in "@digits" is returned unchanged).
std::string base_name(const std::string& dataset);

struct OpenOptions {
  bool verify_files = true;        // whole-file checksums (reads every byte once)
  std::string expect_config_hash;  // non-empty: refuse a checkpoint of another model
  // >= 0: open only this rank's shard (the manifest seen through the reader lists it alone).
  // A local-tier checkpoint (--ckpt-local-dir) is read so: a node's directory holds only some
  // shards, and each shard holds everything its rank needs.
  int only_rank = -1;
};

class Reader {
 public:
  // Parses and validates the manifest, checks the model, optionally verifies the files, and
  // checks that every dataset the manifest lists exists in its shard with that shape and
  // dtype. Errors name the file and the dataset.
  static Result<Reader> open(const std::string& dir, const OpenOptions& options);

  const Manifest& manifest() const { return manifest_; }
  const std::string& dir() const { return dir_; }
  // Names of the global (not rank-scoped) tensors, sorted.
  std::vector<std::string> tensor_names() const;
  // Global shape and dtype of a global tensor; empty dtype when the name is unknown.
  std::vector<int64_t> global_shape(const std::string& name) const;

  Result<at::Tensor> read(const std::string& name) const;
  // The whole global tensor `name` (e.g. "params/wte.weight") assembled from every box of it
  // that any rank saved, under `name` or as a rank's extra box "name@k" (base_name); an
  // error when the boxes do not cover it. What `scaleguard-run export` reads: any layout.
  Result<at::Tensor> read_whole(const std::string& name) const;
  Result<at::Tensor> read_slice(const std::string& name, const std::vector<int64_t>& offset,
                                const std::vector<int64_t>& extent) const;
  // Reads the box at `offset` with dst's shape into dst (contiguous, CPU, the saved dtype):
  // parameters load in place, keeping their identity (and so their optimizer state).
  Result<bool> read_into(const std::string& name, at::Tensor& dst, const std::vector<int64_t>& offset) const;
  // State saved by one rank (add_rank_state), e.g. its RNG bytes.
  Result<at::Tensor> read_rank_state(int rank, const std::string& name) const;
  Result<int64_t> scalar_int(int rank, const std::string& group, const std::string& key) const;
  Result<double> scalar_double(int rank, const std::string& group, const std::string& key) const;

 private:
  struct File;
  Reader() = default;
  Result<const File*> file_of(int rank) const;

  std::string dir_;
  Manifest manifest_;
  std::map<int, std::shared_ptr<File>> files_;
  std::shared_ptr<RawReader> raw_;  // its buffers serve every read: one read at a time
};

}  // namespace scaleguard::ckpt
