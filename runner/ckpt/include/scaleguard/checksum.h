// XXH3-64 checksums for checkpoints and parameters (libxxhash). Shared by the CLI's
// `scaleguard ckpt verify` and the runner's checkpoint writer so both compute the same value.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "scaleguard/result.h"

namespace scaleguard {

uint64_t xxh3_64(const void* data, size_t size);

// Incremental XXH3-64 over several buffers; equal to xxh3_64 of their concatenation.
class Xxh3Stream {
 public:
  Xxh3Stream();
  ~Xxh3Stream();
  Xxh3Stream(const Xxh3Stream&) = delete;
  Xxh3Stream& operator=(const Xxh3Stream&) = delete;
  void update(const void* data, size_t size);
  uint64_t digest() const;

 private:
  void* state_;  // XXH3_state_t*, kept opaque so callers don't include xxhash.h
};

// XXH3-64 of a whole file, read sequentially; the error names the file and the errno text.
Result<uint64_t> xxh3_file(const std::string& path);

// 16 lower-case hex digits, the form stored in manifests.
std::string hex64(uint64_t value);
std::optional<uint64_t> parse_hex64(const std::string& text);

}  // namespace scaleguard
