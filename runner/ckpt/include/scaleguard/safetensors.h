// safetensors (Hugging Face's weight format) read and write, in plain C++ (no LibTorch):
//
//   8 bytes   N, little-endian uint64: the header's length
//   N bytes   JSON header: {"NAME": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]},
//                           ..., "__metadata__": {"format": "pt"}}
//   rest      the tensors' bytes, row-major little-endian; offsets relative to the data start
//
// The reader trusts nothing in a file: the header length is bounded by the file and by
// kMaxHeaderBytes, the JSON is parsed without exceptions, every entry is typed, every shape's
// byte size is computed with overflow checks and must equal its extent, and the extents must
// tile the data exactly (sorted by begin: the first at 0, each next one where the previous
// ended, the last at the end of the file) -- the spec's "entirely indexed, no holes" rule, so
// overlapping tensors, gaps and trailing bytes are all refused. Names are unique (a JSON key
// given twice is refused, not silently replaced). Errors name the file and the tensor.
// Tensor bytes are reached through a read-only mmap of the file: only the pages a caller
// touches are read, and nothing is allocated in proportion to what the header claims.
//
// Sharded weights: a directory with `model.safetensors.index.json` ({"weight_map": {NAME:
// FILE}}), FILE a plain name in that directory (no '/', not "." or ".."): every tensor is
// found in the file the map names, and every tensor of those files is in the map.
//
// The writer writes one dtype per call's tensors as given, names sorted, the header padded
// with spaces to a multiple of 8 bytes (as Hugging Face's writer does), `__metadata__`
// {"format": "pt"} plus what the caller adds, to a temporary file that is fsynced and then
// renamed (a reader never sees half a file).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "scaleguard/result.h"

namespace scaleguard::safetensors {

constexpr uint64_t kMaxHeaderBytes = 100ull * 1000 * 1000;  // as the reference implementation

// Bytes per element of a safetensors dtype name ("F32", "BF16", ...), 0 when unknown.
size_t dtype_size(const std::string& dtype);

struct TensorInfo {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // relative to the data start
  uint64_t numel() const;
};

struct Header {
  std::vector<TensorInfo> tensors;  // sorted by name
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // 8 + N
  const TensorInfo* find(const std::string& name) const;
};

// Validates the JSON header `text` for a file of `file_size` bytes whose header is
// `header_len` bytes long (so the data holds file_size - 8 - header_len bytes). `origin`
// names the file in errors. No exceptions, no allocation beyond the header's own size.
Result<Header> parse_header(const std::string& text, uint64_t header_len, uint64_t file_size, const std::string& origin);
// The whole prefix: 8-byte length, bounds, then parse_header. `bytes` may be the whole file.
Result<Header> parse_prefix(const uint8_t* bytes, size_t size, uint64_t file_size, const std::string& origin);

// One open .safetensors file, mapped read-only.
class File {
 public:
  static Result<std::shared_ptr<File>> open(const std::string& path);
  ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  const std::string& path() const { return path_; }
  const Header& header() const { return header_; }
  // The tensor's bytes (end - begin of them), valid while the File lives.
  const uint8_t* data(const TensorInfo& t) const { return base_ + header_.data_start + t.begin; }

 private:
  File() = default;
  std::string path_;
  Header header_;
  const uint8_t* base_ = nullptr;
  size_t mapped_ = 0;
};

// Weights from a file, or a directory holding model.safetensors or
// model.safetensors.index.json (the index wins when both are there).
class Weights {
 public:
  static Result<Weights> open(const std::string& file_or_dir);
  struct Entry {
    const File* file;
    const TensorInfo* info;
  };
  // Sorted names of every tensor.
  std::vector<std::string> names() const;
  const Entry* find(const std::string& name) const;
  const std::string& origin() const { return origin_; }  // what was opened, for messages
  std::map<std::string, std::string> metadata() const;  // the first file's

 private:
  std::string origin_;
  std::vector<std::shared_ptr<File>> files_;
  std::map<std::string, Entry> entries_;
};

// Parses and checks an index's text: weight_map object of plain file names. Returns
// name -> file. Exposed for tests and the fuzzer.
Result<std::map<std::string, std::string>> parse_index(const std::string& text, const std::string& origin);

// ---- writing ----
struct TensorSpec {
  std::string name;
  std::string dtype;  // "F32", "BF16", ... (any dtype_size knows)
  std::vector<int64_t> shape;
  uint64_t bytes() const;
};
// Fills `out` (resized by the caller to spec.bytes()) with the tensor's row-major bytes;
// returns "" or an error. Called once per tensor, in name order, so a writer never holds
// more than one tensor.
using Fetch = std::function<std::string(const TensorSpec& spec, std::vector<uint8_t>& out)>;

// Writes `path` atomically. Names must be unique. Returns the bytes written.
Result<uint64_t> write_file(const std::string& path, std::vector<TensorSpec> tensors, const Fetch& fetch,
                            const std::map<std::string, std::string>& metadata = {});

// Writes `dir`/model.safetensors, or -- when the tensors' bytes exceed max_shard_bytes --
// model-00001-of-0000K.safetensors ... (tensors in name order, a new shard when the next
// tensor would exceed the bound; one tensor larger than it gets its own shard) and
// model.safetensors.index.json ({"metadata": {"total_size": B}, "weight_map": {...}}).
// Returns the files written (names in `dir`).
Result<std::vector<std::string>> write_model(const std::string& dir, std::vector<TensorSpec> tensors,
                                             const Fetch& fetch, uint64_t max_shard_bytes,
                                             const std::map<std::string, std::string>& metadata = {});

}  // namespace scaleguard::safetensors
