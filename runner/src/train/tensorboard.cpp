#include "train/tensorboard.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

#include "config/config.h"

namespace scaleguard::run {
namespace {

void varint(std::string& out, uint64_t v) {
  for (; v >= 0x80; v >>= 7) out += static_cast<char>((v & 0x7f) | 0x80);
  out += static_cast<char>(v);
}
void key(std::string& out, int field, int wire_type) { varint(out, static_cast<uint64_t>(field << 3 | wire_type)); }
template <typename T>
void fixed(std::string& out, T v) {  // little-endian, as protobuf's fixed64/fixed32 (x86 and arm64)
  char b[sizeof v];
  std::memcpy(b, &v, sizeof v);
  out.append(b, sizeof v);
}
void bytes(std::string& out, int field, const std::string& v) {
  key(out, field, 2);
  varint(out, v.size());
  out += v;
}

// An Event with wall_time and step; the caller appends file_version or summary.
std::string event_head(int64_t step) {
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::string e;
  key(e, 1, 1), fixed(e, now);                          // wall_time (double)
  key(e, 2, 0), varint(e, static_cast<uint64_t>(step));  // step (int64)
  return e;
}

uint32_t masked(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

}  // namespace

uint32_t crc32c(const void* data, size_t n) {
  static const auto table = [] {
    std::vector<uint32_t> t(256);
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xffffffffu;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

EventWriter::EventWriter(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST)
    throw RunError("cannot create TensorBoard directory '" + dir + "': " + std::strerror(errno));
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  path_ = dir + "/events.out.tfevents." + std::to_string(static_cast<long long>(std::time(nullptr))) + "." + host;
  int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0 && errno == EEXIST) {
    path_ += "." + std::to_string(::getpid());
    fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  }
  if (fd < 0 || !(f_ = ::fdopen(fd, "wb")))
    throw RunError("cannot write TensorBoard event file '" + path_ + "': " + std::strerror(errno));
  std::string e = event_head(0);
  bytes(e, 3, "brain.Event:2");  // file_version
  record(e);
}

EventWriter::~EventWriter() {
  if (f_) std::fclose(f_);
}

void EventWriter::scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values) {
  std::string summary;
  for (const auto& [tag, v] : values) {
    std::string value;
    bytes(value, 1, tag);                                    // tag
    key(value, 2, 5), fixed(value, static_cast<float>(v));  // simple_value (float)
    bytes(summary, 1, value);                                // Summary.value
  }
  std::string e = event_head(step);
  bytes(e, 5, summary);  // summary
  record(e);
}

void EventWriter::record(const std::string& data) {
  std::string r;
  const uint64_t n = data.size();
  fixed(r, n);
  fixed(r, masked(crc32c(&n, sizeof n)));
  r += data;
  fixed(r, masked(crc32c(data.data(), data.size())));
  if (!f_) return;
  if (std::fwrite(r.data(), 1, r.size(), f_) != r.size() || std::fflush(f_) != 0) {
    // Training goes on (rank 0 alone must not fail a step); the file ends at the last whole record.
    std::fprintf(stderr, "scaleguard-run: WARNING: cannot write TensorBoard event file '%s' (%s): no more events\n",
                 path_.c_str(), std::strerror(errno));
    std::fclose(f_);
    f_ = nullptr;
  }
}

}  // namespace scaleguard::run
