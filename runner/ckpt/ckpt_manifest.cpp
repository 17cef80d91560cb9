#include "scaleguard/ckpt_manifest.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "scaleguard/checksum.h"

namespace scaleguard::ckpt {
namespace fs = std::filesystem;
using nlohmann::json;

size_t dtype_size(const std::string& d) {
  static const std::map<std::string, size_t> sizes = {
      {"float64", 8}, {"float32", 4}, {"float16", 2}, {"bfloat16", 2}, {"int64", 8},
      {"int32", 4},   {"int16", 2},   {"int8", 1},    {"uint8", 1},    {"bool", 1}};
  auto it = sizes.find(d);
  return it == sizes.end() ? 0 : it->second;
}

std::string step_dir_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%08lld", static_cast<long long>(step));
  return buf;
}

std::string shard_file_name(int rank) { return "shard-" + std::to_string(rank) + ".h5"; }

std::string manifest_to_json(const Manifest& m) {
  json shards = json::array();
  for (const auto& s : m.shards) {
    json ds = json::array();
    for (const auto& d : s.datasets) {
      ds.push_back({{"name", d.name}, {"dtype", d.dtype},
                    {"scope", d.rank_scoped ? "rank" : "global"},
                    {"global_shape", d.global_shape}, {"offset", d.offset},
                    {"extent", d.extent}, {"bytes", d.bytes}, {"xxh3", hex64(d.xxh3)}});
    }
    shards.push_back({{"rank", s.rank}, {"file", s.file}, {"bytes", s.bytes},
                      {"xxh3", hex64(s.xxh3)}, {"datasets", std::move(ds)}});
  }
  json j = {{"format", "scaleguard-checkpoint"},
            {"format_version", m.format_version},
            {"step", m.step},
            {"created", m.created},
            {"code_version", m.code_version},
            {"strategy", m.strategy},
            {"tp", m.tp}, {"pp", m.pp}, {"dp", m.dp},
            {"world_size", m.world_size},
            {"model", {{"name", m.model_name}, {"config_hash", m.config_hash}}},
            {"shards", std::move(shards)}};
  if (!m.model_config.empty()) j["model"]["config"] = m.model_config;
  if (m.tier != "shared") j["tier"] = m.tier;
  if (!m.partners.empty()) j["partners"] = m.partners;
  return j.dump(1) + "\n";
}

namespace {

// Field access that turns a missing or mistyped field into a clear error instead of a throw.
struct Fields {
  const std::string& origin;
  std::string first_error;

  template <class T>
  T get(const json& obj, const char* key, const std::string& where) {
    if (!first_error.empty()) return T{};
    auto it = obj.find(key);
    if (it == obj.end()) {
      first_error = where + ": missing field '" + key + "'";
      return T{};
    }
    try {
      return it->template get<T>();
    } catch (const json::exception&) {
      first_error = where + ": field '" + key + "' has the wrong type";
      return T{};
    }
  }
};

std::string shape_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// Checks one dataset's own numbers; returns the problem or "".
std::string check_dataset(const DatasetEntry& d) {
  const size_t es = dtype_size(d.dtype);
  if (es == 0) return "unknown dtype '" + d.dtype + "'";
  if (d.global_shape.size() != d.offset.size() || d.offset.size() != d.extent.size())
    return "global_shape " + shape_str(d.global_shape) + ", offset " + shape_str(d.offset) +
           " and extent " + shape_str(d.extent) + " differ in rank";
  uint64_t elements = 1;
  for (size_t i = 0; i < d.extent.size(); ++i) {
    if (d.global_shape[i] < 0 || d.offset[i] < 0 || d.extent[i] < 0 ||
        d.offset[i] + d.extent[i] > d.global_shape[i])
      return "slice offset " + shape_str(d.offset) + " extent " + shape_str(d.extent) +
             " lies outside global_shape " + shape_str(d.global_shape);
    elements *= static_cast<uint64_t>(d.extent[i]);
  }
  if (d.bytes != elements * es)
    return "bytes " + std::to_string(d.bytes) + " but extent " + shape_str(d.extent) + " of " +
           d.dtype + " is " + std::to_string(elements * es);
  return "";
}

bool overlap(const DatasetEntry& a, const DatasetEntry& b) {
  for (size_t i = 0; i < a.offset.size(); ++i) {
    if (a.offset[i] + a.extent[i] <= b.offset[i] || b.offset[i] + b.extent[i] <= a.offset[i])
      return false;
  }
  return true;
}

}  // namespace

