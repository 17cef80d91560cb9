// NCCL/EFA environment: node detection, versioned profiles, never-override merge.
#include "scaleguard/nccl_env.h"

#include <fnmatch.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include <nlohmann/json.hpp>

#include "scaleguard/ini.h"

namespace fs = std::filesystem;

namespace scaleguard {
namespace {

constexpr const char* kOfiPlaceholder = "${OFI_NCCL_DIR}";
constexpr std::size_t kMaxConfigBytes = 1 << 20;  // fleet configs are a few KiB

std::string join_root(const std::string& root, const std::string& rel) {
  return (fs::path(root.empty() ? "/" : root) / rel).lexically_normal().string();
}

// Reads at most `limit` bytes; empty when the file is missing or unreadable.
std::string read_small(const std::string& path, std::size_t limit) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::string text(limit, '\0');
  in.read(&text[0], static_cast<std::streamsize>(limit));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

std::string trim(const std::string& s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(s);
  while (std::getline(in, item, sep)) {
    item = trim(item);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// "p4d.24xlarge", "g5.xlarge", "trn1n.32xlarge": family '.' size, lower-case.
bool looks_like_instance_type(const std::string& s) {
  const auto dot = s.find('.');
  if (s.empty() || s.size() > 64 || dot == std::string::npos || dot == 0 || dot + 1 == s.size())
    return false;
  if (!std::islower(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) ||
           c == '-' || c == '.';
  });
}

// An EFA device is bound to the `efa` kernel driver; without a driver link (minimal trees,
// containers) fall back to the names the driver gives: rdmapXsY (current) or efa_N (old).
bool is_efa_device(const fs::path& dev) {
  std::error_code ec;
  const fs::path driver = dev / "device" / "driver";
  if (fs::is_symlink(driver, ec)) return fs::read_symlink(driver, ec).filename() == "efa";
  const std::string name = dev.filename().string();
  return name.rfind("rdmap", 0) == 0 || name.rfind("efa", 0) == 0;
}

std::vector<std::string> detect_efa(const std::string& dir) {
  std::vector<std::string> devices;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (is_efa_device(it->path())) devices.push_back(it->path().filename().string());
    if (devices.size() >= 64) break;  // the largest instances have 32 EFA interfaces
  }
  std::sort(devices.begin(), devices.end());
  return devices;
}

// ParallelCluster names static/dynamic nodes <queue>-st-<compute resource>-<N> (or -dy-);
// matching against the config's own keys avoids guessing where hyphenated names split.
std::string pcluster_instance_type(const std::string& path, const std::string& node) {
  if (node.empty()) return {};
  const auto doc = nlohmann::json::parse(read_small(path, kMaxConfigBytes), nullptr, false);
  if (!doc.is_object()) return {};
  for (const auto& [queue, resources] : doc.items()) {
    if (!resources.is_object()) continue;
    for (const auto& [resource, conf] : resources.items()) {
      for (const char* kind : {"-st-", "-dy-"}) {
        const std::string prefix = queue + kind + resource + "-";
        if (node.size() <= prefix.size() || node.compare(0, prefix.size(), prefix) != 0) continue;
        const std::string index = node.substr(prefix.size());
        if (!std::all_of(index.begin(), index.end(), ::isdigit)) continue;
        // Checked step by step: a wrongly typed field must mean "unknown", not an exception.
        if (!conf.is_object() || !conf.contains("Instances")) return {};
        const auto& instances = conf["Instances"];
        if (!instances.is_array() || instances.empty() || !instances[0].is_object()) return {};
        const auto& type = instances[0].contains("InstanceType") ? instances[0]["InstanceType"] : nlohmann::json();
        if (!type.is_string() || !looks_like_instance_type(type.get<std::string>())) return {};
        return type.get<std::string>();
      }
    }
  }
  return {};
}

// The release string the plugin logs at start-up is a literal in the library:
// "NET/OFI Initializing aws-ofi-nccl 1.17.1" (PACKAGE_STRING). Bounded scan.
bool version_in_library(const std::string& path, OfiVersion& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  const std::string needle = "aws-ofi-nccl ";
  constexpr std::size_t kChunk = 1 << 20, kMaxBytes = std::size_t{256} << 20;
  std::string window;
  std::vector<char> buf(kChunk);
  for (std::size_t read = 0; in && read < kMaxBytes; read += kChunk) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    window.append(buf.data(), static_cast<std::size_t>(in.gcount()));
    for (auto at = window.find(needle); at != std::string::npos; at = window.find(needle, at + 1)) {
      std::size_t end = at + needle.size();
      while (end < window.size() && (std::isdigit(static_cast<unsigned char>(window[end])) || window[end] == '.')) ++end;
      if (end == window.size()) break;  // may continue in the next chunk
      if (parse_ofi_version(window.substr(at + needle.size(), end - at - needle.size()), out)) return true;
    }
    // Keep a tail so a string split across chunks is still found.
    if (window.size() > 64) window.erase(0, window.size() - 64);
  }
  return false;
}

void find_ofi_nccl(const NodeProbe& probe, NodeInfo& node) {
  std::error_code ec;
  for (const auto& dir : probe.ofi_nccl_dirs) {
    const std::string full = join_root(probe.root, dir);
    // libnccl-net-ofi.so since aws-ofi-nccl 1.15.0 (with libnccl-net.so beside it for NCCL's
    // default lookup); libnccl-net.so alone before.
    const bool renamed = fs::exists(fs::path(full) / "libnccl-net-ofi.so", ec);
    if (!renamed && !fs::exists(fs::path(full) / "libnccl-net.so", ec)) continue;
    node.ofi_nccl_dir = full;
    for (fs::directory_iterator it(full, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.rfind("lib", 0) == 0 && it->path().extension() == ".so") node.ofi_nccl_libs.push_back(name);
      if (node.ofi_nccl_libs.size() >= 256) break;
    }
    std::sort(node.ofi_nccl_libs.begin(), node.ofi_nccl_libs.end());
    const std::string lib = (fs::path(full) / (renamed ? "libnccl-net-ofi.so" : "libnccl-net.so")).string();
    if (version_in_library(lib, node.ofi_nccl_version)) {
      node.ofi_nccl_version_known = NodeInfo::VersionKnown::exact;
    } else if (renamed) {
      node.ofi_nccl_version = OfiVersion{1, 15, 0};
      node.ofi_nccl_version_known = NodeInfo::VersionKnown::at_least;
    }
    return;
  }
}

// Whether `raw` can be applied on `node`: ${OFI_NCCL_DIR} needs the plugin, and
// ${OFI_NCCL_DIR}/FILE needs FILE in the plugin's directory.
bool ofi_available(const NodeInfo& node, const std::string& raw) {
  const std::string ph = kOfiPlaceholder;
  const auto at = raw.find(ph);
  if (at == std::string::npos) return true;
  if (node.ofi_nccl_dir.empty()) return false;
  if (raw.compare(at + ph.size(), 1, "/") != 0) return true;
  const std::string file = raw.substr(at + ph.size() + 1, raw.find_first_of(":/", at + ph.size() + 1) - (at + ph.size() + 1));
  return std::binary_search(node.ofi_nccl_libs.begin(), node.ofi_nccl_libs.end(), file);
}

Error profile_error(const std::string& file, int line, const std::string& field,
                    const std::string& message, const std::string& hint = "") {
  Error e;
  e.file = file;
  e.line = line;
  e.field = field;
  e.message = message;
  e.hint = hint;
  return e;
}

bool valid_env_name(const std::string& name) {
  static const char* const prefixes[] = {"NCCL_", "FI_", "OFI_NCCL_", "RDMAV_"};
  const bool prefixed = std::any_of(std::begin(prefixes), std::end(prefixes), [&](const char* p) {
    return name.rfind(p, 0) == 0 && name.size() > std::char_traits<char>::length(p);
  });
  return prefixed && std::all_of(name.begin(), name.end(), [](char c) {
           return std::isupper(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_';
         });
}

// Values are plain tokens; the only substitution is ${OFI_NCCL_DIR}.
bool valid_value(const std::string& value, std::string& why) {
  if (value.empty()) return why = "empty value", false;
  for (char c : value)
    if (std::iscntrl(static_cast<unsigned char>(c))) return why = "control character in value", false;
  std::string rest = value;
  for (auto at = rest.find("${"); at != std::string::npos; at = rest.find("${")) {
    if (rest.compare(at, std::char_traits<char>::length(kOfiPlaceholder), kOfiPlaceholder) != 0)
      return why = "unknown placeholder (only ${OFI_NCCL_DIR} exists)", false;
    rest.erase(0, at + 2);
  }
  return true;
}

std::string substitute(const std::string& value, const std::string& ofi_dir) {
  std::string out = value;
  const std::string ph = kOfiPlaceholder;
  for (auto at = out.find(ph); at != std::string::npos; at = out.find(ph, at + ofi_dir.size()))
    out.replace(at, ph.size(), ofi_dir);
  return out;
}

bool has_name(const EnvList& list, const std::string& name) {
  return std::any_of(list.begin(), list.end(), [&](const auto& kv) { return kv.first == name; });
}

// "ofi<1.7.0&instance=p4d.24xlarge,p5.*" -> condition (one word: INI section headers are
// [kind name]); false + why on a bad term.
bool parse_condition(const std::string& text, ProfileCondition& c, std::string& why) {
  c.text = text;
  if (!text.empty() && (text.front() == '&' || text.back() == '&' || text.find("&&") != std::string::npos))
    return why = "empty condition in '" + text + "' (terms joined with a single &)", false;
  std::istringstream in(text);
  std::string term;
  bool any = false;
  while (std::getline(in, term, '&')) {
    any = true;
    if (term.rfind("ofi<", 0) == 0 || term.rfind("ofi>=", 0) == 0) {
      const bool below = term[3] == '<';
      OfiVersion v;
      if (!parse_ofi_version(term.substr(below ? 4 : 5), v))
        return why = "bad plugin version in '" + term + "' (ofi<1.7.0, ofi>=1.15.0)", false;
      if (below) c.has_below = true, c.below = v;
      else c.has_at_least = true, c.at_least = v;
    } else if (term.rfind("instance=", 0) == 0) {
      c.instances = split(term.substr(9), ',');
      if (c.instances.empty()) return why = "empty instance list in '" + term + "'", false;
      for (const auto& glob : c.instances)
        if (!std::all_of(glob.begin(), glob.end(), [](char ch) {
              return std::islower(static_cast<unsigned char>(ch)) || std::isdigit(static_cast<unsigned char>(ch)) ||
                     ch == '.' || ch == '-' || ch == '*' || ch == '?';
            }))
          return why = "bad instance pattern '" + glob + "' (lower-case type names, * and ? globs)", false;
    } else {
      return why = "unknown condition '" + term + "' (ofi<V, ofi>=V, instance=GLOB,..., joined with &)", false;
    }
  }
  if (!any) return why = "no condition: [when ofi<V], [when ofi>=V], [when instance=GLOB,...], joined with &", false;
  return true;
}

}  // namespace

std::string OfiVersion::str() const {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

bool parse_ofi_version(const std::string& text, OfiVersion& out) {
  std::string t = text;
  if (!t.empty() && t[0] == 'v') t.erase(0, 1);
  int parts[3] = {0, 0, 0};
  int n = 0;
  std::size_t i = 0;
  while (n < 3) {
    std::size_t start = i;
    while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i])) && i - start < 6) ++i;
    if (i == start) return false;
    parts[n++] = std::stoi(t.substr(start, i - start));
    if (i < t.size() && t[i] == '.' && n < 3) {
      ++i;
      continue;
    }
    break;
  }
  // Accept a suffix such as "-aws" or "-rc1"; a second number part is required.
  if (n < 2 || (i < t.size() && t[i] != '-' && t[i] != '+' && t[i] != '.')) return false;
  out = OfiVersion{parts[0], parts[1], parts[2]};
  return true;
}

