// The two-stage pipeline behind the raw checkpoint reads and writes: chunk k+1 is read from
// (or written to) the disk while chunk k is hashed and copied, through a few reused,
// page-aligned buffers (reused because the first touch of fresh pages is what costs on the
// benchmark VM; aligned because O_DIRECT needs it).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace scaleguard::ckpt {

constexpr size_t kChunkBytes = size_t{4} << 20;  // one buffer; 1-8 MiB measured within noise
constexpr uint64_t kDirectAlign = 4096;           // O_DIRECT: file offsets, lengths and buffers

class ChunkPipeline {
 public:
  // A stage's work on chunk i in `buffer` (kChunkBytes); "" or why it failed.
  using Stage = std::function<std::string(size_t i, char* buffer)>;

  // Runs produce(i) then consume(i) for chunks i = 0..n-1 in the same buffer, with at most
  // 4 chunks produced and not yet consumed. One stage runs on a helper thread
  // (`produce_on_helper` says which), the other on the caller's, so they overlap. The
  // first failure stops both and is returned. One run at a time per ChunkPipeline; the
  // buffers are allocated by the first and kept.
  std::string run(size_t n, const Stage& produce, const Stage& consume, bool produce_on_helper);

 private:
  struct Free {
    void operator()(char* p) const;
  };
  std::vector<std::unique_ptr<char, Free>> buffers_;
};

}  // namespace scaleguard::ckpt
