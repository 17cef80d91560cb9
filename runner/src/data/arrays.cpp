#include "data/arrays.h"

#include <ATen/ops/empty.h>
#include <fcntl.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "config/config.h"

namespace scaleguard::run {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

bool is_dir(const std::string& p) {
  struct stat st{};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "(";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + (s.size() == 1 ? ",)" : ")");
}

std::string kind_text(const ArrayData::Array& a) {
  return std::string(a.is_float ? "float" : a.is_signed ? "int" : "uint") + std::to_string(8 * a.item_bytes);
}

// ---- npy ----------------------------------------------------------------------------

class NpyData : public ArrayData {
 public:
  NpyData(const std::string& path) {
    path_ = path;
    format_ = "npy";
    std::string dir = is_dir(path) ? path : path.substr(0, path.find_last_of('/') == std::string::npos
                                                                 ? 0
                                                                 : path.find_last_of('/'));
    if (dir.empty()) dir = ".";
    const std::string files[2] = {dir + "/x.npy", dir + "/y.npy"};
    for (int a = 0; a < 2; ++a) {
      file_[a] = files[a];
      fd_[a] = ::open(files[a].c_str(), O_RDONLY | O_CLOEXEC);
      if (fd_[a] < 0)
        throw RunError("data " + files[a] + ": cannot open (" + std::strerror(errno) +
                       "); an npy dataset is a directory holding x.npy and y.npy");
      parse(a);
    }
    check_pair();
  }
  ~NpyData() override {
    for (int fd : fd_)
      if (fd >= 0) ::close(fd);
  }

 protected:
  void read_row(int a, uint64_t id, void* out) const override {
    const size_t bytes = static_cast<size_t>(arr_[a].row_elems()) * static_cast<size_t>(arr_[a].item_bytes);
    const off_t off = static_cast<off_t>(data_offset_[a] + id * bytes);
    size_t done = 0;
    while (done < bytes) {
      ssize_t r = ::pread(fd_[a], static_cast<char*>(out) + done, bytes - done, off + static_cast<off_t>(done));
      if (r <= 0)
        throw RunError("data " + file_[a] + ": reading sample " + std::to_string(id) + " failed (" +
                       (r == 0 ? std::string("file shrank") : std::strerror(errno)) + ")");
      done += static_cast<size_t>(r);
    }
  }

 private:
  [[noreturn]] void bad(int a, const std::string& what) const { throw RunError("data " + file_[a] + ": " + what); }

