// Token files and the distributed sampler.
//
// File format (little endian), written by `scaleguard-run prep`:
//   offset 0  char[8]  magic "SGTOKENS"
//   offset 8  u32      version (1)
//   offset 12 u32      token width in bytes (1 = byte-level, 2 = vocabularies up to 65536)
//   offset 16 u64      token count N
//   offset 24 u64      reserved (0)
//   offset 32          N tokens of `width` bytes
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace scaleguard::run {

constexpr char kTokenMagic[8] = {'S', 'G', 'T', 'O', 'K', 'E', 'N', 'S'};
constexpr uint32_t kTokenVersion = 1;
constexpr size_t kTokenHeaderBytes = 32;

// Byte-level tokens (width 1) of the concatenated inputs. Returns the token count.
// Throws RunError when an input cannot be read or the output cannot be written.
uint64_t prep_tokens(const std::vector<std::string>& inputs, const std::string& output);

// Read-only view of a token file (memory-mapped) or of synthetic tokens.
class Tokens {
 public:
  // Maps and validates `path` (magic, version, width, size == header + N * width,
  // every token < vocab_size). Throws RunError naming the file and the problem.
  static Tokens open(const std::string& path, int64_t vocab_size);
  // `count` uniform random tokens in [0, vocab_size) from `seed` (same on every rank).
  static Tokens synthetic(uint64_t count, int64_t vocab_size, uint64_t seed);
  Tokens(Tokens&& other) noexcept;
  Tokens& operator=(Tokens&&) = delete;
  ~Tokens();

  uint64_t size() const { return count_; }
  uint32_t width() const { return width_; }
  int64_t operator[](uint64_t i) const {
    return width_ == 1 ? bytes_[i] : static_cast<const uint16_t*>(static_cast<const void*>(bytes_))[i];
  }

 private:
  Tokens() = default;
  const uint8_t* bytes_ = nullptr;   // first token
  uint64_t count_ = 0;
  uint32_t width_ = 1;
  void* map_ = nullptr;              // mmap base, or null for synthetic
  size_t map_bytes_ = 0;
  std::vector<uint8_t> owned_;       // synthetic tokens
};

// A sample is the window of T+1 tokens starting at sample_id * T (inputs = first T,
// targets = shifted by one), so a file of N tokens has (N - 1) / T samples.
//
// The training stream is sample_at(0), sample_at(1), ...: position k belongs to epoch
// k / n and maps to a seeded pseudo-random permutation of [0, n) for that epoch, so every
// sample appears exactly once per epoch and the order is a pure function of
// (seed, epoch, position) -- no state to save, and the same on every rank. Step s of a
// global batch B consumes positions [s*B, (s+1)*B); rank r with A micro-batches of m
// samples takes chunk r*A + u of size m for micro-batch u. The union over ranks is the
// global batch whatever the rank count, which makes N-rank data parallel comparable to
// one rank with the same global batch.
class Sampler {
 public:
  Sampler(uint64_t n_samples, uint64_t seed);
  uint64_t n() const { return n_; }
  uint64_t sample_at(uint64_t position) const;
  // Position in the stream of sample j of micro-batch u on `rank` at `step`.
  static uint64_t position(int64_t step, int64_t global_batch, int rank, int64_t accum, int64_t micro, int64_t u,
                           int64_t j) {
    return static_cast<uint64_t>(step * global_batch + (rank * accum + u) * micro + j);
  }

 private:
  uint64_t permute(uint64_t i, uint64_t key) const;
  uint64_t n_;
  uint64_t seed_;
  int half_bits_;  // Feistel halves: the permuted domain is 4^half_bits_ >= n
};

}  // namespace scaleguard::run