Result<Manifest> parse_manifest(const std::string& text, const std::string& origin) {
  auto fail = [&](const std::string& why) {
    return Error{origin + ": " + why, origin, 0, "", "the checkpoint is damaged; use an older one"};
  };
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return fail("not valid JSON");
  Fields f{origin, ""};
  Manifest m;
  const auto format = f.get<std::string>(j, "format", "manifest");
  m.format_version = f.get<int>(j, "format_version", "manifest");
  m.step = f.get<int64_t>(j, "step", "manifest");
  m.created = f.get<std::string>(j, "created", "manifest");
  m.code_version = f.get<std::string>(j, "code_version", "manifest");
  m.strategy = f.get<std::string>(j, "strategy", "manifest");
  m.tp = f.get<int>(j, "tp", "manifest");
  m.pp = f.get<int>(j, "pp", "manifest");
  m.dp = f.get<int>(j, "dp", "manifest");
  m.world_size = f.get<int>(j, "world_size", "manifest");
  const auto model = f.get<json>(j, "model", "manifest");
  m.model_name = f.get<std::string>(model, "name", "model");
  m.config_hash = f.get<std::string>(model, "config_hash", "model");
  if (model.is_object() && model.contains("config")) {
    const json& c = model["config"];
    if (!c.is_object()) return fail("model.config is not an object");
    for (auto it = c.begin(); it != c.end(); ++it) {
      if (!it.value().is_string()) return fail("model.config '" + it.key() + "' is not a string");
      m.model_config[it.key()] = it.value().get<std::string>();
    }
  }
  const auto shards = f.get<json>(j, "shards", "manifest");
  if (!f.first_error.empty()) return fail(f.first_error);
  if (j.contains("tier")) {
    if (!j["tier"].is_string() || (j["tier"] != "shared" && j["tier"] != "local"))
      return fail("tier must be \"shared\" or \"local\"");
    m.tier = j["tier"].get<std::string>();
  }
  if (j.contains("partners")) {
    const json& p = j["partners"];
    if (!p.is_array()) return fail("partners must be an array of ranks");
    for (const auto& r : p) {
      if (!r.is_number_integer()) return fail("partners must be an array of ranks");
      m.partners.push_back(r.get<int>());
    }
  }
  if (format != "scaleguard-checkpoint") return fail("format is '" + format + "', not a scaleguard checkpoint");
  if (m.format_version != kFormatVersion)
    return fail("format_version " + std::to_string(m.format_version) + " is not supported (this build reads " +
                std::to_string(kFormatVersion) + ")");
  if (m.step < 0 || m.world_size < 1 || m.tp < 1 || m.pp < 1 || m.dp < 1)
    return fail("step, world_size, tp, pp, dp must be positive");
  if (!shards.is_array() || shards.empty()) return fail("'shards' must be a non-empty array");

  std::map<std::string, std::vector<const DatasetEntry*>> by_name;
  for (const auto& sj : shards) {
    ShardEntry s;
    s.rank = f.get<int>(sj, "rank", "shard");
    s.file = f.get<std::string>(sj, "file", "shard");
    s.bytes = f.get<uint64_t>(sj, "bytes", "shard " + s.file);
    const auto sum = f.get<std::string>(sj, "xxh3", "shard " + s.file);
    const auto datasets = f.get<json>(sj, "datasets", "shard " + s.file);
    if (!f.first_error.empty()) return fail(f.first_error);
    if (s.file != shard_file_name(s.rank))
      return fail("shard of rank " + std::to_string(s.rank) + " is named '" + s.file + "', expected '" +
                  shard_file_name(s.rank) + "'");
    auto parsed = parse_hex64(sum);
    if (!parsed) return fail("shard " + s.file + ": xxh3 '" + sum + "' is not 16 hex digits");
    s.xxh3 = *parsed;
    if (!datasets.is_array()) return fail("shard " + s.file + ": 'datasets' must be an array");
    for (const auto& dj : datasets) {
      DatasetEntry d;
      d.name = f.get<std::string>(dj, "name", "shard " + s.file + " dataset");
      const std::string where = s.file + " dataset '" + d.name + "'";
      d.dtype = f.get<std::string>(dj, "dtype", where);
      const auto scope = f.get<std::string>(dj, "scope", where);
      d.global_shape = f.get<std::vector<int64_t>>(dj, "global_shape", where);
      d.offset = f.get<std::vector<int64_t>>(dj, "offset", where);
      d.extent = f.get<std::vector<int64_t>>(dj, "extent", where);
      d.bytes = f.get<uint64_t>(dj, "bytes", where);
      const auto dsum = f.get<std::string>(dj, "xxh3", where);
      if (!f.first_error.empty()) return fail(f.first_error);
      if (scope != "global" && scope != "rank") return fail(where + ": scope '" + scope + "' is not global|rank");
      d.rank_scoped = scope == "rank";
      auto dparsed = parse_hex64(dsum);
      if (!dparsed) return fail(where + ": xxh3 '" + dsum + "' is not 16 hex digits");
      d.xxh3 = *dparsed;
      if (auto why = check_dataset(d); !why.empty()) return fail(where + ": " + why);
      s.datasets.push_back(std::move(d));
    }
    m.shards.push_back(std::move(s));
  }
  std::sort(m.shards.begin(), m.shards.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  for (size_t i = 1; i < m.shards.size(); ++i)
    if (m.shards[i].rank == m.shards[i - 1].rank)
      return fail("rank " + std::to_string(m.shards[i].rank) + " has two shards");
  if (!m.partners.empty() && static_cast<int>(m.partners.size()) != m.world_size)
    return fail("partners lists " + std::to_string(m.partners.size()) + " ranks, world_size is " +
                std::to_string(m.world_size));
  for (int p : m.partners)
    if (p < -1 || p >= m.world_size) return fail("partner rank " + std::to_string(p) + " outside world_size");
  // Shared tier: no two slices of a tensor overlap anywhere. Local tier: each shard is its
  // rank's whole state (replicas not split), so only slices within one shard are checked.
  std::map<std::pair<int, std::string>, std::vector<const DatasetEntry*>> by_shard;
  for (const auto& s : m.shards) {
    if (s.rank < 0 || s.rank >= m.world_size)
      return fail("shard rank " + std::to_string(s.rank) + " outside world_size " + std::to_string(m.world_size));
    for (const auto& d : s.datasets)
      if (!d.rank_scoped) by_name[d.name].push_back(&d), by_shard[{s.rank, d.name}].push_back(&d);
  }
  if (m.tier == "local") {
    for (const auto& [key, parts] : by_shard)
      for (size_t i = 0; i < parts.size(); ++i)
        for (size_t k = 0; k < i; ++k)
          if (overlap(*parts[i], *parts[k]))
            return fail("dataset '" + key.second + "' of rank " + std::to_string(key.first) +
                        ": slices at offsets " + shape_str(parts[k]->offset) + " and " +
                        shape_str(parts[i]->offset) + " overlap");
  }
  // Slices of one tensor must agree on what the tensor is and must not overlap, or a reader
  // assembling a slice could not tell which bytes are right.
  for (const auto& [name, parts] : by_name) {
    for (size_t i = 0; i < parts.size(); ++i) {
      if (parts[i]->dtype != parts[0]->dtype || parts[i]->global_shape != parts[0]->global_shape)
        return fail("dataset '" + name + "' has different dtype or global_shape in different shards");
      for (size_t k = 0; k < i && m.tier != "local"; ++k)
        if (overlap(*parts[i], *parts[k]))
          return fail("dataset '" + name + "': slices at offsets " + shape_str(parts[k]->offset) + " and " +
                      shape_str(parts[i]->offset) + " overlap");
    }
  }
  return m;
}

Result<Manifest> read_manifest(const std::string& dir) {
  const std::string path = (fs::path(dir) / kManifestName).string();
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{path + ": cannot read (" + std::strerror(errno) + ")", path, 0, "", ""};
  std::ostringstream text;
  text << in.rdbuf();
  return parse_manifest(text.str(), path);
}

std::vector<Problem> verify_files(const std::string& dir, const Manifest& m) {
  std::vector<Problem> problems;
  for (const auto& s : m.shards) {
    const std::string path = (fs::path(dir) / s.file).string();
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      problems.push_back({path, std::string("missing (") + std::strerror(errno) + ")"});
      continue;
    }
    if (static_cast<uint64_t>(st.st_size) != s.bytes) {
      problems.push_back({path, "size " + std::to_string(st.st_size) + " bytes, manifest says " +
                                    std::to_string(s.bytes) + " (truncated or overwritten)"});
      continue;
    }
    auto sum = xxh3_file(path);
    if (!sum) {
      problems.push_back({path, sum.error().message});
    } else if (*sum != s.xxh3) {
      problems.push_back({path, "checksum xxh3 " + hex64(*sum) + ", manifest says " + hex64(s.xxh3) +
                                    " (bytes changed on disk)"});
    }
  }
  return problems;
}