  void parse(int a) {
    struct stat st{};
    if (::fstat(fd_[a], &st) != 0) bad(a, std::string("cannot stat: ") + std::strerror(errno));
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    unsigned char pre[12] = {};
    const ssize_t got = ::pread(fd_[a], pre, sizeof pre, 0);
    if (got < 10) bad(a, "truncated npy header (" + std::to_string(size) + " bytes)");
    if (std::memcmp(pre, "\x93NUMPY", 6) != 0) bad(a, "not an npy file (no \\x93NUMPY magic)");
    const int major = pre[6];
    uint64_t hlen = 0, hstart = 0;
    if (major == 1) {
      hlen = pre[8] | (pre[9] << 8);
      hstart = 10;
    } else if (major == 2 || major == 3) {
      if (got < 12) bad(a, "truncated npy header");
      hlen = static_cast<uint64_t>(pre[8]) | (static_cast<uint64_t>(pre[9]) << 8) |
             (static_cast<uint64_t>(pre[10]) << 16) | (static_cast<uint64_t>(pre[11]) << 24);
      hstart = 12;
    } else {
      bad(a, "unsupported npy format version " + std::to_string(major) + "." + std::to_string(pre[7]));
    }
    if (hstart + hlen > size || hlen > (1u << 20))
      bad(a, "truncated npy header: it says " + std::to_string(hlen) + " header bytes, the file has " +
                 std::to_string(size));
    std::string h(hlen, '\0');
    if (::pread(fd_[a], h.data(), hlen, static_cast<off_t>(hstart)) != static_cast<ssize_t>(hlen))
      bad(a, "truncated npy header");
    data_offset_[a] = hstart + hlen;
    auto value_of = [&](const std::string& key) -> std::string {
      size_t k = h.find("'" + key + "'");
      if (k == std::string::npos) bad(a, "npy header has no '" + key + "': " + h);
      size_t c = h.find(':', k);
      if (c == std::string::npos) bad(a, "malformed npy header: " + h);
      size_t v = h.find_first_not_of(' ', c + 1);
      if (v == std::string::npos) bad(a, "malformed npy header: " + h);
      size_t e;
      if (h[v] == '\'') {
        e = h.find('\'', v + 1);
        if (e == std::string::npos) bad(a, "malformed npy header: " + h);
        return h.substr(v + 1, e - v - 1);
      }
      if (h[v] == '(') {
        e = h.find(')', v);
        if (e == std::string::npos) bad(a, "malformed npy header: " + h);
        return h.substr(v, e - v + 1);
      }
      e = h.find_first_of(",}", v);
      return h.substr(v, e == std::string::npos ? std::string::npos : e - v);
    };
    Array& ar = arr_[a];
    ar.name = a == 0 ? "x" : "y";
    const std::string descr = value_of("descr");
    if (descr.size() < 3 || (descr[0] != '<' && descr[0] != '|' && descr[0] != '='))
      bad(a, "unsupported dtype '" + descr + "' (little-endian float32/float64 or integers only)");
    const char kind = descr[1];
    const std::string sz = descr.substr(2);
    const int bytes = sz == "1" ? 1 : sz == "2" ? 2 : sz == "4" ? 4 : sz == "8" ? 8 : 0;
    const bool ok = (kind == 'f' && (bytes == 4 || bytes == 8)) || ((kind == 'i' || kind == 'u') && bytes > 0);
    if (!ok) bad(a, "unsupported dtype '" + descr + "' (float32/float64 or 1-8 byte integers only)");
    ar.is_float = kind == 'f';
    ar.is_signed = kind != 'u';
    ar.item_bytes = bytes;
    if (value_of("fortran_order") != "False") bad(a, "Fortran-order arrays are not supported (save C order)");
    const std::string shape = value_of("shape");
    if (shape.size() < 2 || shape.front() != '(') bad(a, "malformed shape " + shape);
    std::string cur;
    for (size_t i = 1; i < shape.size(); ++i) {
      char ch = shape[i];
      if (ch >= '0' && ch <= '9') {
        cur += ch;
      } else if (ch == ',' || ch == ')') {
        if (!cur.empty()) ar.shape.push_back(std::stoll(cur));
        cur.clear();
      } else if (ch != ' ' && ch != 'L') {
        bad(a, "malformed shape " + shape);
      }
    }
    if (ar.shape.empty()) bad(a, "a 0-d array: the first dimension must be the samples");
    uint64_t elems = 1;
    for (int64_t d : ar.shape) {
      if (d < 0 || (d > 0 && elems > std::numeric_limits<uint64_t>::max() / 16 / static_cast<uint64_t>(d)))
        bad(a, "shape " + shape + " too large");
      elems *= static_cast<uint64_t>(d);
    }
    const uint64_t want = data_offset_[a] + elems * static_cast<uint64_t>(bytes);
    if (size != want)
      bad(a, std::string(size < want ? "truncated" : "trailing bytes") + ": shape " + shape_text(ar.shape) + " of " +
                 descr + " needs " + std::to_string(want) + " bytes, the file has " + std::to_string(size));
  }

