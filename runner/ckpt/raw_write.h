// Writes a byte range of a file from memory without HDF5 and hashes it on the way: the
// shard writer's fast path for large datasets, whose space HDF5 allocated (contiguous,
// 4 KiB-aligned) but did not write (shard_writer.cpp decides).
//
// Why: buffered writes into fresh page-cache pages cost ~3x the disk write on the benchmark
// VM (512 MiB: ~1.5 s of write(2) before a 0.25 s fsync, vs ~0.5 s with O_DIRECT). So the
// bytes are copied into a few reused, page-aligned chunk buffers while a helper thread
// writes the previous chunk with O_DIRECT; the unaligned tail goes through the page cache.
// Numbers: BENCHMARKS.md, Checkpoints.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/chunk_pipeline.h"
#include "scaleguard/checksum.h"

namespace scaleguard::ckpt {

// The two descriptors of one file: `direct` opened with O_DIRECT (-1 where the file system
// refuses it), `buffered` through the page cache (also used for reads).
struct RawFile {
  int direct = -1;
  int buffered = -1;
  ~RawFile();
};

// Opens an existing file for RawWriter::write. "" or the errno text.
std::string open_for_raw_writes(const std::string& path, RawFile& file);

class RawWriter {
 public:
  // Writes `size` bytes of src at `offset` and feeds them, in order, to every hash in
  // `hashes`. Returns "" or the errno text of the failed write (e.g. ENOSPC).
  std::string write(const RawFile& file, uint64_t offset, size_t size, const void* src,
                    const std::vector<Xxh3Stream*>& hashes);

 private:
  ChunkPipeline pipeline_;  // its buffers are kept for every write
};

// Feeds bytes [from, to) of the file (read through the page cache) to `hash`; "" or why.
std::string hash_range(int fd, uint64_t from, uint64_t to, Xxh3Stream& hash);

}  // namespace scaleguard::ckpt