bool condition_holds(const ProfileCondition& c, const NodeInfo& node) {
  using K = NodeInfo::VersionKnown;
  const K known = node.ofi_nccl_version_known;
  const OfiVersion& v = node.ofi_nccl_version;
  // ofi<X: exact -> compare; a lower bound L >= X proves it false; otherwise unknown = false.
  if (c.has_below && !(known == K::exact && v < c.below)) return false;
  // ofi>=X: exact -> compare; a lower bound L >= X proves it; otherwise unknown = false.
  if (c.has_at_least && (known == K::no || v < c.at_least)) return false;
  if (!c.instances.empty()) {
    if (node.instance_type.empty()) return false;
    const bool match = std::any_of(c.instances.begin(), c.instances.end(), [&](const std::string& glob) {
      return fnmatch(glob.c_str(), node.instance_type.c_str(), 0) == 0;
    });
    if (!match) return false;
  }
  return true;
}

NodeInfo detect_node(const NodeProbe& probe) {
  NodeInfo node;
  node.efa_devices = detect_efa(join_root(probe.root, probe.infiniband));
  // On Nitro instances the DMI product name is the instance type.
  const std::string product = trim(read_small(join_root(probe.root, probe.dmi_product), 256));
  if (looks_like_instance_type(product)) {
    node.instance_type = product;
    node.instance_source = "dmi";
  } else {
    node.instance_type = pcluster_instance_type(join_root(probe.root, probe.pcluster_fleet), probe.node_name);
    if (!node.instance_type.empty()) node.instance_source = "parallelcluster";
  }
  find_ofi_nccl(probe, node);
  return node;
}

