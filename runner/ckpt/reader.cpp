#include "ckpt/reader.h"

#include <ATen/ATen.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "ckpt/raw_read.h"
#include "hdf5_util.h"
#include "scaleguard/checksum.h"

namespace scaleguard::ckpt {

struct Reader::File {
  std::string path;
  h5::Handle id;
  int fd = -1;  // the same file for the raw reads of contiguous datasets
  bool direct = false;  // fd has O_DIRECT
  File() = default;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File() {
    if (fd >= 0) ::close(fd);
  }
};

namespace {

std::string shape_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

Error err(const std::string& file, const std::string& field, const std::string& what) {
  return Error{(file.empty() ? "" : file + ": ") + what, file, 0, field, ""};
}

int64_t volume(const std::vector<int64_t>& extent) {
  int64_t v = 1;
  for (auto e : extent) v *= e;
  return v;
}

// Shape and element size of a dataset as stored, for checking against the manifest.
bool stored_shape(hid_t ds, std::vector<int64_t>& dims, size_t& elem) {
  h5::Handle space(H5Dget_space(ds));
  h5::Handle type(H5Dget_type(ds));
  const int rank = space.valid() ? H5Sget_simple_extent_ndims(space.get()) : -1;
  if (rank < 0 || !type.valid()) return false;
  std::vector<hsize_t> d(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), d.data(), nullptr);
  dims.assign(d.begin(), d.end());
  elem = H5Tget_size(type.get());
  return true;
}

// File offset of a dataset's bytes when reading them raw gives what H5Dread with `type` gives:
// contiguous layout, no filters, stored in exactly that type, all `bytes` allocated.
std::optional<uint64_t> raw_offset(hid_t ds, hid_t type, uint64_t bytes) {
  h5::Handle dcpl(H5Dget_create_plist(ds));
  h5::Handle stored(H5Dget_type(ds));
  if (!dcpl.valid() || !stored.valid() || H5Pget_layout(dcpl.get()) != H5D_CONTIGUOUS ||
      H5Pget_nfilters(dcpl.get()) != 0 || H5Tequal(stored.get(), type) <= 0 || H5Dget_storage_size(ds) != bytes)
    return std::nullopt;
  const haddr_t at = H5Dget_offset(ds);
  if (at == HADDR_UNDEF) return std::nullopt;
  return static_cast<uint64_t>(at);
}

}  // namespace

