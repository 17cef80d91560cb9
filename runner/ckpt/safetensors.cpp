// safetensors read and write: see include/scaleguard/safetensors.h for the rules enforced.
#include "scaleguard/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

namespace scaleguard::safetensors {
using json = nlohmann::json;

namespace {

Error fail(const std::string& origin, const std::string& what, const std::string& hint = "") {
  return Error{what, origin, 0, "", hint};  // str(): "ORIGIN: WHAT"
}

bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) {
  if (a != 0 && b > UINT64_MAX / a) return true;
  *out = a * b;
  return false;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

// A file name an index may name: a plain name in the index's directory.
bool plain_name(const std::string& f) {
  return !f.empty() && f != "." && f != ".." && f.find('/') == std::string::npos &&
         f.find('\0') == std::string::npos && f.size() < 256;
}

Result<std::string> read_small_file(const std::string& path, uint64_t cap) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return fail(path, "not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > cap) {
    ::close(fd);
    return fail(path, "is " + std::to_string(st.st_size) + " bytes, more than the " + std::to_string(cap) + " allowed");
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    ssize_t n = ::pread(fd, text.data() + got, text.size() - got, static_cast<off_t>(got));
    if (n <= 0) {
      ::close(fd);
      return fail(path, n < 0 ? std::string("read failed: ") + std::strerror(errno) : "file shrank while reading");
    }
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  return text;
}

// JSON parse that refuses a key given twice in the top-level object (nlohmann keeps the last).
bool parse_unique(const std::string& text, json& out, std::string& dup) {
  std::set<std::string> seen;
  auto cb = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && dup.empty()) {
      const std::string& k = parsed.get_ref<const std::string&>();
      if (!seen.insert(k).second) dup = k;
    }
    return true;
  };
  out = json::parse(text, cb, /*allow_exceptions=*/false);
  return !out.is_discarded();
}

}  // namespace

size_t dtype_size(const std::string& d) {
  static const std::map<std::string, size_t> sizes{
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
      {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8}};
  auto it = sizes.find(d);
  return it == sizes.end() ? 0 : it->second;
}

uint64_t TensorInfo::numel() const {
  uint64_t n = 1;
  for (int64_t s : shape) n *= static_cast<uint64_t>(s);
  return n;
}

const TensorInfo* Header::find(const std::string& name) const {
  auto it = std::lower_bound(tensors.begin(), tensors.end(), name,
                             [](const TensorInfo& t, const std::string& n) { return t.name < n; });
  return it != tensors.end() && it->name == name ? &*it : nullptr;
}

