#include "hdf5_util.h"

#include <vector>

namespace scaleguard::ckpt::h5 {

void quiet() {
  // Before the library initialises (this is the first HDF5 call of a save and of a read):
  // no HDF5 clean-up at exit. When a disk fills up while HDF5 flushes its metadata, the
  // shard's H5Fclose fails and the file stays open inside HDF5 1.10, whose clean-up at exit
  // then crashes (H5F__close_cb). Every file that works is closed explicitly anyway.
  static const bool no_atexit = H5dont_atexit() >= 0;
  (void)no_atexit;
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

namespace {
herr_t collect(unsigned n, const H5E_error2_t* e, void* out) {
  auto* lines = static_cast<std::vector<std::string>*>(out);
  (void)n;
  if (!e->desc || !*e->desc) return 0;
  // The I/O driver's message is long ("time = ..., filename = ..., errno = 28, error
  // message = 'No space left on device', buf = ..."): keep its first words and the errno text.
  std::string desc = e->desc;
  const auto msg = desc.find("error message = '");
  std::string sys;
  if (msg != std::string::npos) {
    const auto start = msg + 17;
    sys = desc.substr(start, desc.find('\'', start) - start);
  }
  desc = desc.substr(0, desc.find_first_of(":\n"));
  lines->push_back(sys.empty() ? desc : desc + ": " + sys);
  return 0;
}
}  // namespace

std::string last_error() {
  std::vector<std::string> lines;
  // Walking inward-out puts the lowest-level cause (the system call) first.
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, collect, &lines);
  H5Eclear2(H5E_DEFAULT);
  std::string out;
  for (size_t i = 0; i < lines.size() && i < 2; ++i) out += (i ? "; " : "") + lines[i];
  return out.empty() ? "unknown HDF5 error" : out;
}

bool Handle::reset() {
  if (id_ < 0) return true;
  herr_t rc = -1;
  switch (H5Iget_type(id_)) {
    case H5I_FILE: rc = H5Fclose(id_); break;
    case H5I_GROUP: rc = H5Gclose(id_); break;
    case H5I_DATASET: rc = H5Dclose(id_); break;
    case H5I_DATASPACE: rc = H5Sclose(id_); break;
    case H5I_DATATYPE: rc = H5Tclose(id_); break;
    case H5I_ATTR: rc = H5Aclose(id_); break;
    case H5I_GENPROP_LST: rc = H5Pclose(id_); break;
    default: rc = H5Idec_ref(id_); break;
  }
  id_ = -1;
  return rc >= 0;
}

namespace {
// IEEE-style 16-bit float layouts that h5py and h5dump understand as floats.
Handle half_type(size_t exp_bits, size_t mant_bits, size_t bias) {
  Handle t(H5Tcopy(H5T_IEEE_F32LE));
  H5Tset_fields(t.get(), 15, mant_bits, exp_bits, 0, mant_bits);
  H5Tset_precision(t.get(), 16);
  H5Tset_size(t.get(), 2);
  H5Tset_ebias(t.get(), bias);
  return t;
}
}  // namespace

Handle file_type(const std::string& d) {
  if (d == "float32") return Handle(H5Tcopy(H5T_IEEE_F32LE));
  if (d == "float64") return Handle(H5Tcopy(H5T_IEEE_F64LE));
  if (d == "float16") return half_type(5, 10, 15);
  if (d == "bfloat16") return half_type(8, 7, 127);
  if (d == "int64") return Handle(H5Tcopy(H5T_STD_I64LE));
  if (d == "int32") return Handle(H5Tcopy(H5T_STD_I32LE));
  if (d == "int16") return Handle(H5Tcopy(H5T_STD_I16LE));
  if (d == "int8") return Handle(H5Tcopy(H5T_STD_I8LE));
  if (d == "uint8" || d == "bool") return Handle(H5Tcopy(H5T_STD_U8LE));
  return Handle();
}

std::string dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "float32";
    case at::kDouble: return "float64";
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    case at::kLong: return "int64";
    case at::kInt: return "int32";
    case at::kShort: return "int16";
    case at::kChar: return "int8";
    case at::kByte: return "uint8";
    case at::kBool: return "bool";
    default: return "";
  }
}

at::ScalarType scalar_type(const std::string& d) {
  if (d == "float32") return at::kFloat;
  if (d == "float64") return at::kDouble;
  if (d == "float16") return at::kHalf;
  if (d == "bfloat16") return at::kBFloat16;
  if (d == "int64") return at::kLong;
  if (d == "int32") return at::kInt;
  if (d == "int16") return at::kShort;
  if (d == "int8") return at::kChar;
  if (d == "bool") return at::kBool;
  return at::kByte;
}

}  // namespace scaleguard::ckpt::h5
