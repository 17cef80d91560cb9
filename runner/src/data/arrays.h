// Array datasets for models that are not language models: inputs x and targets y, the first
// dimension of both the sample index.
//
//   h5   one HDF5 file with datasets `x` and `y` (--data FILE.h5, --data-format h5; auto
//        detects the HDF5 signature).
//   npy  a pair of NumPy .npy files x.npy and y.npy (--data DIR holding them, or --data
//        DIR/x.npy; --data-format npy; auto: a directory or a name ending in .npy). Format
//        versions 1.0, 2.0 and 3.0, C order, little-endian or byte-sized dtypes.
//
// dtypes: float32/float64 and signed/unsigned integers of 1, 2, 4 and 8 bytes (HDF5 and
// npy). Floats become float32 tensors, integers int64 (class labels for cross-entropy, or
// token ids for the built-in models). Integer y must be >= 0.
//
// Only the header is read at open (shape, dtype, exact file size for npy); each batch reads
// the rows of its own samples (npy: pread of one row each; HDF5: a one-row hyperslab each),
// so a rank reads only what it trains on. The sample order is the token files' stateless
// `Sampler` over [0, n). Every problem is a RunError naming the file and what is wrong.
#pragma once
#include <ATen/core/Tensor.h>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace scaleguard::run {

class ArrayData {
 public:
  // Whether `path` with `format` (auto | h5 | npy | a token format) names an array dataset.
  static bool applies(const std::string& path, const std::string& format);
  // Opens and validates; throws RunError naming the file and the problem.
  static std::shared_ptr<ArrayData> open(const std::string& path, const std::string& format);
  virtual ~ArrayData() = default;
  uint64_t n() const { return n_; }
  // "h5 FILE: x float32 (N, 1, 8, 8), y int64 (N)" for the start-up line.
  std::string describe() const;
  // x (ids.size(), ...) and y (ids.size(), ...) of these samples, on the CPU.
  std::pair<at::Tensor, at::Tensor> rows(const std::vector<uint64_t>& ids) const;

  // One array: its shape, element kind and size, for subclasses.
  struct Array {
    std::string name;              // "x" / "y" (npy: the file)
    std::vector<int64_t> shape;    // shape[0] = samples
    bool is_float = false;
    bool is_signed = true;
    int item_bytes = 4;
    int64_t row_elems() const;
  };

 protected:
  // Reads the raw row `id` of array a (0 = x, 1 = y) into `out` (row_elems * item_bytes bytes).
  virtual void read_row(int a, uint64_t id, void* out) const = 0;
  std::string path_, format_;
  Array arr_[2];
  uint64_t n_ = 0;
  void check_pair();  // first dimensions equal, shapes usable
};

}  // namespace scaleguard::run
