#include "ckpt/raw_write.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "ckpt/chunk_pipeline.h"

namespace scaleguard::ckpt {
namespace {

constexpr size_t kChunk = kChunkBytes;
constexpr uint64_t kAlign = kDirectAlign;

std::string pwrite_all(int fd, const char* buf, size_t size, uint64_t offset) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pwrite(fd, buf + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::strerror(errno);
    if (n == 0) return "the write made no progress";
    done += static_cast<size_t>(n);
  }
  return "";
}

}  // namespace

RawFile::~RawFile() {
  if (direct >= 0) ::close(direct);
  if (buffered >= 0) ::close(buffered);
}

std::string open_for_raw_writes(const std::string& path, RawFile& file) {
  file.buffered = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (file.buffered < 0) return std::strerror(errno);
  // A file system that refuses O_DIRECT (at open, or only at the first write) gets every
  // byte through the page cache. The probe writes the file's first block back unchanged.
  file.direct = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_DIRECT);
  char* probe = file.direct >= 0 ? static_cast<char*>(std::aligned_alloc(kAlign, kAlign)) : nullptr;
  const bool works = probe && ::pread(file.buffered, probe, kAlign, 0) == static_cast<ssize_t>(kAlign) &&
                     ::pwrite(file.direct, probe, kAlign, 0) == static_cast<ssize_t>(kAlign);
  std::free(probe);
  if (!works && file.direct >= 0) {
    ::close(file.direct);
    file.direct = -1;
  }
  return "";
}

std::string RawWriter::write(const RawFile& file, uint64_t offset, size_t size, const void* src,
                             const std::vector<Xxh3Stream*>& hashes) {
  const char* bytes = static_cast<const char*>(src);
  // O_DIRECT for the whole 4 KiB blocks; the rest (the tail, or all of it where O_DIRECT
  // is unavailable or the range is unaligned) through the page cache.
  const size_t direct_len = file.direct >= 0 && offset % kAlign == 0 ? size / kAlign * kAlign : 0;
  const size_t chunks = (direct_len + kChunk - 1) / kChunk;
  auto len = [&](size_t i) { return std::min(kChunk, direct_len - i * kChunk); };

  // The copy into the aligned buffers (and the hashing) on this thread, the writes on a helper.
  const std::string error = pipeline_.run(
      chunks,
      [&](size_t i, char* buffer) {
        std::memcpy(buffer, bytes + i * kChunk, len(i));
        for (Xxh3Stream* h : hashes) h->update(buffer, len(i));
        return std::string();
      },
      [&](size_t i, char* buffer) { return pwrite_all(file.direct, buffer, len(i), offset + i * kChunk); },
      /*produce_on_helper=*/false);
  if (!error.empty()) return error;

  for (Xxh3Stream* h : hashes) h->update(bytes + direct_len, size - direct_len);
  return pwrite_all(file.buffered, bytes + direct_len, size - direct_len, offset + direct_len);
}

std::string hash_range(int fd, uint64_t from, uint64_t to, Xxh3Stream& hash) {
  std::vector<char> buf(std::min<uint64_t>(to - from, uint64_t{1} << 20));
  while (from < to) {
    const ssize_t n = ::pread(fd, buf.data(), std::min<uint64_t>(buf.size(), to - from), static_cast<off_t>(from));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::strerror(errno);
    if (n == 0) return "the file ends at byte " + std::to_string(from);
    hash.update(buf.data(), static_cast<size_t>(n));
    from += static_cast<uint64_t>(n);
  }
  return "";
}

}  // namespace scaleguard::ckpt
