#include "data/tokens.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <tuple>
#include <utility>

#include "config/config.h"

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

uint64_t prep_tokens(const std::vector<std::string>& inputs, const std::string& output, const std::string& format) {
  if (inputs.empty()) throw RunError("prep: no --input files");
  if (format != "sg" && format != "llmc" && format != "llmc-u32")
    throw RunError("prep: unknown --format '" + format + "' (sg | llmc | llmc-u32)");
  const uint32_t width = format == "sg" ? 1 : format == "llmc" ? 2 : 4;
  const size_t header_bytes = format == "sg" ? kTokenHeaderBytes : kLlmcHeaderBytes;
  std::string tmp = output + ".tmp";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) throw RunError("prep: cannot write '" + tmp + "': " + sys_error());
  std::vector<char> header(header_bytes, '\0');
  out.write(header.data(), static_cast<std::streamsize>(header.size()));  // the count is patched below
  std::vector<char> buf(1 << 20);
  std::vector<char> wide;
  uint64_t count = 0;
  for (const auto& path : inputs) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw RunError("prep: cannot read '" + path + "': " + sys_error());
    while (in) {
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      const size_t n = static_cast<size_t>(in.gcount());
      if (width == 1) {
        out.write(buf.data(), static_cast<std::streamsize>(n));
      } else {  // byte b -> little-endian uint16/uint32 b
        wide.assign(n * width, '\0');
        for (size_t i = 0; i < n; ++i) wide[i * width] = buf[i];
        out.write(wide.data(), static_cast<std::streamsize>(wide.size()));
      }
      count += n;
    }
    if (in.bad()) throw RunError("prep: error reading '" + path + "'");
  }
  if (count == 0) throw RunError("prep: the inputs are empty");
  if (format == "sg") {
    Header h{};
    std::memcpy(h.magic, kTokenMagic, sizeof h.magic);
    h.version = kTokenVersion;
    h.width = 1;
    h.count = count;
    std::memcpy(header.data(), &h, sizeof h);
  } else {
    // llm.c's reader takes the count from an int32 (data_common.py asserts < 2**31).
    if (count >= (uint64_t{1} << 31))
      throw RunError("prep: " + std::to_string(count) + " tokens do not fit llm.c's int32 token count; split the inputs");
    int32_t h[3] = {width == 2 ? kLlmcMagicU16 : kLlmcMagicU32, width == 2 ? kLlmcVersionU16 : kLlmcVersionU32,
                    static_cast<int32_t>(count)};
    std::memcpy(header.data(), h, sizeof h);  // little endian, like numpy's int32 on x86/arm
  }
  out.seekp(0);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.close();
  if (!out) throw RunError("prep: error writing '" + tmp + "' (disk full?)");
  // Rename last so a reader never sees a half-written file under the final name.
  if (std::rename(tmp.c_str(), output.c_str()) != 0)
    throw RunError("prep: cannot rename '" + tmp + "' to '" + output + "': " + sys_error());
  return count;
}

namespace {

// Megatron-LM's indexed dataset (megatron/core/datasets/indexed_dataset.py, what
// tools/preprocess_data.py writes): PREFIX.bin holds the documents' tokens back to back,
// PREFIX.idx describes them:
//   char[9] "MMIDIDX\0\0", u64 version 1, u8 dtype code (1 uint8, 2 int8, 3 int16, 4 int32,
//   5 int64, 6 float64, 7 float32, 8 uint16), u64 sequence count S, u64 document count D,
//   int32 lengths[S], int64 byte pointers[S], int64 document indices[D]
//   (multimodal files add int8 modes[S]).
// The runner reads the token stream as one sequence, as Megatron's GPT dataset does (the
// preprocessing appended an end-of-document token to each document); uint8, uint16 and
// int32 tokens (what preprocess_data.py picks by vocabulary size).
constexpr char kMegatronMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};

bool file_exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// PREFIX for PREFIX, PREFIX.bin or PREFIX.idx.
std::string megatron_prefix(const std::string& path) {
  auto ends = [&](const char* e) { return path.size() > 4 && path.compare(path.size() - 4, 4, e) == 0; };
  return ends(".bin") || ends(".idx") ? path.substr(0, path.size() - 4) : path;
}

