#include "tokens.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

#include "config.h"

namespace scaleguard::run {
namespace {

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t width;
  uint64_t count;
  uint64_t reserved;
};
static_assert(sizeof(Header) == kTokenHeaderBytes, "token header is 32 bytes");

std::string sys_error() { return std::strerror(errno); }

}  // namespace

uint64_t prep_tokens(const std::vector<std::string>& inputs, const std::string& output) {
  if (inputs.empty()) throw RunError("prep: no --input files");
  std::string tmp = output + ".tmp";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) throw RunError("prep: cannot write '" + tmp + "': " + sys_error());
  Header h{};
  std::memcpy(h.magic, kTokenMagic, sizeof h.magic);
  h.version = kTokenVersion;
  h.width = 1;
  out.write(reinterpret_cast<const char*>(&h), sizeof h);  // count is patched below
  std::vector<char> buf(1 << 20);
  for (const auto& path : inputs) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw RunError("prep: cannot read '" + path + "': " + sys_error());
    while (in) {
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      out.write(buf.data(), in.gcount());
      h.count += static_cast<uint64_t>(in.gcount());
    }
    if (in.bad()) throw RunError("prep: error reading '" + path + "'");
  }
  if (h.count == 0) throw RunError("prep: the inputs are empty");
  out.seekp(0);
  out.write(reinterpret_cast<const char*>(&h), sizeof h);
  out.close();
  if (!out) throw RunError("prep: error writing '" + tmp + "' (disk full?)");
  // Rename last so a reader never sees a half-written file under the final name.
  if (std::rename(tmp.c_str(), output.c_str()) != 0)
    throw RunError("prep: cannot rename '" + tmp + "' to '" + output + "': " + sys_error());
  return h.count;
}

Tokens Tokens::open(const std::string& path, int64_t vocab_size) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw RunError("token file '" + path + "': " + sys_error() + " (create it with `scaleguard-run prep`)");
  struct stat st {};
  fstat(fd, &st);
  size_t bytes = static_cast<size_t>(st.st_size);
  if (bytes < kTokenHeaderBytes) {
    close(fd);
    throw RunError("token file '" + path + "' is truncated: " + std::to_string(bytes) +
                   " bytes, shorter than its 32-byte header");
  }
  void* map = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);  // the mapping keeps the file open
  if (map == MAP_FAILED) throw RunError("token file '" + path + "': mmap: " + sys_error());
  Tokens t;
  t.map_ = map;
  t.map_bytes_ = bytes;  // from here on ~Tokens unmaps, also when a check below throws
  Header h;
  std::memcpy(&h, map, sizeof h);
  if (std::memcmp(h.magic, kTokenMagic, sizeof h.magic) != 0)
    throw RunError("token file '" + path + "' is not a scaleguard token file (bad magic; create it with `scaleguard-run prep`)");
  if (h.version != kTokenVersion)
    throw RunError("token file '" + path + "' has version " + std::to_string(h.version) + ", expected " +
                   std::to_string(kTokenVersion));
  if (h.width != 1 && h.width != 2)
    throw RunError("token file '" + path + "' has token width " + std::to_string(h.width) +
                   " bytes; supported widths are 1 and 2");
  if (h.width == 2 && vocab_size <= 256)
    throw RunError("token file '" + path + "' has 2-byte tokens but vocab-size is " + std::to_string(vocab_size) +
                   "; set --vocab-size to the tokenizer's vocabulary (> 256)");
  // Compare by division: a corrupt count must not overflow the product.
  uint64_t payload = bytes - kTokenHeaderBytes;
  uint64_t expected = kTokenHeaderBytes + h.count * h.width;
  if (h.count > payload / h.width || payload != h.count * h.width)
    throw RunError("token file '" + path + "' is truncated or corrupt: its header says " + std::to_string(h.count) +
                   " tokens of " + std::to_string(h.width) + " bytes (" + std::to_string(expected) +
                   " bytes) but the file has " + std::to_string(bytes) + " bytes");
  t.bytes_ = static_cast<const uint8_t*>(map) + kTokenHeaderBytes;
  t.count_ = h.count;
  t.width_ = h.width;
  if (h.width == 2 || vocab_size < 256)
    for (uint64_t i = 0; i < t.count_; ++i)
      if (t[i] >= vocab_size)
        throw RunError("token file '" + path + "': token " + std::to_string(t[i]) + " at index " + std::to_string(i) +
                       " is outside vocab-size " + std::to_string(vocab_size));
  return t;
}

Tokens Tokens::synthetic(uint64_t count, int64_t vocab_size, uint64_t seed) {
  if (vocab_size > 65536) throw RunError("synthetic tokens support vocab-size up to 65536");
  Tokens t;
  t.width_ = vocab_size <= 256 ? 1 : 2;
  t.owned_.resize(count * t.width_);
  std::mt19937_64 rng(seed);  // mt19937_64's output is fixed by the standard
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t v = rng() % static_cast<uint64_t>(vocab_size);
    if (t.width_ == 1) t.owned_[i] = static_cast<uint8_t>(v);
    else std::memcpy(&t.owned_[2 * i], &v, 2);  // little endian
  }
  t.bytes_ = t.owned_.data();
  t.count_ = count;
  return t;
}

Tokens::Tokens(Tokens&& o) noexcept
    : bytes_(o.bytes_), count_(o.count_), width_(o.width_), map_(o.map_), map_bytes_(o.map_bytes_),
      owned_(std::move(o.owned_)) {
  if (!map_) bytes_ = owned_.data();
  o.map_ = nullptr;
  o.bytes_ = nullptr;
}

Tokens::~Tokens() {
  if (map_) munmap(map_, map_bytes_);
}

Sampler::Sampler(uint64_t n_samples, uint64_t seed) : n_(n_samples), seed_(seed), half_bits_(1) {
  if (n_ == 0) throw RunError("the data has no complete sample: it needs more than seq-len tokens");
  while ((uint64_t{1} << (2 * half_bits_)) < n_) ++half_bits_;
}

// A 4-round Feistel network is a bijection on [0, 4^h); walking the cycle until the value
// falls inside [0, n) restricts it to a bijection on [0, n) (expected < 4 rounds).
uint64_t Sampler::permute(uint64_t i, uint64_t key) const {
  const uint64_t mask = (uint64_t{1} << half_bits_) - 1;
  do {
    uint64_t left = i >> half_bits_, right = i & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      uint64_t in[3] = {right, key, round};
      uint64_t f = XXH3_64bits(in, sizeof in) & mask;
      uint64_t next = left ^ f;
      left = right;
      right = next;
    }
    i = (left << half_bits_) | right;
  } while (i >= n_);
  return i;
}

uint64_t Sampler::sample_at(uint64_t position) const {
  uint64_t epoch = position / n_;
  uint64_t key[2] = {seed_, epoch};
  return permute(position % n_, XXH3_64bits(key, sizeof key));
}

}  // namespace scaleguard::run