Result<Header> parse_header(const std::string& text, uint64_t header_len, uint64_t file_size, const std::string& origin) {
  Header h;
  h.data_start = 8 + header_len;
  const uint64_t data_bytes = file_size - h.data_start;  // the caller checked header_len <= file_size - 8
  if (text.empty() || text[0] != '{') return fail(origin, "the header does not start with '{' (not a safetensors file?)");
  json j;
  std::string dup;
  if (!parse_unique(text, j, dup) || !j.is_object())
    return fail(origin, "the header is not a valid JSON object (a damaged or non-safetensors file)");
  if (!dup.empty()) return fail(origin, "tensor '" + dup + "': given twice in the header");
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const json& e = it.value();
    if (name == "__metadata__") {
      if (!e.is_object()) return fail(origin, "__metadata__ is not an object");
      for (auto m = e.begin(); m != e.end(); ++m) {
        if (!m.value().is_string()) return fail(origin, "__metadata__ '" + m.key() + "' is not a string");
        h.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + name + "': ";
    if (!e.is_object()) return fail(origin, where + "entry is not an object");
    for (auto k = e.begin(); k != e.end(); ++k)
      if (k.key() != "dtype" && k.key() != "shape" && k.key() != "data_offsets")
        return fail(origin, where + "unknown field '" + k.key() + "'");
    auto dt = e.find("dtype"), sh = e.find("shape"), off = e.find("data_offsets");
    if (dt == e.end() || !dt->is_string()) return fail(origin, where + "no string 'dtype'");
    if (sh == e.end() || !sh->is_array()) return fail(origin, where + "no array 'shape'");
    if (off == e.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned())
      return fail(origin, where + "'data_offsets' is not [begin, end] of two non-negative integers");
    TensorInfo t;
    t.name = name;
    t.dtype = dt->get<std::string>();
    const size_t es = dtype_size(t.dtype);
    if (es == 0) return fail(origin, where + "unknown dtype '" + t.dtype + "'");
    uint64_t bytes = es;
    for (const json& d : *sh) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
        return fail(origin, where + "shape " + sh->dump() + " is not a list of non-negative integers");
      const uint64_t v = d.get<uint64_t>();
      t.shape.push_back(static_cast<int64_t>(v));
      if (mul_overflows(bytes, v, &bytes)) return fail(origin, where + "shape " + sh->dump() + " overflows 64 bits");
    }
    t.begin = (*off)[0].get<uint64_t>();
    t.end = (*off)[1].get<uint64_t>();
    if (t.begin > t.end)
      return fail(origin, where + "data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) +
                              "]: begin after end");
    if (t.end > data_bytes)
      return fail(origin, where + "data_offsets end " + std::to_string(t.end) + " lies past the end of the data (" +
                              std::to_string(data_bytes) + " bytes; a truncated file?)");
    if (t.end - t.begin != bytes)
      return fail(origin, where + "data_offsets hold " + std::to_string(t.end - t.begin) + " bytes but " + t.dtype +
                              " " + shape_text(t.shape) + " needs " + std::to_string(bytes));
    h.tensors.push_back(std::move(t));
  }
  // The extents tile the data: sorted by begin, no overlap, no gap, nothing after the last.
  std::vector<const TensorInfo*> by_begin;
  for (const auto& t : h.tensors) by_begin.push_back(&t);
  std::sort(by_begin.begin(), by_begin.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t at = 0;
  const TensorInfo* prev = nullptr;
  for (const TensorInfo* t : by_begin) {
    if (t->begin < at)
      return fail(origin, "tensor '" + t->name + "': data_offsets [" + std::to_string(t->begin) + ", " +
                              std::to_string(t->end) + "] overlap tensor '" + prev->name + "'");
    if (t->begin > at)
      return fail(origin, "tensor '" + t->name + "': " + std::to_string(t->begin - at) + " bytes before it belong to no tensor "
                          "(the data must be fully covered)");
    at = t->end;
    prev = t;
  }
  if (at != data_bytes)
    return fail(origin, std::to_string(data_bytes - at) + " bytes after the last tensor belong to no tensor "
                        "(the data must be fully covered)");
  std::sort(h.tensors.begin(), h.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
  return h;
}

Result<Header> parse_prefix(const uint8_t* bytes, size_t size, uint64_t file_size, const std::string& origin) {
  if (file_size < 8 || size < 8) return fail(origin, "shorter than the 8-byte header length (not a safetensors file)");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  if (n > kMaxHeaderBytes)
    return fail(origin, "header length " + std::to_string(n) + " is more than the " + std::to_string(kMaxHeaderBytes) +
                            " bytes allowed (not a safetensors file?)");
  if (n > file_size - 8)
    return fail(origin, "header length " + std::to_string(n) + " runs past the end of the file (" +
                            std::to_string(file_size) + " bytes; truncated or not a safetensors file)");
  if (n > size - 8) return fail(origin, "header not fully read");
  return parse_header(std::string(reinterpret_cast<const char*>(bytes) + 8, static_cast<size_t>(n)), n, file_size, origin);
}

Result<std::shared_ptr<File>> File::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return fail(path, "not a regular file");
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  std::shared_ptr<File> f(new File());
  f->path_ = path;
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      return fail(path, std::string("cannot map: ") + std::strerror(errno));
    }
    f->base_ = static_cast<const uint8_t*>(p);
    f->mapped_ = size;
  }
  ::close(fd);
  auto h = parse_prefix(f->base_, f->mapped_, size, path);
  if (!h) return h.error();
  f->header_ = std::move(h).value();
  return f;
}

