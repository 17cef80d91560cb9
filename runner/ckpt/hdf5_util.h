// Private helpers around the HDF5 C API: handles that close themselves, the dtype mapping,
// and the HDF5 error stack turned into one readable line (e.g. the errno of a failed write).
#pragma once
#include <hdf5.h>

#include <ATen/core/Tensor.h>
#include <string>

namespace scaleguard::ckpt::h5 {

// Turns off HDF5's printing of its error stack to stderr (we report errors ourselves).
void quiet();

// The innermost messages of the current thread's HDF5 error stack, e.g.
// "file write failed: ... errno = 28, error message = 'No space left on device'".
std::string last_error();

// Owns one HDF5 identifier and closes it with the matching H5?close.
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  ~Handle() { reset(); }
  Handle(Handle&& o) noexcept : id_(o.id_) { o.id_ = -1; }
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      o.id_ = -1;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  // Closes now; returns false when closing failed (for files: the final flush failed).
  bool reset();

 private:
  hid_t id_ = -1;
};

// HDF5 type (little-endian, also used as memory type: no conversion on x86/ARM hosts) for a
// manifest dtype name; an invalid handle for unknown names.
Handle file_type(const std::string& dtype);
// Manifest dtype name of an ATen scalar type, "" when unsupported.
std::string dtype_name(at::ScalarType t);
at::ScalarType scalar_type(const std::string& dtype);

}  // namespace scaleguard::ckpt::h5
