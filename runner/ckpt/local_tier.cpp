#include "ckpt/local_tier.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "ckpt/shard_writer.h"
#include "scaleguard/checksum.h"

namespace scaleguard::ckpt {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr size_t kChunk = 64u << 20;           // bytes per point-to-point message
constexpr uint64_t kNoFile = ~uint64_t{0};     // the sender could not read its file
constexpr const char* kTmpSuffix = ".tmp";

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string write_synced(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return path + ": " + std::strerror(errno);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string e = path + ": write failed: " + std::strerror(errno);
      ::close(fd);
      return e;
    }
    done += static_cast<size_t>(n);
  }
  const bool ok = ::fsync(fd) == 0;
  const std::string e = ok ? "" : path + ": fsync failed: " + std::strerror(errno);
  ::close(fd);
  return e;
}

// Atomically: path.tmp.<tag>, then rename (several ranks of a node may write the same file).
std::string replace_file(const std::string& path, const std::string& text, int tag) {
  const std::string tmp = path + kTmpSuffix + "." + std::to_string(tag);
  if (auto e = write_synced(tmp, text); !e.empty()) return e;
  if (::rename(tmp.c_str(), path.c_str()) != 0) return "rename " + tmp + " -> " + path + ": " + std::strerror(errno);
  return "";
}

uint64_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : kNoFile;
}

bool same_layout(const Manifest& m, const CheckpointMeta& e, int world) {
  return m.tier == "local" && m.config_hash == e.config_hash && m.world_size == world && m.tp == e.tp &&
         m.pp == e.pp && m.dp == e.dp && m.strategy == e.strategy;
}

}  // namespace

std::vector<int> partner_table(const std::vector<int>& node_of) {
  // Nodes in the order of their lowest rank; each node's ranks in rank order.
  std::vector<int> order;
  std::map<int, std::vector<int>> ranks;
  for (size_t r = 0; r < node_of.size(); ++r) {
    if (ranks.find(node_of[r]) == ranks.end()) order.push_back(node_of[r]);
    ranks[node_of[r]].push_back(static_cast<int>(r));
  }
  std::vector<int> partner(node_of.size(), -1);
  if (order.size() < 2) return partner;
  for (size_t k = 0; k < order.size(); ++k) {
    const auto& here = ranks[order[k]];
    const auto& next = ranks[order[(k + 1) % order.size()]];
    for (size_t i = 0; i < here.size(); ++i) partner[static_cast<size_t>(here[i])] = next[i % next.size()];
  }
  return partner;
}

LocalTier::LocalTier(std::string dir, CheckpointMeta meta, MPI_Comm world, std::vector<int> node_of, int keep_last,
                     Log log)
    : dir_(std::move(dir)), meta_(std::move(meta)), comm_(std::make_unique<MpiCommitComm>(world)),
      node_of_(std::move(node_of)), keep_last_(keep_last), log_(std::move(log)) {
  MPI_Comm_dup(world, &p2p_);
  rank_ = comm_->rank();
  world_ = comm_->size();
  partners_ = partner_table(node_of_);
  leader_ = true;
  for (int r = 0; r < rank_; ++r) leader_ = leader_ && node_of_[static_cast<size_t>(r)] != node_of_[static_cast<size_t>(rank_)];
}

LocalTier::~LocalTier() {
  if (p2p_ != MPI_COMM_NULL) MPI_Comm_free(&p2p_);
}

std::string LocalTier::prepare() const {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return "cannot create the local checkpoint directory '" + dir_ + "': " + ec.message();
  if (::access(dir_.c_str(), W_OK | X_OK) != 0)
    return "local checkpoint directory '" + dir_ + "' is not writable: " + std::strerror(errno);
  if (!leader_) return "";
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("step-", 0) == 0 && name.size() > std::strlen(kPartialSuffix) &&
        name.compare(name.size() - std::strlen(kPartialSuffix), std::string::npos, kPartialSuffix) == 0) {
      std::error_code rm;
      fs::remove_all(e.path(), rm);
      log_("removed the unfinished local save " + e.path().string());
    }
  }
  return "";
}

