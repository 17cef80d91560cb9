// MASTER_ADDR must be an address every node of the step can reach: the first node's NodeAddr,
// which is what slurmd itself is reached by. Found without asking slurmctld (a prolog on every
// node of every job must not load the controller): from what this node already has, in the
// order Slurm itself uses to reach another node:
//   1. SLURM_NODE_ALIASES ("name:addr:host,..."), which slurmctld puts into the job's (and the
//      prolog's) environment for nodes whose address is set at run time (cloud nodes without
//      cloud_dns);
//   2. NodeAddr= (else NodeHostname=) of the node's line in slurm.conf (the file slurmd read;
//      Include followed);
//   3. otherwise none: the caller uses the node name, right wherever node names resolve.
// A NodeAddr set only at run time (`scontrol update NodeAddr=`, dynamic `slurmd -Z` nodes)
// with no alias list is known to slurmctld alone: there the node name is used.
#include <glob.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "plugin.h"

namespace scaleguard::spank {
namespace {

constexpr std::size_t kMaxConfBytes = 16u << 20;  // a slurm.conf and its includes, together
constexpr int kMaxIncludeDepth = 8;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// slurm.conf's logical lines: comments ('#', not "\#") removed, '\' continuations joined.
std::vector<std::string> conf_lines(const std::string& path, std::size_t& budget) {
  std::vector<std::string> out;
  std::ifstream in(path);
  std::string raw, line;
  while (std::getline(in, raw)) {
    if (raw.size() + 1 > budget) break;
    budget -= raw.size() + 1;
    std::string clean;
    for (std::size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '\\' && i + 1 < raw.size() && raw[i + 1] == '#') clean += raw[++i];
      else if (raw[i] == '#') break;
      else clean += raw[i];
    }
    while (!clean.empty() && std::isspace(static_cast<unsigned char>(clean.back()))) clean.pop_back();
    const bool more = !clean.empty() && clean.back() == '\\';
    if (more) clean.pop_back();
    line += clean;
    if (more) continue;
    out.push_back(line);
    line.clear();
  }
  if (!line.empty()) out.push_back(line);
  return out;
}

std::string unquote(std::string v) {
  if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) v = v.substr(1, v.size() - 2);
  return v;
}

// NodeName=... NodeAddr=... lines of `path` (and its includes): the addresses of `wanted`.
void scan_conf(const std::string& path, const std::set<std::string>& wanted, std::map<std::string, std::string>& out,
               std::size_t& budget, int depth) {
  if (depth > kMaxIncludeDepth) return;
  const std::string dir = path.substr(0, path.rfind('/') + 1);
  for (const auto& line : conf_lines(path, budget)) {
    std::istringstream words(line);
    std::string word, names, addrs, hostnames;
    if (!(words >> word)) continue;
    if (lower(word) == "include") {
      std::string target;
      std::getline(words >> std::ws, target);
      target = unquote(target);
      if (target.empty()) continue;
      if (target[0] != '/') target = dir + target;
      glob_t g{};
      if (glob(target.c_str(), 0, nullptr, &g) == 0)
        for (std::size_t i = 0; i < g.gl_pathc; ++i) scan_conf(g.gl_pathv[i], wanted, out, budget, depth + 1);
      globfree(&g);
      continue;
    }
    for (std::istringstream all(line); all >> word;) {
      const auto eq = word.find('=');
      if (eq == std::string::npos) continue;
      const std::string key = lower(word.substr(0, eq));
      if (key == "nodename") names = unquote(word.substr(eq + 1));
      else if (key == "nodeaddr") addrs = unquote(word.substr(eq + 1));
      else if (key == "nodehostname") hostnames = unquote(word.substr(eq + 1));
    }
    if (addrs.empty()) addrs = hostnames;  // NodeAddr defaults to NodeHostname
    if (names.empty() || addrs.empty() || lower(names) == "default") continue;
    const auto n = expand_hosts(names), a = expand_hosts(addrs);
    if (n.size() != a.size()) continue;  // slurmd refuses such a line too
    for (std::size_t i = 0; i < n.size(); ++i)
      if (wanted.count(n[i]) && !out.count(n[i]) && plain_address(a[i])) out.emplace(n[i], a[i]);
  }
}

}  // namespace

bool plain_address(const std::string& addr) {
  return !addr.empty() && addr.size() < 256 && std::all_of(addr.begin(), addr.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' || c == '_';
  });
}

std::vector<std::string> expand_hosts(const std::string& hostlist) {
  std::vector<std::string> hosts;
  if (hostlist.empty() || hostlist.size() > 65536) return hosts;
  // auto*: hostlist_t is a pointer typedef in 22.05 and the struct itself
  // (slurm_hostlist_create returns hostlist_t *), 23.11 on; see slurm-shim/README.md.
  auto* hl = slurm_hostlist_create(hostlist.c_str());
  if (!hl) return hosts;
  while (char* host = slurm_hostlist_shift(hl)) {
    if (hosts.size() < kMaxNodes) hosts.emplace_back(host);
    free(host);  // slurm_hostlist_shift's result comes from malloc
  }
  slurm_hostlist_destroy(hl);
  return hosts;
}

std::map<std::string, std::string> alias_addresses(const std::string& aliases) {
  // "name:addr:hostname,...", an IPv6 address in brackets; "(null)" when there are none.
  std::map<std::string, std::string> out;
  std::istringstream entries(aliases);
  std::string entry;
  while (std::getline(entries, entry, ',')) {
    const auto colon = entry.find(':');
    if (colon == std::string::npos) continue;
    std::string addr = entry.substr(colon + 1);
    if (!addr.empty() && addr[0] == '[') addr = addr.substr(1, addr.find(']') == std::string::npos ? 0 : addr.find(']') - 1);
    else addr = addr.substr(0, addr.find(':'));
    if (plain_address(entry.substr(0, colon)) && plain_address(addr)) out.emplace(entry.substr(0, colon), addr);
  }
  return out;
}

std::map<std::string, std::string> node_addresses(const std::vector<std::string>& nodes, const std::string& aliases,
                                                  const std::string& slurm_conf) {
  std::map<std::string, std::string> out;
  std::set<std::string> wanted;
  for (const auto& [name, addr] : alias_addresses(aliases))
    if (std::find(nodes.begin(), nodes.end(), name) != nodes.end()) out.emplace(name, addr);
  for (const auto& n : nodes)
    if (!out.count(n)) wanted.insert(n);
  std::size_t budget = kMaxConfBytes;
  if (!wanted.empty() && !slurm_conf.empty()) scan_conf(slurm_conf, wanted, out, budget, 0);
  return out;
}

}  // namespace scaleguard::spank
