// Token files and the distributed sampler.
//
// Formats `--data` reads (`--data-format`, default auto = by the file's first bytes):
//   sg    written by `scaleguard-run prep --format sg` (little endian):
//           offset 0  char[8]  magic "SGTOKENS"
//           offset 8  u32      version (1)
//           offset 12 u32      token width in bytes (1 = byte-level, 2 = vocabularies up to 65536)
//           offset 16 u64      token count N
//           offset 24 u64      reserved (0)
//           offset 32          N tokens of `width` bytes
//   llmc  karpathy/llm.c's data files (dev/data/data_common.py, write_datafile), also written
//         by `prep --format llmc|llmc-u32`: a header of 256 little-endian int32,
//           header[0] magic, header[1] version: 20240520 / 1 = uint16 tokens (GPT-2),
//                                               20240801 / 7 = uint32 tokens (Llama 3),
//           header[2] token count N (the rest 0), then N tokens from byte 1024.
//   u16, u32  a bare array of little-endian uint16/uint32 tokens (nanoGPT's train.bin is
//         u16): no header, so the vocabulary must be stated (--data-vocab).
//
// The file is memory-mapped read-only and MAP_SHARED: the ranks of a node share one copy in
// the page cache and nothing is read up front. Opening validates the header and that the
// size is exactly header + N * width; token values are checked lazily, each time a batch
// reads one (operator[] compares it with the vocabulary: one compare per token the model
// sees), so a corrupt token is an error naming its offset at the step that would use it,
// and a 10 GB file costs no start-up scan on every rank.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace scaleguard::run {

constexpr char kTokenMagic[8] = {'S', 'G', 'T', 'O', 'K', 'E', 'N', 'S'};
constexpr uint32_t kTokenVersion = 1;
constexpr size_t kTokenHeaderBytes = 32;

// llm.c's header: 256 x int32; magic/version pairs from dev/data/data_common.py.
constexpr size_t kLlmcHeaderInts = 256;
constexpr size_t kLlmcHeaderBytes = kLlmcHeaderInts * 4;
constexpr int32_t kLlmcMagicU16 = 20240520, kLlmcVersionU16 = 1;  // "gpt-2"
constexpr int32_t kLlmcMagicU32 = 20240801, kLlmcVersionU32 = 7;  // "llama-3"

// Byte-level tokens of the concatenated inputs, written in `format`: sg (1-byte tokens),
// llmc (llm.c GPT-2 header, uint16 tokens) or llmc-u32 (llm.c Llama-3 header, uint32).
// Returns the token count. Throws RunError when an input cannot be read, the output cannot
// be written or the count does not fit the format (llm.c's header holds an int32).
uint64_t prep_tokens(const std::vector<std::string>& inputs, const std::string& output,
                     const std::string& format = "sg");

// Read-only view of a token file (memory-mapped) or of synthetic tokens.
class Tokens {
 public:
  // Maps and validates `path` in `format` (auto | sg | llmc | u16 | u32): header, version,
  // width, size == header + N * width. `data_vocab` is the vocabulary the file was made with
  // (0 = not stated; required for u16/u32); it must equal the model's `vocab_size`. Tokens
  // are then checked against vocab_size as they are read (operator[]). Throws RunError
  // naming the file and the problem.
  static Tokens open(const std::string& path, int64_t vocab_size, const std::string& format = "auto",
                     int64_t data_vocab = 0);
  // `count` uniform random tokens in [0, vocab_size) from `seed` (same on every rank).
  static Tokens synthetic(uint64_t count, int64_t vocab_size, uint64_t seed);
  Tokens(Tokens&& other) noexcept;
  Tokens& operator=(Tokens&&) = delete;
  ~Tokens();

  uint64_t size() const { return count_; }
  uint32_t width() const { return width_; }
  const std::string& format() const { return format_; }
  // Token i; throws RunError (file, token index, byte offset, value) when it is not below
  // the vocabulary.
  int64_t operator[](uint64_t i) const {
    int64_t v;
    if (width_ == 1) {
      v = bytes_[i];
    } else if (width_ == 2) {
      uint16_t t;
      std::memcpy(&t, bytes_ + 2 * i, 2);
      v = t;
    } else {
      uint32_t t;
      std::memcpy(&t, bytes_ + 4 * i, 4);
      v = t;
    }
    if (v >= vocab_) out_of_vocab(i, v);
    return v;
  }

 private:
  Tokens() = default;
  [[noreturn]] void out_of_vocab(uint64_t i, int64_t v) const;
  const uint8_t* bytes_ = nullptr;   // first token
  uint64_t count_ = 0;
  uint32_t width_ = 1;
  int64_t vocab_ = 0;                // tokens must be below this
  size_t header_bytes_ = 0;          // byte offset of token 0 in the file
  std::string path_;                 // for error messages; empty = synthetic
  std::string format_ = "synthetic";
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
