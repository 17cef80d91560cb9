// The checkpoint root directory: what is there, which checkpoint to resume from, clean-up.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ckpt/commit_comm.h"
#include "ckpt/reader.h"
#include "ckpt/saver.h"

namespace scaleguard::ckpt {

class Store {
 public:
  Store(std::string root, Log log);
  const std::string& root() const { return root_; }
  Result<std::vector<Listed>> list() const;
  // Removes every step-*.partial directory: saves that never committed. Only while no rank
  // is saving (at start, on rank 0). Returns how many were removed.
  int remove_partials() const;
  // The newest committed checkpoint that opens and verifies. Each rejected one is logged with
  // the file and the reason, then the next older one is tried. nullopt when the root holds
  // no checkpoint; an error when there are some but none is valid, or when one belongs to
  // another model (never skipped silently: it means a wrong --ckpt-dir).
  Result<std::optional<Reader>> open_newest_valid(const OpenOptions& options) const;

 private:
  std::string root_;
  Log log_;
};

// Collective resume: rank 0 removes partial saves and picks the newest valid checkpoint
// (verifying its files once); the other ranks open the same one, checking its manifest and
// shard layout but not re-reading every byte. Same outcome on every rank.
Result<std::optional<Reader>> resume(const Store& store, CommitComm& comm, const OpenOptions& options);

}  // namespace scaleguard::ckpt
