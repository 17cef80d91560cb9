#include "ckpt/raw_read.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ckpt/chunk_pipeline.h"
#include "scaleguard/checksum.h"

namespace scaleguard::ckpt {
namespace {

constexpr size_t kChunk = kChunkBytes;
constexpr uint64_t kAlign = kDirectAlign;
constexpr uint64_t kEdge = uint64_t{512} << 10;   // first and last chunk of a read (a multiple of kAlign)

// Reads up to `size` bytes at `offset`, at least `need`. "" or why: a short file is an error
// here (the caller knows how many bytes must be there). O_DIRECT reads come back short only
// at the end of the file, where asking again is not allowed (unaligned), so they stop there.
std::string pread_some(int fd, bool direct, char* buf, size_t size, size_t need, uint64_t offset) {
  size_t done = 0;
  while (done < need) {
    const ssize_t n = ::pread(fd, buf + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::strerror(errno);
    done += static_cast<size_t>(n);
    if (n == 0 || (direct && done < need && static_cast<size_t>(n) < size))
      return "the file ends at byte " + std::to_string(offset + done) + " (truncated)";
  }
  return "";
}

}  // namespace

int open_for_raw_reads(const std::string& path, bool page_cache, bool* direct) {
  *direct = false;
  if (!page_cache) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
    // Some file systems refuse O_DIRECT at open, others only at the first read: try one.
    void* probe = fd >= 0 ? std::aligned_alloc(kAlign, kAlign) : nullptr;
    const bool works = probe && ::pread(fd, probe, kAlign, 0) >= 0;
    std::free(probe);
    if (works) {
      *direct = true;
      return fd;
    }
    if (fd >= 0) ::close(fd);
  }
  return ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
}

std::string RawReader::read(int fd, bool direct, uint64_t offset, size_t size, void* dst, uint64_t* xxh3) {
  // The file range read: with O_DIRECT the aligned pages around the bytes wanted.
  const uint64_t base = direct ? offset / kAlign * kAlign : offset;
  const uint64_t end = offset + size;
  const uint64_t read_end = direct ? (end + kAlign - 1) / kAlign * kAlign : end;
  // Chunk boundaries: a short first and last chunk around full ones. The disk idles while
  // the first chunk is read with nothing to hash yet and the last one is hashed with nothing
  // left to read; with 4 MiB there that was a third of a cold 256 MiB load of 16 MiB tensors.
  std::vector<uint64_t> cut{base};
  if (read_end - base > 2 * kEdge) {
    const uint64_t last = read_end - kEdge;
    cut.push_back(base + kEdge);
    while (cut.back() < last) cut.push_back(std::min<uint64_t>(cut.back() + kChunk, last));
  }
  cut.push_back(read_end);
  const size_t chunks = cut.size() - 1;
  auto from = [&](size_t i) { return cut[i]; };  // chunk i's file range
  auto to = [&](size_t i) { return cut[i + 1]; };
  auto lo = [&](size_t i) { return std::max<uint64_t>(from(i), offset); };  // its wanted bytes
  auto hi = [&](size_t i) { return std::min<uint64_t>(to(i), end); };

  Xxh3Stream hash;
  const std::string error = pipeline_.run(
      chunks,
      [&](size_t i, char* buffer) {
        return pread_some(fd, direct, buffer, static_cast<size_t>(to(i) - from(i)), static_cast<size_t>(hi(i) - from(i)),
                          from(i));
      },
      [&](size_t i, char* buffer) {
        const char* wanted = buffer + (lo(i) - from(i));
        const size_t n = static_cast<size_t>(hi(i) - lo(i));
        hash.update(wanted, n);
        std::memcpy(static_cast<char*>(dst) + (lo(i) - offset), wanted, n);
        return std::string();
      },
      /*produce_on_helper=*/true);
  *xxh3 = hash.digest();
  return error;
}

}  // namespace scaleguard::ckpt