std::string LocalTier::transfer(const std::vector<Flow>& flows, std::vector<uint64_t>* got_hash,
                                std::vector<uint64_t>* got_bytes) {
  struct Side {
    size_t flow = 0;
    int fd = -1;
    uint64_t size = 0, done = 0;
    std::vector<char> buf;
    std::unique_ptr<Xxh3Stream> hash;
    MPI_Request req = MPI_REQUEST_NULL;
  };
  std::vector<Side> sends, recvs;
  std::string error;
  auto tag = [](size_t i) { return static_cast<int>(2 + i % 30000); };
  for (size_t i = 0; i < flows.size(); ++i) {
    if (flows[i].src == rank_) {
      Side s;
      s.flow = i;
      s.fd = ::open(flows[i].path_src.c_str(), O_RDONLY | O_CLOEXEC);
      s.size = s.fd < 0 ? kNoFile : file_size(flows[i].path_src);
      if (s.size == kNoFile && s.fd >= 0) ::close(s.fd), s.fd = -1;
      sends.push_back(std::move(s));
    }
    if (flows[i].dst == rank_) {
      Side s;
      s.flow = i;
      s.hash = std::make_unique<Xxh3Stream>();
      recvs.push_back(std::move(s));
    }
  }
  // Sizes first (kNoFile: nothing follows), then the bytes chunk by chunk, every flow at once.
  std::vector<MPI_Request> reqs;
  for (auto& s : sends) {
    MPI_Isend(&s.size, 1, MPI_UINT64_T, flows[s.flow].dst, tag(s.flow), p2p_, &s.req);
    reqs.push_back(s.req);
  }
  for (auto& r : recvs) {
    MPI_Irecv(&r.size, 1, MPI_UINT64_T, flows[r.flow].src, tag(r.flow), p2p_, &r.req);
    reqs.push_back(r.req);
  }
  MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
  for (auto& r : recvs) {
    const Flow& f = flows[r.flow];
    if (r.size == kNoFile) {
      error += (error.empty() ? "" : "; ") + ("rank " + std::to_string(f.src) + " could not read " + f.path_src);
      continue;
    }
    r.fd = ::open((f.path_dst + kTmpSuffix).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (r.fd < 0) error += (error.empty() ? "" : "; ") + f.path_dst + kTmpSuffix + ": " + std::strerror(errno);
  }
  for (;;) {
    reqs.clear();
    std::vector<std::pair<Side*, int>> posted;   // side, chunk bytes
    for (auto& s : sends) {
      if (s.size == kNoFile || s.done >= s.size) continue;
      const int n = static_cast<int>(std::min<uint64_t>(kChunk, s.size - s.done));
      s.buf.resize(static_cast<size_t>(n));
      ssize_t got = 0;
      while (got < n) {
        const ssize_t k = ::pread(s.fd, s.buf.data() + got, static_cast<size_t>(n - got), static_cast<off_t>(s.done + got));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += k;
      }
      if (got < n) {  // the peer still gets n bytes (it fails on the checksum); say why here
        error += (error.empty() ? "" : "; ") + flows[s.flow].path_src + ": read failed";
        std::fill(s.buf.begin() + std::max<ssize_t>(got, 0), s.buf.end(), 0);
      }
      MPI_Isend(s.buf.data(), n, MPI_BYTE, flows[s.flow].dst, tag(s.flow), p2p_, &s.req);
      reqs.push_back(s.req);
      posted.push_back({&s, n});
    }
    for (auto& r : recvs) {
      if (r.size == kNoFile || r.done >= r.size) continue;
      const int n = static_cast<int>(std::min<uint64_t>(kChunk, r.size - r.done));
      r.buf.resize(static_cast<size_t>(n));
      MPI_Irecv(r.buf.data(), n, MPI_BYTE, flows[r.flow].src, tag(r.flow), p2p_, &r.req);
      reqs.push_back(r.req);
      posted.push_back({&r, n});
    }
    if (reqs.empty()) break;
    MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
    for (auto& [side, n] : posted) {
      if (side->hash) {
        side->hash->update(side->buf.data(), static_cast<size_t>(n));
        if (side->fd >= 0) {
          ssize_t put = 0;
          while (put < n) {
            const ssize_t k = ::pwrite(side->fd, side->buf.data() + put, static_cast<size_t>(n - put),
                                       static_cast<off_t>(side->done + put));
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) break;
            put += k;
          }
          if (put < n) {
            error += (error.empty() ? "" : "; ") + flows[side->flow].path_dst + ": write failed: " + std::strerror(errno);
            ::close(side->fd);
            side->fd = -1;
          }
        }
      }
      side->done += static_cast<uint64_t>(n);
    }
  }
  for (auto& s : sends)
    if (s.fd >= 0) ::close(s.fd);
  for (auto& r : recvs) {
    const Flow& f = flows[r.flow];
    if (got_hash) (*got_hash)[r.flow] = r.hash->digest();
    if (got_bytes) (*got_bytes)[r.flow] = r.size;
    if (r.fd < 0) continue;
    const bool synced = ::fsync(r.fd) == 0;
    ::close(r.fd);
    if (!synced || ::rename((f.path_dst + kTmpSuffix).c_str(), f.path_dst.c_str()) != 0)
      error += (error.empty() ? "" : "; ") + f.path_dst + ": " + std::strerror(errno);
  }
  return error;
}