  std::string file_[2];
  int fd_[2] = {-1, -1};
  uint64_t data_offset_[2] = {0, 0};
};

// ---- HDF5 ---------------------------------------------------------------------------

class H5Data : public ArrayData {
 public:
  explicit H5Data(const std::string& path) {
    path_ = path;
    format_ = "h5";
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // our messages, not HDF5's stack dumps
    file_ = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file_ < 0) throw RunError("data " + path + ": cannot open as HDF5 (missing, unreadable or not an HDF5 file)");
    for (int a = 0; a < 2; ++a) {
      const char* name = a == 0 ? "x" : "y";
      Array& ar = arr_[a];
      ar.name = name;
      if (H5Lexists(file_, name, H5P_DEFAULT) <= 0)
        throw RunError("data " + path + ": no dataset '" + name + "' (an HDF5 dataset needs x and y, first dimension = samples)");
      ds_[a] = H5Dopen2(file_, name, H5P_DEFAULT);
      if (ds_[a] < 0) throw RunError("data " + path + ": '" + name + "' is not a dataset");
      hid_t type = H5Dget_type(ds_[a]);
      const H5T_class_t cls = H5Tget_class(type);
      const size_t size = H5Tget_size(type);
      if (cls == H5T_FLOAT && (size == 4 || size == 8)) {
        ar.is_float = true;
      } else if (cls == H5T_INTEGER && (size == 1 || size == 2 || size == 4 || size == 8)) {
        ar.is_signed = H5Tget_sign(type) != H5T_SGN_NONE;
      } else {
        H5Tclose(type);
        static const char* classes[] = {"integer", "float", "time", "string", "bitfield", "opaque",
                                        "compound", "reference", "enum", "variable-length", "array"};
        const std::string cname = cls >= 0 && cls <= 10 ? classes[cls] : "class " + std::to_string(static_cast<int>(cls));
        throw RunError("data " + path + ": dataset '" + name + "' has an unsupported dtype (HDF5 " + cname + ", " +
                       std::to_string(size) + " bytes): float32/float64 or 1-8 byte integers only");
      }
      H5Tclose(type);
      ar.item_bytes = static_cast<int>(size);
      mem_[a] = ar.is_float ? (size == 4 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE)
                : ar.is_signed ? (size == 1 ? H5T_NATIVE_INT8 : size == 2 ? H5T_NATIVE_INT16 : size == 4 ? H5T_NATIVE_INT32 : H5T_NATIVE_INT64)
                               : (size == 1 ? H5T_NATIVE_UINT8 : size == 2 ? H5T_NATIVE_UINT16 : size == 4 ? H5T_NATIVE_UINT32 : H5T_NATIVE_UINT64);
      space_[a] = H5Dget_space(ds_[a]);
      const int rank = H5Sget_simple_extent_ndims(space_[a]);
      if (rank < 1)
        throw RunError("data " + path + ": dataset '" + name + "' is a scalar: the first dimension must be the samples");
      std::vector<hsize_t> dims(static_cast<size_t>(rank));
      H5Sget_simple_extent_dims(space_[a], dims.data(), nullptr);
      for (hsize_t d : dims) ar.shape.push_back(static_cast<int64_t>(d));
    }
    check_pair();
  }
  ~H5Data() override {
    for (int a = 0; a < 2; ++a) {
      if (space_[a] >= 0) H5Sclose(space_[a]);
      if (ds_[a] >= 0) H5Dclose(ds_[a]);
    }
    if (file_ >= 0) H5Fclose(file_);
  }

 protected:
  void read_row(int a, uint64_t id, void* out) const override {
    const Array& ar = arr_[a];
    std::vector<hsize_t> start(ar.shape.size(), 0), count(ar.shape.begin(), ar.shape.end());
    start[0] = id;
    count[0] = 1;
    hid_t fs = H5Scopy(space_[a]);
    hsize_t elems = static_cast<hsize_t>(ar.row_elems());
    hid_t ms = H5Screate_simple(1, &elems, nullptr);
    herr_t rc = H5Sselect_hyperslab(fs, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
    if (rc >= 0) rc = H5Dread(ds_[a], mem_[a], ms, fs, H5P_DEFAULT, out);
    H5Sclose(ms);
    H5Sclose(fs);
    if (rc < 0)
      throw RunError("data " + path_ + ": reading sample " + std::to_string(id) + " of '" + ar.name + "' failed");
  }

 private:
  hid_t file_ = -1;
  hid_t ds_[2] = {-1, -1};
  hid_t space_[2] = {-1, -1};
  hid_t mem_[2] = {-1, -1};
};

// One integer of 1, 2, 4 or 8 bytes (native order), widened; memcpy: rows need not be aligned.
template <typename I8, typename I16, typename I32, typename I64>
I64 load_integer(const char* s, size_t bytes) {
  if (bytes == 1) { I8 t; std::memcpy(&t, s, 1); return t; }
  if (bytes == 2) { I16 t; std::memcpy(&t, s, 2); return t; }
  if (bytes == 4) { I32 t; std::memcpy(&t, s, 4); return t; }
  I64 t; std::memcpy(&t, s, 8); return t;
}

template <typename T>
void convert(const void* src, int64_t n, const ArrayData::Array& a, T* dst) {
  const char* s = static_cast<const char*>(src);
  for (int64_t i = 0; i < n; ++i, s += a.item_bytes) {
    if (a.is_float) {
      if (a.item_bytes == 4) {
        float v;
        std::memcpy(&v, s, 4);
        dst[i] = static_cast<T>(v);
      } else {
        double v;
        std::memcpy(&v, s, 8);
        dst[i] = static_cast<T>(v);
      }
    } else if (a.is_signed) {
      dst[i] = static_cast<T>(load_integer<int8_t, int16_t, int32_t, int64_t>(s, a.item_bytes));
    } else {
      dst[i] = static_cast<T>(load_integer<uint8_t, uint16_t, uint32_t, uint64_t>(s, a.item_bytes));
    }
  }
}

}  // namespace