File::~File() {
  if (base_) ::munmap(const_cast<uint8_t*>(base_), mapped_);
}

Result<std::map<std::string, std::string>> parse_index(const std::string& text, const std::string& origin) {
  json j;
  std::string dup;
  if (!parse_unique(text, j, dup) || !j.is_object()) return fail(origin, "not a valid JSON object");
  auto wm = j.find("weight_map");
  if (wm == j.end() || !wm->is_object()) return fail(origin, "no 'weight_map' object");
  std::map<std::string, std::string> out;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it.value().is_string()) return fail(origin, "weight_map: tensor '" + it.key() + "': the file is not a string");
    const std::string file = it.value().get<std::string>();
    if (!plain_name(file))
      return fail(origin, "weight_map: tensor '" + it.key() + "': file '" + file +
                              "' is not a plain file name in the index's directory (no '/', '.' or '..')");
    out[it.key()] = file;
  }
  if (out.empty()) return fail(origin, "weight_map is empty");
  return out;
}

Result<Weights> Weights::open(const std::string& what) {
  Weights w;
  w.origin_ = what;
  struct stat st {};
  if (::stat(what.c_str(), &st) != 0) return fail(what, std::string("cannot open: ") + std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) {
    auto f = File::open(what);
    if (!f) return f.error();
    w.files_.push_back(*f);
    for (const auto& t : (*f)->header().tensors) w.entries_[t.name] = Entry{f->get(), &t};
    return w;
  }
  const std::string index = what + "/model.safetensors.index.json";
  if (::stat(index.c_str(), &st) != 0) {
    const std::string single = what + "/model.safetensors";
    if (::stat(single.c_str(), &st) != 0)
      return fail(what, "holds neither model.safetensors nor model.safetensors.index.json");
    auto r = open(single);
    if (r) r.value().origin_ = single;
    return r;
  }
  w.origin_ = index;
  auto text = read_small_file(index, kMaxHeaderBytes);
  if (!text) return text.error();
  auto map = parse_index(*text, index);
  if (!map) return map.error();
  std::map<std::string, const File*> by_file;
  for (const auto& [name, file] : *map) {
    if (by_file.count(file)) continue;
    auto f = File::open(what + "/" + file);
    if (!f) return f.error();
    w.files_.push_back(*f);
    by_file[file] = f->get();
  }
  for (const auto& [name, file] : *map) {
    const File* f = by_file.at(file);
    const TensorInfo* t = f->header().find(name);
    if (!t) return fail(f->path(), "tensor '" + name + "': the index puts it in this file, which does not hold it");
    w.entries_[name] = Entry{f, t};
  }
  for (const auto& [file, f] : by_file)
    for (const auto& t : f->header().tensors) {
      auto it = map->find(t.name);
      if (it == map->end() || it->second != file)
        return fail(f->path(), "tensor '" + t.name + "': in this file but the index " +
                                   (it == map->end() ? std::string("does not list it") : "puts it in " + it->second));
    }
  return w;
}

std::vector<std::string> Weights::names() const {
  std::vector<std::string> out;
  for (const auto& [n, e] : entries_) out.push_back(n);
  return out;
}