Result<Committed> LocalTier::save(const Snapshot& snap) {
  const double t0 = now_s();
  const int64_t step = snap.step();
  const std::string name = step_dir_name(step);
  const std::string partial = dir_ + "/" + name + kPartialSuffix;
  std::error_code ec;
  fs::create_directories(partial, ec);
  Result<ShardEntry> shard = ec ? Result<ShardEntry>(Error{"cannot create " + partial + ": " + ec.message(), partial, 0, "", ""})
                                : write_shard(partial, rank_, snap);
  const double write_s = now_s() - t0;

  // Partner copies: each rank's file into its partner's directory (the same relative path).
  std::vector<Flow> flows;
  for (int q = 0; q < world_; ++q) {
    const int p = partners_[static_cast<size_t>(q)];
    if (p < 0) continue;
    const std::string path = partial + "/" + shard_file_name(q);
    flows.push_back({q, p, path, path});
  }
  std::vector<uint64_t> hashes(flows.size()), sizes(flows.size());
  const std::string copy_error = transfer(flows, &hashes, &sizes);

  json mine = json::object();
  if (shard) {
    Manifest one;
    one.step = step;
    one.world_size = world_;
    one.shards.push_back(*shard);
    mine["entry"] = manifest_to_json(one);
  } else {
    mine["error"] = shard.error().message;
  }
  if (!copy_error.empty()) mine["copy_error"] = copy_error;
  json copies = json::array();
  for (size_t i = 0; i < flows.size(); ++i)
    if (flows[i].dst == rank_) copies.push_back({flows[i].src, sizes[i], hex64(hashes[i])});
  mine["copies"] = copies;
  const auto outcomes = comm_->gather(mine.dump());

  std::string verdict;
  if (rank_ == 0) {
    Manifest m;
    m.step = step;
    m.created = "";
    m.code_version = meta_.code_version;
    m.strategy = meta_.strategy;
    m.tp = meta_.tp, m.pp = meta_.pp, m.dp = meta_.dp;
    m.world_size = world_;
    m.model_name = meta_.model_name;
    m.config_hash = meta_.config_hash;
    m.model_config = meta_.model_config;
    m.tier = "local";
    m.partners = partners_;
    std::string failures;
    auto fail = [&](const std::string& why) { failures += (failures.empty() ? "" : "; ") + why; };
    std::vector<json> parsed;
    for (size_t r = 0; r < outcomes.size(); ++r) {
      json o = json::parse(outcomes[r], nullptr, false);
      parsed.push_back(o);
      const std::string who = "rank " + std::to_string(r);
      if (o.is_discarded()) { fail(who + ": unreadable outcome"); continue; }
      if (o.contains("error")) fail(who + ": " + o["error"].get<std::string>());
      if (o.contains("copy_error")) fail(who + ": partner copy: " + o["copy_error"].get<std::string>());
      if (!o.contains("entry")) continue;
      auto one = parse_manifest(o["entry"].get<std::string>(), who);
      if (!one) fail(one.error().message);
      else m.shards.push_back(one->shards.front());
    }
    // Every partner copy must be the shard its owner wrote, byte for byte.
    std::map<int, const ShardEntry*> by_rank;
    for (const auto& s : m.shards) by_rank[s.rank] = &s;
    for (size_t r = 0; r < parsed.size(); ++r) {
      if (parsed[r].is_discarded() || !parsed[r].contains("copies")) continue;
      for (const auto& c : parsed[r]["copies"]) {
        const int q = c[0].get<int>();
        auto it = by_rank.find(q);
        if (it == by_rank.end()) continue;   // its owner failed: reported above
        if (c[1].get<uint64_t>() != it->second->bytes || c[2].get<std::string>() != hex64(it->second->xxh3))
          fail("rank " + std::to_string(r) + "'s copy of shard " + std::to_string(q) + " differs from what rank " +
               std::to_string(q) + " wrote (" + std::to_string(c[1].get<uint64_t>()) + " bytes, xxh3 " +
               c[2].get<std::string>() + ")");
      }
    }
    std::sort(m.shards.begin(), m.shards.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
    std::string text = manifest_to_json(m);
    if (failures.empty())
      if (auto check = parse_manifest(text, partial + "/" + kManifestName); !check) failures = check.error().message;
    verdict = failures.empty() ? "ok\n" + text : "error\n" + failures;
  }
  verdict = comm_->broadcast(verdict);
  std::string node_error;
  const bool ok = verdict.rfind("ok\n", 0) == 0;
  if (leader_) {
    if (ok) node_error = commit_node(step, verdict.substr(3));
    else fs::remove_all(partial, ec);
  }
  if (!node_error.empty()) log_("local commit of " + name + " failed on this node: " + node_error);
  const bool all_ok = comm_->all_min(ok && node_error.empty() ? 1 : 0) == 1;
  if (!ok)
    return Error{"local checkpoint step " + std::to_string(step) + " not saved: " + verdict.substr(6), dir_, 0, "", ""};
  if (!all_ok)
    return Error{"local checkpoint step " + std::to_string(step) + " not committed on every node (see the nodes' logs)",
                 dir_, 0, "", ""};
  Committed c;
  c.step = step;
  c.dir = dir_ + "/" + name;
  c.bytes = shard ? shard->bytes : 0;
  c.write_seconds = write_s;
  return c;
}

std::string LocalTier::commit_node(int64_t step, const std::string& manifest_text) {
  const std::string name = step_dir_name(step);
  const std::string partial = dir_ + "/" + name + kPartialSuffix, final_dir = dir_ + "/" + name;
  if (auto e = write_synced(partial + "/" + kManifestName, manifest_text); !e.empty()) return e;
  if (!fsync_dir(partial)) return "fsync of " + partial + " failed: " + std::strerror(errno);
  std::error_code ec;
  if (fs::exists(final_dir, ec)) fs::remove_all(final_dir, ec);   // a rerun of this step
  if (::rename(partial.c_str(), final_dir.c_str()) != 0)
    return "rename " + partial + " -> " + final_dir + ": " + std::strerror(errno);
  if (auto e = replace_file(dir_ + "/" + kLatestName, name + "\n", rank_); !e.empty()) return e;
  if (!fsync_dir(dir_)) return "fsync of " + dir_ + " failed: " + std::strerror(errno);
  if (keep_last_ > 0)
    if (auto listed = list_checkpoints(dir_)) {
      std::vector<Listed> committed;
      for (auto& l : *listed)
        if (l.status != Status::partial && l.step != step) committed.push_back(l);
      for (size_t i = 0; i + static_cast<size_t>(keep_last_) < committed.size() + 1; ++i)
        fs::remove_all(committed[i].path, ec);
    }
  return "";
}

std::optional<LocalRestore> LocalTier::restore(int64_t newer_than, const CheckpointMeta& expect) {
  // 1. What this rank's directory holds: steps of this layout, and which shards (by size).
  json have = json::object();
  if (auto listed = list_checkpoints(dir_)) {
    for (const auto& l : *listed) {
      if (l.status != Status::committed || l.step < newer_than) continue;   // a tie: local restores faster
      auto m = read_manifest(l.path);
      if (!m || !same_layout(*m, expect, world_)) continue;
      json shards = json::array();
      for (const auto& s : m->shards)
        if (file_size(l.path + "/" + s.file) == s.bytes) shards.push_back(s.rank);
      have[std::to_string(l.step)] = shards;
    }
  }
  const auto reports = comm_->gather(have.dump());
  // Rank 0: step -> shard -> the ranks holding it.
  std::map<int64_t, std::map<int, std::vector<int>>, std::greater<int64_t>> where;
  if (rank_ == 0)
    for (size_t r = 0; r < reports.size(); ++r) {
      json h = json::parse(reports[r], nullptr, false);
      if (!h.is_object()) continue;
      for (auto it = h.begin(); it != h.end(); ++it)
        for (const auto& q : it.value()) where[std::stoll(it.key())][q.get<int>()].push_back(static_cast<int>(r));
    }
  std::set<std::tuple<int64_t, int, int>> bad;   // (step, shard, holder) that failed to verify
  for (;;) {
    // 2. Rank 0's plan: the newest step whose every shard has a holder not known bad, each
    //    shard from its own rank when it has it, else from the first other holder.
    std::string plan = "none";
    if (rank_ == 0)
      for (const auto& [step, shards] : where) {
        std::vector<int> src(static_cast<size_t>(world_), -1);
        int first = world_;
        for (const auto& [q, holders] : shards) {
          if (q < 0 || q >= world_) continue;
          for (int h : holders) {
            if (bad.count({step, q, h})) continue;
            if (src[static_cast<size_t>(q)] < 0 || h == q) src[static_cast<size_t>(q)] = h;
          }
          for (int h : holders) first = std::min(first, h);
        }
        if (std::find(src.begin(), src.end(), -1) != src.end()) continue;
        std::ostringstream os;
        os << step << ' ' << first;
        for (int s : src) os << ' ' << s;
        plan = os.str();
        break;
      }
    plan = comm_->broadcast(plan);
    if (plan == "none") return std::nullopt;
    std::istringstream is(plan);
    int64_t step = 0;
    int holder = 0;
    is >> step >> holder;
    std::vector<int> src(static_cast<size_t>(world_));
    for (int& s : src) is >> s;
    const std::string sdir = dir_ + "/" + step_dir_name(step);

    // 3. The manifest from a rank that holds the step; shards moved to where they belong.
    std::string text;
    if (rank_ == holder) {
      std::ifstream in(sdir + "/" + kManifestName, std::ios::binary);
      std::ostringstream os;
      os << in.rdbuf();
      text = os.str();
    }
    uint64_t len = text.size();
    MPI_Bcast(&len, 1, MPI_UINT64_T, holder, p2p_);
    text.resize(len);
    MPI_Bcast(text.data(), static_cast<int>(len), MPI_CHAR, holder, p2p_);
    std::error_code ec;
    fs::create_directories(sdir, ec);
    std::vector<Flow> flows;
    for (int q = 0; q < world_; ++q)
      if (src[static_cast<size_t>(q)] != q)
        flows.push_back({src[static_cast<size_t>(q)], q, sdir + "/" + shard_file_name(q), sdir + "/" + shard_file_name(q)});
    std::string error = transfer(flows, nullptr, nullptr);
    if (error.empty() && file_size(sdir + "/" + kManifestName) == kNoFile)
      error = replace_file(sdir + "/" + kManifestName, text, rank_);

    // 4. This rank's shard verified against the manifest.
    auto m = parse_manifest(text, sdir + "/" + kManifestName);
    if (error.empty() && !m) error = m.error().message;
    if (error.empty()) {
      const ShardEntry* mine = nullptr;
      for (const auto& s : m->shards)
        if (s.rank == rank_) mine = &s;
      const std::string path = sdir + "/" + shard_file_name(rank_);
      if (!mine) {
        error = "the manifest lists no shard of rank " + std::to_string(rank_);
      } else if (file_size(path) != mine->bytes) {
        error = path + ": size differs from the manifest's " + std::to_string(mine->bytes);
      } else if (auto h = xxh3_file(path); !h || *h != mine->xxh3) {
        error = path + ": " + (h ? "checksum differs from the manifest's (bytes changed on disk)" : h.error().message);
      }
    }
    if (!error.empty())
      log_("local " + step_dir_name(step) + ": shard " + std::to_string(rank_) + " from rank " +
           std::to_string(src[static_cast<size_t>(rank_)]) + " unusable: " + error);
    const auto verdicts = comm_->gather(error.empty() ? "" : "bad");
    int moved = 0;
    for (int q = 0; q < world_; ++q) moved += src[static_cast<size_t>(q)] != q;
    bool all_ok = true;
    if (rank_ == 0)
      for (int q = 0; q < world_; ++q)
        if (!verdicts[static_cast<size_t>(q)].empty()) {
          bad.insert({step, q, src[static_cast<size_t>(q)]});
          all_ok = false;
        }
    all_ok = comm_->broadcast(all_ok ? "1" : "0") == "1";
    if (all_ok) {
      if (moved > 0 && fsync_dir(sdir)) {}
      return LocalRestore{step, sdir, moved};
    }
  }
}

}  // namespace scaleguard::ckpt