const char* status_name(Status s) {
  switch (s) {
    case Status::committed: return "committed";
    case Status::partial: return "partial";
    case Status::broken: return "broken";
  }
  return "?";
}

namespace {
// "step-<digits>" with an optional ".partial" suffix.
bool parse_step_name(const std::string& name, int64_t& step, bool& partial) {
  std::string base = name;
  partial = false;
  const std::string suffix = kPartialSuffix;
  if (base.size() > suffix.size() && base.compare(base.size() - suffix.size(), suffix.size(), suffix) == 0) {
    base.resize(base.size() - suffix.size());
    partial = true;
  }
  if (base.rfind("step-", 0) != 0 || base.size() == 5 || base.size() > 5 + 18) return false;
  step = 0;
  for (size_t i = 5; i < base.size(); ++i) {
    if (base[i] < '0' || base[i] > '9') return false;
    step = step * 10 + (base[i] - '0');
  }
  return true;
}
}  // namespace

Result<std::vector<Listed>> list_checkpoints(const std::string& root) {
  std::error_code ec;
  fs::directory_iterator it(root, ec);
  if (ec) return Error{root + ": cannot list (" + ec.message() + ")", root, 0, "", ""};
  std::vector<Listed> out;
  for (const auto& entry : it) {
    Listed l;
    l.name = entry.path().filename().string();
    bool partial = false;
    if (!entry.is_directory(ec) || !parse_step_name(l.name, l.step, partial)) continue;
    l.path = entry.path().string();
    for (const auto& f : fs::directory_iterator(entry.path(), ec))
      if (f.is_regular_file(ec)) l.bytes += f.file_size(ec);
    struct stat st {};
    if (::stat(l.path.c_str(), &st) == 0) l.mtime = st.st_mtime;
    if (partial) {
      l.status = Status::partial;
      l.why = "save did not finish";
    } else if (auto m = read_manifest(l.path); !m) {
      l.status = Status::broken;
      l.why = m.error().message;
    } else if (m->step != l.step) {
      l.status = Status::broken;
      l.why = "manifest says step " + std::to_string(m->step);
    } else {
      l.status = Status::committed;
    }
    out.push_back(std::move(l));
  }
  std::sort(out.begin(), out.end(), [](const Listed& a, const Listed& b) {
    return a.step != b.step ? a.step < b.step : a.name < b.name;
  });
  return out;
}

std::string read_latest(const std::string& root) {
  std::ifstream in(fs::path(root) / kLatestName);
  std::string name;
  std::getline(in, name);
  return name;
}

}  // namespace scaleguard::ckpt