const Weights::Entry* Weights::find(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

std::map<std::string, std::string> Weights::metadata() const {
  return files_.empty() ? std::map<std::string, std::string>{} : files_.front()->header().metadata;
}

// ---- writing ----

uint64_t TensorSpec::bytes() const {
  uint64_t n = dtype_size(dtype);
  for (int64_t s : shape) n *= static_cast<uint64_t>(s);
  return n;
}

namespace {

bool write_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

std::string dir_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

Result<bool> write_atomic(const std::string& path, const std::function<std::string(int fd)>& body) {
  const std::string tmp = dir_of(path) + "/." + path.substr(path.rfind('/') + 1) + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return fail(tmp, std::string("cannot create: ") + std::strerror(errno));
  std::string why = body(fd);
  if (why.empty() && ::fsync(fd) != 0) why = std::string("fsync failed: ") + std::strerror(errno);
  if (::close(fd) != 0 && why.empty()) why = std::string("close failed: ") + std::strerror(errno);
  if (why.empty() && ::rename(tmp.c_str(), path.c_str()) != 0) why = std::string("rename failed: ") + std::strerror(errno);
  if (!why.empty()) {
    ::unlink(tmp.c_str());
    return fail(path, why);
  }
  fsync_dir(dir_of(path));
  return true;
}

}  // namespace

Result<uint64_t> write_file(const std::string& path, std::vector<TensorSpec> tensors, const Fetch& fetch,
                            const std::map<std::string, std::string>& metadata) {
  std::sort(tensors.begin(), tensors.end(), [](const TensorSpec& a, const TensorSpec& b) { return a.name < b.name; });
  json header = json::object();
  json meta = json::object();
  meta["format"] = "pt";
  for (const auto& [k, v] : metadata) meta[k] = v;
  header["__metadata__"] = meta;
  uint64_t at = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorSpec& t = tensors[i];
    if (i > 0 && tensors[i - 1].name == t.name) return fail(path, "tensor '" + t.name + "' given twice");
    if (dtype_size(t.dtype) == 0) return fail(path, "tensor '" + t.name + "': unknown dtype '" + t.dtype + "'");
    if (t.name == "__metadata__") return fail(path, "a tensor may not be called __metadata__");
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {at, at + t.bytes()}}};
    at += t.bytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  auto ok = write_atomic(path, [&](int fd) -> std::string {
    if (!write_all(fd, len, 8) || !write_all(fd, text.data(), text.size()))
      return std::string("write failed: ") + std::strerror(errno);
    std::vector<uint8_t> buf;
    for (const TensorSpec& t : tensors) {
      buf.assign(static_cast<size_t>(t.bytes()), 0);
      std::string why = fetch(t, buf);
      if (!why.empty()) return "tensor '" + t.name + "': " + why;
      if (buf.size() != t.bytes()) return "tensor '" + t.name + "': the source gave the wrong number of bytes";
      if (!write_all(fd, buf.data(), buf.size())) return std::string("write failed: ") + std::strerror(errno);
    }
    return "";
  });
  if (!ok) return ok.error();
  return 8 + text.size() + at;
}

Result<std::vector<std::string>> write_model(const std::string& dir, std::vector<TensorSpec> tensors,
                                             const Fetch& fetch, uint64_t max_shard_bytes,
                                             const std::map<std::string, std::string>& metadata) {
  std::sort(tensors.begin(), tensors.end(), [](const TensorSpec& a, const TensorSpec& b) { return a.name < b.name; });
  uint64_t total = 0;
  for (const auto& t : tensors) total += t.bytes();
  std::vector<std::vector<TensorSpec>> shards(1);
  uint64_t in_shard = 0;
  for (auto& t : tensors) {
    if (!shards.back().empty() && in_shard + t.bytes() > max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    in_shard += t.bytes();
    shards.back().push_back(std::move(t));
  }
  if (shards.size() == 1) {
    auto w = write_file(dir + "/model.safetensors", std::move(shards[0]), fetch, metadata);
    if (!w) return w.error();
    ::unlink((dir + "/model.safetensors.index.json").c_str());  // an older sharded export would win over it
    return std::vector<std::string>{"model.safetensors"};
  }
  std::vector<std::string> files;
  json map = json::object();
  char name[64];
  for (size_t i = 0; i < shards.size(); ++i) {
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
    for (const auto& t : shards[i]) map[t.name] = name;
    auto w = write_file(dir + "/" + name, std::move(shards[i]), fetch, metadata);
    if (!w) return w.error();
    files.push_back(name);
  }
  const std::string index = json{{"metadata", {{"total_size", total}}}, {"weight_map", map}}.dump(2) + "\n";
  auto ok = write_atomic(dir + "/model.safetensors.index.json", [&](int fd) -> std::string {
    return write_all(fd, index.data(), index.size()) ? "" : std::string("write failed: ") + std::strerror(errno);
  });
  if (!ok) return ok.error();
  files.push_back("model.safetensors.index.json");
  return files;
}

}  // namespace scaleguard::safetensors