Result<Profile> load_profile_file(const std::string& path) {
  auto file = ini::read(path);
  if (!file) return file.error();
  Profile p;
  p.name = fs::path(path).stem().string();
  for (const auto& sec : file->sections) {
    if (sec.kind == "when") {
      ProfileCondition c;
      std::string why;
      if (!parse_condition(sec.name, c, why)) return profile_error(path, sec.line, "when", why);
      c.line = sec.line;
      p.when.push_back(std::move(c));
      continue;
    }
    if ((sec.kind != "env" && sec.kind != "rdma" && sec.kind != "prepend") || !sec.name.empty())
      return profile_error(path, sec.line, sec.kind, "unknown section",
                           "sections are [env], [when CONDITIONS], [rdma], [prepend]");
  }
  bool has_version = false;
  for (const auto& e : file->entries) {
    std::string why;
    if (!valid_value(e.value, why)) return file->error_at(e, why);
    if (e.section.empty()) {
      if (e.key == "version") {
        const bool digits = e.value.size() <= 4 && std::all_of(e.value.begin(), e.value.end(), ::isdigit);
        if (!digits || std::stoi(e.value) < 1) return file->error_at(e, "not a positive integer");
        p.version = std::stoi(e.value);
        has_version = true;
      } else if (e.key == "description") {
        p.description = e.value;
      } else if (e.key == "rdma_instance_types") {
        p.rdma_instance_types = split(e.value, ',');
      } else {
        return file->error_at(e, "unknown key", "top-level keys are version, description, rdma_instance_types");
      }
    } else if (e.section == "prepend") {
      if (e.key != "LD_LIBRARY_PATH") return file->error_at(e, "unknown path list", "[prepend] takes LD_LIBRARY_PATH");
      p.prepend.emplace_back(e.key, e.value);
    } else {
      if (!valid_env_name(e.key))
        return file->error_at(e, "not an NCCL/libfabric variable",
                              "names start with NCCL_, FI_, OFI_NCCL_ or RDMAV_ (upper case)");
      if (e.section.rfind("when", 0) == 0 && (e.section.size() == 4 || e.section[4] == ' ')) {
        const std::string cond = e.section.size() > 5 ? e.section.substr(5) : "";
        auto it = std::find_if(p.when.begin(), p.when.end(), [&](const ProfileCondition& c) { return c.text == cond; });
        if (it == p.when.end()) return file->error_at(e, "section not found");  // cannot happen: headers parsed above
        it->env.emplace_back(e.key, e.value);
      } else {
        (e.section == "env" ? p.env : p.rdma).emplace_back(e.key, e.value);
      }
    }
  }
  if (!has_version) return profile_error(path, 0, "version", "missing", "add `version = N` matching the file name");
  const std::string suffix = "-v" + std::to_string(p.version);
  if (p.name.size() <= suffix.size() || p.name.compare(p.name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return profile_error(path, 0, "version", "version " + std::to_string(p.version) + " does not match the file name",
                         "name the file <family>" + suffix + ".ini");
  return p;
}

Result<Profile> load_profile(const std::string& dir, const std::string& family) {
  std::error_code ec;
  int best = 0;
  std::string best_path;
  const std::string prefix = family + "-v";
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string stem = it->path().stem().string();
    if (it->path().extension() != ".ini" || stem.rfind(prefix, 0) != 0) continue;
    const std::string num = stem.substr(prefix.size());
    if (num.empty() || num.size() > 4 || !std::all_of(num.begin(), num.end(), ::isdigit)) continue;
    if (std::stoi(num) > best) best = std::stoi(num), best_path = it->path().string();
  }
  if (ec) return profile_error(dir, 0, "", "cannot list NCCL profile directory: " + ec.message());
  if (best_path.empty())
    return profile_error(dir, 0, family, "no profile " + family + "-v<N>.ini", "see configs/nccl/README.md");
  return load_profile_file(best_path);
}

std::string profile_family(const NodeInfo& node) { return node.efa_devices.empty() ? "tcp" : "efa"; }

EnvList nccl_env(const NodeInfo& node, const Profile& profile, const Env& current) {
  EnvList out;
  auto add = [&](const std::string& name, const std::string& raw) {
    if (current.count(name) || has_name(out, name) || !ofi_available(node, raw)) return;
    out.emplace_back(name, substitute(raw, node.ofi_nccl_dir));
  };
  for (const auto& [name, value] : profile.env) add(name, value);
  for (const auto& cond : profile.when)
    if (condition_holds(cond, node))
      for (const auto& [name, value] : cond.env) add(name, value);
  const auto& rdma = profile.rdma_instance_types;
  if (std::find(rdma.begin(), rdma.end(), node.instance_type) != rdma.end())
    for (const auto& [name, value] : profile.rdma) add(name, value);

  for (const auto& [name, value] : profile.prepend) {
    const auto it = current.find(name);
    const std::vector<std::string> have = it == current.end() ? std::vector<std::string>() : split(it->second, ':');
    std::string added;
    for (const auto& entry : split(value, ':')) {
      if (!ofi_available(node, entry)) continue;
      const std::string dir = substitute(entry, node.ofi_nccl_dir);
      if (std::find(have.begin(), have.end(), dir) != have.end()) continue;
      if ((":" + added + ":").find(":" + dir + ":") != std::string::npos) continue;
      added += (added.empty() ? "" : ":") + dir;
    }
    if (added.empty()) continue;
    // Never leave an empty element: it would put the working directory on the search path.
    const std::string rest = it == current.end() || it->second.empty() ? "" : ":" + it->second;
    out.emplace_back(name, added + rest);
  }

  auto note = [&](const std::string& name, const std::string& value) {
    if (!current.count(name) && !value.empty()) out.emplace_back(name, value);
  };
  note("SCALEGUARD_NCCL_PROFILE", profile.name);
  note("SCALEGUARD_EFA_DEVICES", std::to_string(node.efa_devices.size()));
  note("SCALEGUARD_INSTANCE_TYPE", node.instance_type);
  if (node.ofi_nccl_version_known != NodeInfo::VersionKnown::no)
    note("SCALEGUARD_OFI_NCCL_VERSION",
         (node.ofi_nccl_version_known == NodeInfo::VersionKnown::at_least ? ">=" : "") + node.ofi_nccl_version.str());
  return out;
}

Result<std::string> first_host(const std::string& nodelist) {
  auto bad = [&](const std::string& why) {
    Error e;
    e.field = "nodelist";
    e.message = why + ": '" + nodelist.substr(0, 80) + "'";
    return e;
  };
  if (nodelist.empty() || nodelist.size() > 65536) return bad("empty or oversized host list");
  std::string host;
  int depth = 0;
  int digits = 0;           // digits of the current bracket's first number
  bool range_done = false;  // the first number ended ('-' or ','): skip the rest
  for (char c : nodelist) {
    const bool digit = std::isdigit(static_cast<unsigned char>(c));
    if (c == ',' && depth == 0) break;
    if (c == '[') {
      if (depth++) return bad("nested '['");
      digits = 0;
      range_done = false;
    } else if (c == ']') {
      if (!depth-- || !digits) return bad("empty or unbalanced range");
    } else if (depth) {
      if (digit && !range_done) host += c, ++digits;
      else if ((c == '-' || c == ',') && digits) range_done = true;
      else if (!digit) return bad("malformed range");
    } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_') {
      host += c;
    } else {
      return bad("unexpected character");
    }
  }
  if (depth) return bad("unclosed '['");
  if (host.empty()) return bad("no host name");
  return host;
}

int master_port(std::uint32_t job_id) { return 20000 + static_cast<int>(job_id % 10000); }

}  // namespace scaleguard
