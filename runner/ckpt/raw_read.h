// Reads a byte range of a file into memory and hashes it on the way, without HDF5: the
// reader's fast path for datasets stored contiguously and unconverted (reader.cpp decides).
//
// Why not read straight into the destination tensor: on the benchmark VM the kernel's first
// write into user pages it has not written before costs far more than the read itself
// (256 MiB: ~0.6 s into fresh pre-touched tensors vs ~0.1 s into one reused buffer, warm).
// So the bytes land in a few reused, page-aligned chunk buffers (with O_DIRECT the disk
// writes into them, skipping the page cache copy), a helper thread reads chunk k+1 while this
// thread hashes chunk k and copies it into place. The first and last chunk of a read are
// short (512 KiB), so the disk is busy from the start and little is left to hash after the
// last read. Numbers: BENCHMARKS.md, Checkpoints.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "ckpt/chunk_pipeline.h"

namespace scaleguard::ckpt {

// Opens `path` for RawReader::read: with O_DIRECT (sets *direct) unless `page_cache` (the
// bytes are likely cached, e.g. just checksummed) or the file system refuses it.
// -1 with errno on failure.
int open_for_raw_reads(const std::string& path, bool page_cache, bool* direct);

class RawReader {
 public:
  // Reads bytes [offset, offset + size) of `fd` (`direct`: opened with O_DIRECT) into dst
  // and sets *xxh3 to their XXH3-64. Returns "" or why it failed (the errno text, or where
  // the file ends when it is short). One call at a time per RawReader.
  std::string read(int fd, bool direct, uint64_t offset, size_t size, void* dst, uint64_t* xxh3);

 private:
  ChunkPipeline pipeline_;  // its buffers are kept for every read
};

}  // namespace scaleguard::ckpt