Result<Reader> Reader::open(const std::string& dir, const OpenOptions& options) {
  h5::quiet();
  auto parsed = read_manifest(dir);
  if (!parsed) return parsed.error();
  auto m = std::make_unique<Manifest>(std::move(parsed).value());
  if (!options.expect_config_hash.empty() && m->config_hash != options.expect_config_hash)
    return Error{dir + ": checkpoint of model '" + m->model_name + "' (config hash " + m->config_hash +
                     "), but this run's model has config hash " + options.expect_config_hash,
                 dir, 0, "config_hash", "point --ckpt-dir at this model's checkpoints or start fresh"};
  if (options.only_rank >= 0) {
    std::vector<ShardEntry> mine;
    for (auto& s : m->shards)
      if (s.rank == options.only_rank) mine.push_back(std::move(s));
    if (mine.empty())
      return Error{dir + ": the manifest lists no shard of rank " + std::to_string(options.only_rank), dir, 0, "", ""};
    m->shards = std::move(mine);
  }
  if (options.verify_files) {
    const auto problems = verify_files(dir, *m);
    if (!problems.empty()) {
      std::string why;
      for (const auto& p : problems) why += (why.empty() ? "" : "; ") + p.file + ": " + p.why;
      return Error{why, problems.front().file, 0, "", ""};
    }
  }
  Reader r;
  r.raw_ = std::make_shared<RawReader>();
  r.dir_ = dir;
  r.manifest_ = std::move(*m);
  for (const auto& s : r.manifest_.shards) {
    auto f = std::make_shared<File>();
    f->path = dir + "/" + s.file;
    f->id = h5::Handle(H5Fopen(f->path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    if (!f->id.valid()) return err(f->path, "", "not a readable HDF5 file: " + h5::last_error());
    f->fd = open_for_raw_reads(f->path, options.verify_files, &f->direct);
    if (f->fd < 0) return err(f->path, "", std::string("cannot open: ") + std::strerror(errno));
    for (const auto& d : s.datasets) {
      h5::Handle ds(H5Dopen2(f->id.get(), d.name.c_str(), H5P_DEFAULT));
      if (!ds.valid()) return err(f->path, d.name, "dataset '" + d.name + "' listed in the manifest is missing");
      std::vector<int64_t> dims;
      size_t elem = 0;
      if (!stored_shape(ds.get(), dims, elem)) return err(f->path, d.name, "cannot read the shape of '" + d.name + "'");
      if (dims != d.extent || elem != dtype_size(d.dtype))
        return err(f->path, d.name,
                   "manifest says '" + d.name + "' is " + d.dtype + " " + shape_str(d.extent) + " but the file holds " +
                       std::to_string(elem) + "-byte elements " + shape_str(dims));
    }
    r.files_[s.rank] = std::move(f);
  }
  return r;
}

std::vector<std::string> Reader::tensor_names() const {
  std::vector<std::string> names;
  for (const auto& s : manifest_.shards)
    for (const auto& d : s.datasets)
      if (!d.rank_scoped) names.push_back(d.name);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::vector<int64_t> Reader::global_shape(const std::string& name) const {
  for (const auto& s : manifest_.shards)
    for (const auto& d : s.datasets)
      if (!d.rank_scoped && d.name == name) return d.global_shape;
  return {};
}

Result<const Reader::File*> Reader::file_of(int rank) const {
  auto it = files_.find(rank);
  if (it == files_.end()) return err(dir_, "", "no shard of rank " + std::to_string(rank));
  return static_cast<const File*>(it->second.get());
}

Result<at::Tensor> Reader::read(const std::string& name) const {
  for (const auto& s : manifest_.shards)
    for (const auto& d : s.datasets)
      if (!d.rank_scoped && d.name == name) return read_slice(name, std::vector<int64_t>(d.global_shape.size(), 0), d.global_shape);
  return err(dir_, name, "no tensor '" + name + "' in this checkpoint");
}

std::string base_name(const std::string& name) {
  const auto at = name.rfind('@');
  if (at == std::string::npos || at + 1 == name.size()) return name;
  for (size_t i = at + 1; i < name.size(); ++i)
    if (name[i] < '0' || name[i] > '9') return name;
  return name.substr(0, at);
}

Result<at::Tensor> Reader::read_whole(const std::string& name) const {
  std::vector<const DatasetEntry*> boxes;
  for (const auto& s : manifest_.shards)
    for (const auto& d : s.datasets)
      if (!d.rank_scoped && base_name(d.name) == name) boxes.push_back(&d);
  if (boxes.empty()) return err(dir_, name, "no tensor '" + name + "' in this checkpoint");
  const DatasetEntry& first = *boxes.front();
  at::Tensor out = at::empty(first.global_shape, at::TensorOptions().dtype(h5::scalar_type(first.dtype)));
  int64_t covered = 0;
  for (size_t i = 0; i < boxes.size(); ++i)
    for (size_t k = 0; k < i; ++k) {
      bool meets = true;
      for (size_t a = 0; a < boxes[i]->offset.size() && meets; ++a)
        meets = boxes[i]->offset[a] < boxes[k]->offset[a] + boxes[k]->extent[a] &&
                boxes[k]->offset[a] < boxes[i]->offset[a] + boxes[i]->extent[a];
      if (meets && boxes[i]->offset.size() == boxes[k]->offset.size())
        return err(dir_, name, "boxes '" + boxes[k]->name + "' and '" + boxes[i]->name + "' overlap");
    }
  for (const DatasetEntry* d : boxes) {
    if (d->global_shape != first.global_shape || d->dtype != first.dtype)
      return err(dir_, name, "'" + d->name + "' disagrees with '" + first.name + "' on the global shape or dtype");
    // Boxes of one tensor never overlap (parse_manifest checks it per name; replicas split rows).
    auto box = read_slice(d->name, d->offset, d->extent);
    if (!box) return box.error();
    at::Tensor region = out;
    for (size_t i = 0; i < d->offset.size(); ++i)
      region = region.narrow(static_cast<int64_t>(i), d->offset[i], d->extent[i]);
    region.copy_(*box);
    covered += volume(d->extent);
  }
  if (covered != out.numel())
    return err(dir_, name, "the shards hold only " + std::to_string(covered) + " of the " +
                               std::to_string(out.numel()) + " elements of '" + name + "'");
  return out;
}

Result<at::Tensor> Reader::read_slice(const std::string& name, const std::vector<int64_t>& offset,
                                      const std::vector<int64_t>& extent) const {
  const DatasetEntry* any = nullptr;
  for (const auto& s : manifest_.shards)
    for (const auto& d : s.datasets)
      if (!d.rank_scoped && d.name == name) any = &d;
  if (!any) return err(dir_, name, "no tensor '" + name + "' in this checkpoint");
  for (auto e : extent)
    if (e < 0) return err(dir_, name, "negative extent " + shape_str(extent));
  at::Tensor out = at::empty(extent, at::TensorOptions().dtype(h5::scalar_type(any->dtype)));
  auto ok = read_into(name, out, offset);
  if (!ok) return ok.error();
  return out;
}

Result<bool> Reader::read_into(const std::string& name, at::Tensor& dst, const std::vector<int64_t>& offset) const {
  const std::vector<int64_t> extent = dst.sizes().vec();
  std::vector<std::pair<const ShardEntry*, const DatasetEntry*>> parts;
  for (const auto& s : manifest_.shards)
    for (const auto& d : s.datasets)
      if (!d.rank_scoped && d.name == name) parts.push_back({&s, &d});
  if (parts.empty()) return err(dir_, name, "no tensor '" + name + "' in this checkpoint");
  const DatasetEntry& first = *parts.front().second;
  if (h5::dtype_name(dst.scalar_type()) != first.dtype || !dst.is_contiguous() || !dst.device().is_cpu())
    return err(dir_, name, "'" + name + "' is " + first.dtype + "; read it into a contiguous CPU tensor of that dtype");
  if (offset.size() != first.global_shape.size() || extent.size() != offset.size())
    return err(dir_, name, "'" + name + "' has global shape " + shape_str(first.global_shape) +
                               "; asked for offset " + shape_str(offset) + " extent " + shape_str(extent));
  for (size_t i = 0; i < offset.size(); ++i)
    if (offset[i] < 0 || offset[i] + extent[i] > first.global_shape[i])
      return err(dir_, name, "box at " + shape_str(offset) + " extent " + shape_str(extent) +
                                 " lies outside global shape " + shape_str(first.global_shape));

  h5::Handle type = h5::file_type(first.dtype);
  const size_t n = offset.size();
  int64_t covered = 0;
  for (const auto& [shard, d] : parts) {
    std::vector<hsize_t> file_start(n), mem_start(n), count(n);
    bool empty = false, whole_part = true;
    for (size_t i = 0; i < n; ++i) {
      const int64_t lo = std::max(offset[i], d->offset[i]);
      const int64_t hi = std::min(offset[i] + extent[i], d->offset[i] + d->extent[i]);
      if (hi <= lo) empty = true;
      file_start[i] = static_cast<hsize_t>(lo - d->offset[i]);
      mem_start[i] = static_cast<hsize_t>(lo - offset[i]);
      count[i] = static_cast<hsize_t>(std::max<int64_t>(hi - lo, 0));
      whole_part = whole_part && lo == d->offset[i] && hi == d->offset[i] + d->extent[i];
    }
    if (empty) continue;
    auto file = file_of(shard->rank);
    if (!file) return file.error();
    const std::string& path = (*file)->path;
    h5::Handle ds(H5Dopen2((*file)->id.get(), name.c_str(), H5P_DEFAULT));
    if (!ds.valid()) return err(path, name, "cannot open '" + name + "': " + h5::last_error());
    int64_t part_volume = 1;
    for (auto c : count) part_volume *= static_cast<int64_t>(c);
    covered += part_volume;

    const bool same_box = whole_part && offset == d->offset && extent == d->extent;
    if (same_box || whole_part) {
      // The whole dataset is read, so its checksum can be checked on the way.
      at::Tensor buf = same_box ? dst : at::empty(d->extent, dst.options());
      // Raw (raw_read.h) when HDF5 would only copy the bytes: several times faster cold.
      const auto raw_at = d->bytes > 0 ? raw_offset(ds.get(), type.get(), d->bytes) : std::nullopt;
      uint64_t sum = 0;
      if (raw_at) {
        const std::string why = raw_->read((*file)->fd, (*file)->direct, *raw_at, d->bytes, buf.data_ptr(), &sum);
        if (!why.empty()) return err(path, name, "reading '" + name + "' failed: " + why);
      } else {
        if (d->bytes > 0 && H5Dread(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data_ptr()) < 0)
          return err(path, name, "reading '" + name + "' failed: " + h5::last_error());
        sum = xxh3_64(buf.data_ptr(), d->bytes);
      }
      if (sum != d->xxh3)
        return err(path, name, "dataset '" + name + "' fails its checksum (data changed on disk)");
      if (!same_box) {
        at::Tensor region = dst;
        for (size_t i = 0; i < n; ++i)
          region = region.narrow(static_cast<int64_t>(i), static_cast<int64_t>(mem_start[i]), static_cast<int64_t>(count[i]));
        region.copy_(buf);
      }
      continue;
    }
    h5::Handle fspace(H5Dget_space(ds.get()));
    std::vector<hsize_t> mem_dims(extent.begin(), extent.end());
    h5::Handle mspace(H5Screate_simple(static_cast<int>(n), mem_dims.data(), nullptr));
    if (H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, file_start.data(), nullptr, count.data(), nullptr) < 0 ||
        H5Sselect_hyperslab(mspace.get(), H5S_SELECT_SET, mem_start.data(), nullptr, count.data(), nullptr) < 0 ||
        H5Dread(ds.get(), type.get(), mspace.get(), fspace.get(), H5P_DEFAULT, dst.data_ptr()) < 0)
      return err(path, name, "reading part of '" + name + "' failed: " + h5::last_error());
  }
  if (covered != volume(extent))
    return err(dir_, name, "the shards hold only " + std::to_string(covered) + " of the " + std::to_string(volume(extent)) +
                               " elements of '" + name + "' at " + shape_str(offset) + " extent " + shape_str(extent));
  return true;
}

Result<at::Tensor> Reader::read_rank_state(int rank, const std::string& name) const {
  for (const auto& s : manifest_.shards) {
    if (s.rank != rank) continue;
    for (const auto& d : s.datasets) {
      if (!d.rank_scoped || d.name != name) continue;
      auto file = file_of(rank);
      if (!file) return file.error();
      h5::Handle ds(H5Dopen2((*file)->id.get(), name.c_str(), H5P_DEFAULT));
      h5::Handle type = h5::file_type(d.dtype);
      at::Tensor out = at::empty(d.extent, at::TensorOptions().dtype(h5::scalar_type(d.dtype)));
      if (!ds.valid() || (d.bytes > 0 && H5Dread(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data_ptr()) < 0))
        return err((*file)->path, name, "reading '" + name + "' failed: " + h5::last_error());
      if (xxh3_64(out.data_ptr(), d.bytes) != d.xxh3)
        return err((*file)->path, name, "dataset '" + name + "' fails its checksum (data changed on disk)");
      return out;
    }
  }
  return err(dir_, name, "rank " + std::to_string(rank) + " saved no state '" + name + "'");
}

namespace {
template <class T>
Result<T> read_scalar(const std::string& path, hid_t file, const std::string& group, const std::string& key,
                      hid_t mem_type, H5T_class_t want) {
  const std::string where = group + ":" + key;
  h5::Handle g(H5Oopen(file, group.empty() ? "/" : group.c_str(), H5P_DEFAULT));
  h5::Handle a(g.valid() && H5Aexists(g.get(), key.c_str()) > 0 ? H5Aopen(g.get(), key.c_str(), H5P_DEFAULT) : -1);
  if (!a.valid()) return err(path, where, "no scalar '" + where + "'");
  h5::Handle type(H5Aget_type(a.get()));
  if (H5Tget_class(type.get()) != want) return err(path, where, "scalar '" + where + "' has another type");
  T v{};
  if (H5Aread(a.get(), mem_type, &v) < 0) return err(path, where, "reading '" + where + "' failed: " + h5::last_error());
  return v;
}
}  // namespace

Result<int64_t> Reader::scalar_int(int rank, const std::string& group, const std::string& key) const {
  auto file = file_of(rank);
  if (!file) return file.error();
  return read_scalar<int64_t>((*file)->path, (*file)->id.get(), group, key, H5T_NATIVE_INT64, H5T_INTEGER);
}

Result<double> Reader::scalar_double(int rank, const std::string& group, const std::string& key) const {
  auto file = file_of(rank);
  if (!file) return file.error();
  return read_scalar<double>((*file)->path, (*file)->id.get(), group, key, H5T_NATIVE_DOUBLE, H5T_FLOAT);
}

}  // namespace scaleguard::ckpt