int64_t ArrayData::Array::row_elems() const {
  int64_t e = 1;
  for (size_t i = 1; i < shape.size(); ++i) e *= shape[i];
  return e;
}

void ArrayData::check_pair() {
  const Array &x = arr_[0], &y = arr_[1];
  if (x.shape[0] != y.shape[0])
    throw RunError("data " + path_ + ": mismatched sample counts: x has " + std::to_string(x.shape[0]) + " samples " +
                   shape_text(x.shape) + ", y has " + std::to_string(y.shape[0]) + " " + shape_text(y.shape));
  if (x.shape[0] == 0) throw RunError("data " + path_ + ": no samples (first dimension 0)");
  if (!x.is_float && x.item_bytes == 8 && !x.is_signed)
    throw RunError("data " + path_ + ": x is uint64, which does not fit int64 tensors");
  n_ = static_cast<uint64_t>(x.shape[0]);
}

bool ArrayData::applies(const std::string& path, const std::string& format) {
  if (format == "h5" || format == "npy") return true;
  if (format != "auto") return false;
  if (is_dir(path) || ends_with(path, ".npy")) return true;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char sig[8] = {};
  const bool h5 = ::pread(fd, sig, 8, 0) == 8 && std::memcmp(sig, "\x89HDF\r\n\x1a\n", 8) == 0;
  ::close(fd);
  return h5;
}

std::shared_ptr<ArrayData> ArrayData::open(const std::string& path, const std::string& format) {
  bool npy = format == "npy" || (format == "auto" && (is_dir(path) || ends_with(path, ".npy")));
  if (npy) return std::make_shared<NpyData>(path);
  return std::make_shared<H5Data>(path);
}

std::string ArrayData::describe() const {
  std::string out = format_ + " " + path_ + ":";
  for (int a = 0; a < 2; ++a) {
    std::vector<int64_t> s = arr_[a].shape;
    out += std::string(a ? "," : "") + " " + arr_[a].name + " " + kind_text(arr_[a]) + " " + shape_text(s) + " -> " +
           (arr_[a].is_float ? "float32" : "int64");
  }
  return out;
}

std::pair<at::Tensor, at::Tensor> ArrayData::rows(const std::vector<uint64_t>& ids) const {
  at::Tensor out[2];
  const int64_t m = static_cast<int64_t>(ids.size());
  for (int a = 0; a < 2; ++a) {
    const Array& ar = arr_[a];
    std::vector<int64_t> shape = ar.shape;
    shape[0] = m;
    out[a] = at::empty(shape, ar.is_float ? at::kFloat : at::kLong);
    const int64_t re = ar.row_elems();
    std::vector<char> buf(static_cast<size_t>(re) * static_cast<size_t>(ar.item_bytes));
    for (int64_t j = 0; j < m; ++j) {
      const uint64_t id = ids[static_cast<size_t>(j)];
      read_row(a, id, buf.data());
      if (ar.is_float) {
        convert(buf.data(), re, ar, out[a].data_ptr<float>() + j * re);
      } else {
        int64_t* dst = out[a].data_ptr<int64_t>() + j * re;
        convert(buf.data(), re, ar, dst);
        if (a == 1)
          for (int64_t i = 0; i < re; ++i)
            if (dst[i] < 0)
              throw RunError("data " + path_ + ": y of sample " + std::to_string(id) + " is " + std::to_string(dst[i]) +
                             ": integer targets (class labels) must be >= 0");
      }
    }
  }
  return {out[0], out[1]};
}

}  // namespace scaleguard::run
