#include "ckpt/shard_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ckpt/raw_write.h"
#include "hdf5_util.h"
#include "scaleguard/checksum.h"

namespace scaleguard::ckpt {
namespace {

using h5::Handle;

Error fail(const std::string& path, const std::string& what) {
  return Error{path + ": " + what, path, 0, "", ""};
}

// Opens group `path` ("optim/w"), creating missing parents; on failure an invalid handle
// and `error` set. (HDF5 clears its error stack at every API call, so errors are read at once.)
Handle group(hid_t file, const std::string& path, std::string& error) {
  Handle g(H5Gopen2(file, "/", H5P_DEFAULT));
  size_t start = 0;
  while (g.valid() && start < path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    const std::string part = path.substr(start, end - start);
    Handle next(H5Lexists(g.get(), part.c_str(), H5P_DEFAULT) > 0
                    ? H5Gopen2(g.get(), part.c_str(), H5P_DEFAULT)
                    : H5Gcreate2(g.get(), part.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    if (!next.valid()) {
      error = "cannot create group '" + path + "': " + h5::last_error();
      return next;
    }
    g = std::move(next);
    start = end + 1;
  }
  return g;
}

// Each returns "" or the HDF5 error.
std::string write_attr(hid_t obj, const char* name, hid_t type, hid_t space, const void* data) {
  Handle a(H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT));
  if (!a.valid()) return h5::last_error();
  // A null dataspace (empty shape of a 0-d tensor) holds no data to write.
  if (H5Sget_simple_extent_type(space) != H5S_NULL && H5Awrite(a.get(), type, data) < 0) return h5::last_error();
  return "";
}

std::string write_shape_attr(hid_t obj, const char* name, const std::vector<int64_t>& v) {
  const hsize_t n = v.size();
  Handle space(v.empty() ? H5Screate(H5S_NULL) : H5Screate_simple(1, &n, nullptr));
  return write_attr(obj, name, H5T_STD_I64LE, space.get(), v.data());
}

std::string write_string_attr(hid_t obj, const char* name, const std::string& s) {
  Handle type(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), s.size() + 1);   // with the NUL: NULLTERM strings need it
  Handle space(H5Screate(H5S_SCALAR));
  return write_attr(obj, name, type.get(), space.get(), s.c_str());
}

// Datasets this large are written raw (raw_write.h) into space HDF5 allocates for them,
// 4 KiB-aligned for O_DIRECT; smaller ones through H5Dwrite.
constexpr hsize_t kRawMin = hsize_t{1} << 16;

// A dataset HDF5 allocated but left for RawWriter::write to fill.
struct RawDataset {
  haddr_t offset;
  size_t bytes;
  const void* data;
  size_t entry;  // index into ShardEntry::datasets
};

void test_pause(const std::string& path, int64_t step) {
  const unsigned seconds = test_hook_seconds("SCALEGUARD_TEST_PAUSE_IN_SAVE", step);
  if (seconds == 0) return;
  std::fprintf(stderr, "scaleguard-ckpt: test pause %us inside the save of %s (pid %d)\n", seconds,
               path.c_str(), static_cast<int>(::getpid()));
  std::fflush(stderr);
  ::sleep(seconds);
}

}  // namespace

unsigned test_hook_seconds(const char* variable, int64_t step) {
  const char* env = std::getenv(variable);
  if (!env || !*env) return 0;
  char* rest = nullptr;
  const unsigned long seconds = std::strtoul(env, &rest, 10);
  if (*rest == '@' && std::strtoll(rest + 1, nullptr, 10) != step) return 0;
  return static_cast<unsigned>(std::min(seconds, 3600UL));
}

Result<ShardEntry> write_shard(const std::string& dir, int rank, const Snapshot& snap) {
  h5::quiet();
  ShardEntry entry;
  entry.rank = rank;
  entry.file = shard_file_name(rank);
  const std::string path = dir + "/" + entry.file;

  // Object headers and group structures go into one block at the front of the file (1 KiB
  // per tensor reserved, ~0.6 KiB measured) instead of between the datasets: opening the
  // shard and each dataset then reads one region, not a cold seek per tensor.
  const hsize_t meta_block = std::clamp<hsize_t>(hsize_t{1024} * snap.tensors().size(), 4096, hsize_t{1} << 20);
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS));
  Handle raw_dcpl(H5Pcreate(H5P_DATASET_CREATE));
  if (!fapl.valid() || !raw_dcpl.valid() || H5Pset_alignment(fapl.get(), kRawMin, kDirectAlign) < 0 ||
      H5Pset_meta_block_size(fapl.get(), meta_block) < 0 ||
      H5Pset_layout(raw_dcpl.get(), H5D_CONTIGUOUS) < 0 || H5Pset_alloc_time(raw_dcpl.get(), H5D_ALLOC_TIME_EARLY) < 0 ||
      H5Pset_fill_time(raw_dcpl.get(), H5D_FILL_TIME_NEVER) < 0)
    return fail(path, "cannot set up HDF5 properties: " + h5::last_error());
  Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()));
  if (!file.valid()) return fail(path, "cannot create shard: " + h5::last_error());
  // On failure the shard is useless. Emptying it first gives HDF5 room to flush its
  // metadata on close even when the disk is full: a failed H5Fclose leaves the library in a
  // state that crashes at exit (HDF5 1.10).
  auto fail = [&](const std::string& p, const std::string& what) {
    if (file.valid()) {
      const bool emptied = ::truncate(path.c_str(), 0) == 0;
      if (!file.reset() && !emptied) std::fprintf(stderr, "scaleguard-ckpt: could not release %s\n", path.c_str());
    }
    ::unlink(path.c_str());
    return scaleguard::ckpt::fail(p, what);
  };

  std::vector<RawDataset> raw;
  bool paused = false;
  for (const auto& t : snap.tensors()) {
    DatasetEntry d;
    d.name = t.name;
    d.dtype = h5::dtype_name(t.data.scalar_type());
    d.rank_scoped = t.rank_scoped;
    d.global_shape = t.global_shape;
    d.offset = t.offset;
    d.extent = t.data.sizes().vec();
    d.bytes = t.data.nbytes();
    const bool is_raw = d.bytes >= kRawMin;

    const auto slash = t.name.rfind('/');
    std::string error;
    Handle parent = group(file.get(), slash == std::string::npos ? "" : t.name.substr(0, slash), error);
    if (!parent.valid()) return fail(path, error);
    const std::string leaf = slash == std::string::npos ? t.name : t.name.substr(slash + 1);
    std::vector<hsize_t> dims(d.extent.begin(), d.extent.end());
    Handle space(dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(dims.size(), dims.data(), nullptr));
    Handle type = h5::file_type(d.dtype);
    Handle ds(H5Dcreate2(parent.get(), leaf.c_str(), type.get(), space.get(), H5P_DEFAULT,
                         is_raw ? raw_dcpl.get() : H5P_DEFAULT, H5P_DEFAULT));
    if (!ds.valid()) return fail(path, "cannot create dataset '" + t.name + "': " + h5::last_error());
    const haddr_t at = is_raw ? H5Dget_offset(ds.get()) : HADDR_UNDEF;
    if (at != HADDR_UNDEF) {
      raw.push_back({at, d.bytes, t.data.data_ptr(), entry.datasets.size()});
    } else {
      d.xxh3 = xxh3_64(t.data.data_ptr(), d.bytes);
      if (d.bytes > 0 && H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data.data_ptr()) < 0)
        return fail(path, "writing dataset '" + t.name + "' failed: " + h5::last_error());
    }
    for (const std::string& e : {write_shape_attr(ds.get(), "global_shape", d.global_shape),
                                 write_shape_attr(ds.get(), "offset", d.offset),
                                 write_string_attr(ds.get(), "dtype", d.dtype),
                                 write_string_attr(ds.get(), "scope", d.rank_scoped ? "rank" : "global")})
      if (!e.empty()) return fail(path, "writing attributes of '" + t.name + "' failed: " + e);
    entry.datasets.push_back(std::move(d));
    if (!paused) {
      paused = true;
      test_pause(path, snap.step());
    }
  }
  for (const auto& s : snap.scalars()) {
    std::string error;
    Handle g = group(file.get(), s.group, error);
    if (!g.valid()) return fail(path, error);
    Handle space(H5Screate(H5S_SCALAR));
    error = std::visit(
        [&](auto v) {
          const hid_t type = std::is_same_v<decltype(v), double> ? H5T_IEEE_F64LE : H5T_STD_I64LE;
          return write_attr(g.get(), s.key.c_str(), type, space.get(), &v);
        },
        s.value);
    if (!error.empty()) return fail(path, "writing scalar " + s.group + ":" + s.key + " failed: " + error);
  }
  // Flushing writes HDF5's metadata: a full disk may show up only here. Flushing before
  // closing keeps the failure on the path that can still release the file cleanly.
  if (H5Fflush(file.get(), H5F_SCOPE_LOCAL) < 0) return fail(path, "flushing shard failed: " + h5::last_error());
  if (!file.reset()) return fail(path, "closing shard failed: " + h5::last_error());

  // The large datasets' bytes, then one fsync. The whole-file checksum is built on the way,
  // in file order: HDF5's bytes between the raw datasets are read back from the page
  // cache, the datasets' bytes are hashed from memory as they are written (the same bytes
  // a read of the file returns, without reading them back from the disk).
  RawFile out;
  if (auto e = open_for_raw_writes(path, out); !e.empty()) return fail(path, "cannot reopen shard: " + e);
  std::sort(raw.begin(), raw.end(), [](const RawDataset& a, const RawDataset& b) { return a.offset < b.offset; });
  Xxh3Stream file_hash;
  RawWriter writer;
  uint64_t cursor = 0;
  for (const RawDataset& r : raw) {
    if (auto e = hash_range(out.buffered, cursor, r.offset, file_hash); !e.empty())
      return fail(path, "reading the shard back failed: " + e);
    Xxh3Stream dataset_hash;
    if (auto e = writer.write(out, r.offset, r.bytes, r.data, {&dataset_hash, &file_hash}); !e.empty())
      return fail(path, "writing dataset '" + entry.datasets[r.entry].name + "' failed: " + e);
    entry.datasets[r.entry].xxh3 = dataset_hash.digest();
    cursor = r.offset + r.bytes;
  }
  const off_t size = ::lseek(out.buffered, 0, SEEK_END);
  if (size < 0 || static_cast<uint64_t>(size) < cursor) return fail(path, "the shard is shorter than its datasets");
  if (auto e = hash_range(out.buffered, cursor, static_cast<uint64_t>(size), file_hash); !e.empty())
    return fail(path, "reading the shard back failed: " + e);
  if (::fsync(out.buffered) != 0) return fail(path, std::string("fsync failed: ") + std::strerror(errno));
  entry.bytes = static_cast<uint64_t>(size);
  entry.xxh3 = file_hash.digest();
  return entry;
}

}  // namespace scaleguard::ckpt