// Validates PREFIX.idx against PREFIX.bin's size; returns the token width and count.
std::pair<uint32_t, uint64_t> megatron_index(const std::string& prefix) {
  const std::string idx = prefix + ".idx", bin = prefix + ".bin";
  const std::string where = "Megatron index '" + idx + "'";
  std::ifstream in(idx, std::ios::binary);
  if (!in) throw RunError(where + ": " + sys_error());
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t fixed = 9 + 8 + 1 + 8 + 8;
  if (data.size() < fixed)
    throw RunError(where + " is truncated: " + std::to_string(data.size()) + " bytes, shorter than its " +
                   std::to_string(fixed) + "-byte header");
  if (std::memcmp(data.data(), kMegatronMagic, 9) != 0)
    throw RunError(where + " is not a Megatron indexed dataset index (no MMIDIDX magic)");
  uint64_t version, seqs, docs;
  std::memcpy(&version, data.data() + 9, 8);
  const uint8_t code = static_cast<uint8_t>(data[17]);
  std::memcpy(&seqs, data.data() + 18, 8);
  std::memcpy(&docs, data.data() + 26, 8);
  if (version != 1) throw RunError(where + " has version " + std::to_string(version) + ", expected 1");
  const uint32_t width = code == 1 ? 1 : code == 8 ? 2 : code == 4 ? 4 : 0;
  if (width == 0) {
    static const char* names[] = {"?", "uint8", "int8", "int16", "int32", "int64", "float64", "float32", "uint16"};
    throw RunError(where + " has dtype " + (code <= 8 ? names[code] : "code " + std::to_string(code)) +
                   "; token files are uint8, uint16 or int32 (what preprocess_data.py writes)");
  }
  const uint64_t room = (data.size() - fixed) / 8;
  if (seqs > room || docs > room || fixed + 12 * seqs + 8 * docs > data.size())
    throw RunError(where + " is truncated: it declares " + std::to_string(seqs) + " sequences and " +
                   std::to_string(docs) + " documents but has " + std::to_string(data.size()) + " bytes");
  const uint64_t want = fixed + 12 * seqs + 8 * docs;
  if (data.size() != want && data.size() != want + seqs)
    throw RunError(where + " has " + std::to_string(data.size()) + " bytes, expected " + std::to_string(want) +
                   " for " + std::to_string(seqs) + " sequences and " + std::to_string(docs) + " documents");
  const char* lengths = data.data() + fixed;
  const char* pointers = lengths + 4 * seqs;
  uint64_t count = 0;
  for (uint64_t i = 0; i < seqs; ++i) {
    int32_t len;
    int64_t ptr;
    std::memcpy(&len, lengths + 4 * i, 4);
    std::memcpy(&ptr, pointers + 8 * i, 8);
    if (len < 0) throw RunError(where + ": sequence " + std::to_string(i) + " has a negative length");
    if (ptr != static_cast<int64_t>(count * width))
      throw RunError(where + ": sequence " + std::to_string(i) + " points to byte " + std::to_string(ptr) +
                     ", expected " + std::to_string(count * width) + " (sequences must be back to back)");
    count += static_cast<uint64_t>(len);
  }
  if (!file_exists(bin)) throw RunError(where + ": its data file '" + bin + "' is missing");
  return {width, count};
}

}  // namespace

Tokens Tokens::open(const std::string& path_arg, int64_t vocab_size, const std::string& format_arg, int64_t data_vocab) {
  // Megatron's PREFIX (or PREFIX.bin / PREFIX.idx beside each other): map PREFIX.bin.
  std::string path = path_arg, format = format_arg;
  uint32_t mg_width = 0;
  uint64_t mg_count = 0;
  if (format == "megatron" ||
      (format == "auto" && file_exists(megatron_prefix(path) + ".idx") &&
       (path == megatron_prefix(path) || file_exists(megatron_prefix(path) + ".bin")))) {
    const std::string prefix = megatron_prefix(path);
    std::tie(mg_width, mg_count) = megatron_index(prefix);
    path = prefix + ".bin";
    format = "megatron";
  }
  const std::string where = "token file '" + path + "'";
  if (format != "auto" && format != "sg" && format != "llmc" && format != "u16" && format != "u32" && format != "megatron")
    throw RunError("unknown data-format '" + format + "' (auto | sg | llmc | u16 | u32 | megatron)");
  if (data_vocab < 0 || vocab_size <= 0) throw RunError("data-vocab and vocab-size must be positive");
  if (data_vocab > 0 && data_vocab != vocab_size)
    throw RunError(where + ": the data's vocabulary is " + std::to_string(data_vocab) +
                   " tokens (data-vocab) but the model's vocab-size is " + std::to_string(vocab_size) +
                   "; they must match (set --vocab-size " + std::to_string(data_vocab) + ")");
  if ((format == "u16" || format == "u32") && data_vocab == 0)
    throw RunError(where + ": a raw " + format + " file has no header; state its vocabulary with --data-vocab N "
                   "(the tokenizer's vocabulary, equal to --vocab-size)");
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw RunError(where + ": " + sys_error() + " (create it with `scaleguard-run prep`)");
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    throw RunError(where + " is not a regular file");
  }
  size_t bytes = static_cast<size_t>(st.st_size);
  if (bytes == 0) {
    close(fd);
    throw RunError(where + " is empty");
  }
  void* map = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);  // the mapping keeps the file open
  if (map == MAP_FAILED) throw RunError(where + ": mmap: " + sys_error());
  Tokens t;
  t.map_ = map;
  t.map_bytes_ = bytes;  // from here on ~Tokens unmaps, also when a check below throws
  t.path_ = path;
  const auto* base = static_cast<const uint8_t*>(map);

  std::string fmt = format;
  if (fmt == "auto") {
    int32_t magic = 0;
    if (bytes >= 4) std::memcpy(&magic, base, 4);
    if (bytes >= sizeof kTokenMagic && std::memcmp(base, kTokenMagic, sizeof kTokenMagic) == 0) fmt = "sg";
    else if (magic == kLlmcMagicU16 || magic == kLlmcMagicU32) fmt = "llmc";
    else
      throw RunError(where + " has no known header (neither scaleguard's SGTOKENS nor llm.c's magic " +
                     std::to_string(kLlmcMagicU16) + "/" + std::to_string(kLlmcMagicU32) +
                     "); a raw token array needs --data-format u16|u32 and --data-vocab N");
  }
  uint64_t count = 0, header = 0;
  uint32_t width = 1;
  if (fmt == "sg") {
    if (bytes < kTokenHeaderBytes)
      throw RunError(where + " is truncated: " + std::to_string(bytes) + " bytes, shorter than its 32-byte header");
    Header h;
    std::memcpy(&h, base, sizeof h);
    if (std::memcmp(h.magic, kTokenMagic, sizeof h.magic) != 0)
      throw RunError(where + " is not a scaleguard token file (bad magic; create it with `scaleguard-run prep`)");
    if (h.version != kTokenVersion)
      throw RunError(where + " has version " + std::to_string(h.version) + ", expected " + std::to_string(kTokenVersion));
    if (h.width != 1 && h.width != 2)
      throw RunError(where + " has token width " + std::to_string(h.width) + " bytes; supported widths are 1 and 2");
    count = h.count, width = h.width, header = kTokenHeaderBytes;
  } else if (fmt == "llmc") {
    if (bytes < kLlmcHeaderBytes)
      throw RunError(where + " is truncated: " + std::to_string(bytes) + " bytes, shorter than llm.c's " +
                     std::to_string(kLlmcHeaderBytes) + "-byte header (256 x int32)");
    int32_t h[3];
    std::memcpy(h, base, sizeof h);
    if (h[0] == kLlmcMagicU16 && h[1] == kLlmcVersionU16) width = 2;
    else if (h[0] == kLlmcMagicU32 && h[1] == kLlmcVersionU32) width = 4;
    else if (h[0] != kLlmcMagicU16 && h[0] != kLlmcMagicU32)
      throw RunError(where + " has wrong magic " + std::to_string(h[0]) + " for an llm.c data file (expected " +
                     std::to_string(kLlmcMagicU16) + " with version 1, uint16 tokens, or " +
                     std::to_string(kLlmcMagicU32) + " with version 7, uint32 tokens)");
    else
      throw RunError(where + ": llm.c magic " + std::to_string(h[0]) + " with unsupported version " +
                     std::to_string(h[1]) + " (expected " +
                     std::to_string(h[0] == kLlmcMagicU16 ? kLlmcVersionU16 : kLlmcVersionU32) + ")");
    if (h[2] < 0) throw RunError(where + ": llm.c header has a negative token count " + std::to_string(h[2]));
    count = static_cast<uint64_t>(h[2]), header = kLlmcHeaderBytes;
  } else if (fmt == "megatron") {  // PREFIX.bin: the tokens the index describes, no header
    width = mg_width, count = mg_count, header = 0;
  } else {  // u16 | u32: the whole file is tokens
    width = fmt == "u16" ? 2 : 4;
    if (bytes % width != 0)
      throw RunError(where + " has " + std::to_string(bytes) + " bytes, " + (width == 2 ? "an odd length" : "not a multiple of 4") +
                     ": not a whole number of " + fmt + " tokens (truncated, or not a " + fmt + " file)");
    count = bytes / width, header = 0;
  }
  // Compare by division: a corrupt count must not overflow the product.
  uint64_t payload = bytes - header;
  if (count > payload / width || payload != count * width)
    throw RunError(where + " is truncated or corrupt: its " + (fmt == "megatron" ? "index" : "header") + " says " + std::to_string(count) + " tokens of " +
                   std::to_string(width) + " bytes (" + std::to_string(header + count * width) +
                   " bytes with the header) but the file has " + std::to_string(bytes) + " bytes");
  const uint64_t width_max = width == 1 ? 256 : width == 2 ? 65536 : uint64_t{1} << 32;
  if (data_vocab > 0 && static_cast<uint64_t>(data_vocab) > width_max)
    throw RunError(where + ": a vocabulary of " + std::to_string(data_vocab) + " does not fit " + std::to_string(width) +
                   "-byte tokens (at most " + std::to_string(width_max) + "); use u32 tokens (llm.c version 7)");
  // Without a stated vocabulary, wide tokens with the byte-level default mean a forgotten
  // --vocab-size rather than a byte corpus stored wide.
  if (data_vocab == 0 && width >= 2 && vocab_size <= 256)
    throw RunError(where + " has " + std::to_string(width) + "-byte tokens but vocab-size is " +
                   std::to_string(vocab_size) +
                   "; set --vocab-size to the tokenizer's vocabulary (> 256), or --data-vocab to say it is that small");
  t.bytes_ = base + header;
  t.count_ = count;
  t.width_ = width;
  t.header_bytes_ = header;
  t.vocab_ = vocab_size;
  t.format_ = fmt;
  return t;
}

void Tokens::out_of_vocab(uint64_t i, int64_t v) const {
  throw RunError((path_.empty() ? std::string("synthetic tokens") : "token file '" + path_ + "'") + ": token " +
                 std::to_string(v) + " at index " + std::to_string(i) + " (byte offset " +
                 std::to_string(header_bytes_ + i * width_) + ") is outside the vocabulary: vocab-size is " +
                 std::to_string(vocab_) + " (tokens 0.." + std::to_string(vocab_ - 1) + ")");
}

Tokens Tokens::synthetic(uint64_t count, int64_t vocab_size, uint64_t seed) {
  if (vocab_size > 65536) throw RunError("synthetic tokens support vocab-size up to 65536");
  Tokens t;
  t.width_ = vocab_size <= 256 ? 1 : 2;
  t.vocab_ = vocab_size;
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
    : bytes_(o.bytes_), count_(o.count_), width_(o.width_), vocab_(o.vocab_), header_bytes_(o.header_bytes_),
      path_(std::move(o.path_)), format_(std::move(o.format_)), map_(o.map_), map_bytes_(o.map_bytes_),
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
