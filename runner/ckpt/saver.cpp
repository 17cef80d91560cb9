#include "ckpt/saver.h"

#include <ATen/ops/zeros_like.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "ckpt/shard_writer.h"

namespace scaleguard::ckpt {
namespace fs = std::filesystem;

namespace {

constexpr const char* kErrorPrefix = "error:";
constexpr const char* kNothing = "none";

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Writes `text` to path, fsynced; "" or the error.
std::string write_synced(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return path + ": " + std::strerror(errno);
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string e = path + ": write failed: " + std::strerror(errno);
      ::close(fd);
      return e;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const std::string e = path + ": fsync failed: " + std::strerror(errno);
    ::close(fd);
    return e;
  }
  return ::close(fd) == 0 ? "" : path + ": close failed: " + std::strerror(errno);
}

std::string make_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return "cannot create checkpoint directory " + dir + ": " + ec.message();
  return "";
}

}  // namespace

bool fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::fsync(fd) == 0;
  ::close(fd);
  return ok;
}

Saver::Saver(std::string root, CheckpointMeta meta, CommitComm& comm, int keep_last, Log log)
    : root_(std::move(root)), meta_(std::move(meta)), comm_(comm), keep_last_(keep_last), log_(std::move(log)) {}

Saver::~Saver() {
  if (pending_write_.valid()) pending_write_.wait();
  if (root_commit_.valid()) root_commit_.wait();
}

Saver::Written Saver::write(const Snapshot& snap) const {
  const auto t0 = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  if (snap.tensors().empty() && snap.scalars().empty())
    return {std::optional<ShardEntry>{}, seconds(), 0};
  const std::string partial = root_ + "/" + step_dir_name(snap.step()) + kPartialSuffix;
  if (auto e = make_dir(partial); !e.empty()) return {Error{e, partial, 0, "", ""}, seconds(), snap.bytes()};
  auto shard = write_shard(partial, comm_.rank(), snap);
  if (!shard) return {shard.error(), seconds(), snap.bytes()};
  return {std::optional<ShardEntry>(std::move(shard).value()), seconds(), snap.bytes()};
}

Result<Committed> Saver::save(const Snapshot& snap) {
  if (pending_) throw std::logic_error("Saver::save while an asynchronous save is pending: call finish() first");
  return commit(snap.step(), write(snap));
}

uint64_t Saver::reserve(const Snapshot& like) {
  uint64_t bytes = 0;
  for (const auto& t : like.tensors()) {
    if (t.owned) continue;   // the snapshot's own copy already (e.g. a GPU tensor's)
    spare_.push_back(at::zeros_like(t.data));   // zeros: every page written now
    bytes += t.data.nbytes();
  }
  return bytes;
}

void Saver::start(Snapshot snap) {
  if (pending_) throw std::logic_error("Saver::start while a save is pending: call finish() first");
  // Allocating the host buffers may throw: nothing is pending until they exist.
  auto planned = std::make_unique<Snapshot>(std::move(snap));
  planned->plan_copies(spare_);
  pending_snapshot_ = std::move(planned);
  pending_step_ = pending_snapshot_->step();
  pending_ = true;
  pending_write_ = std::async(std::launch::async, [this] {
    // Test hook: the writer thread starts copying late, so the training thread's fences
    // must copy every tensor it changes by themselves.
    if (unsigned s = test_hook_seconds("SCALEGUARD_TEST_DELAY_COPY", pending_step_)) ::sleep(s);
    pending_snapshot_->wait_ready();   // a staged snapshot: its device copies are in the mirrors
    pending_snapshot_->copy();
    pending_snapshot_->adopt_copies();
    return write(*pending_snapshot_);
  });
}

void Saver::wait_snapshot() {
  // Copies what is left of the snapshot beside the writer thread, rather than waiting.
  if (pending_snapshot_) pending_snapshot_->copy();   // none once the write is gathered
}

void Saver::wait_snapshot(const at::Tensor& live) {
  if (!pending_snapshot_ || !live.defined() || live.numel() == 0 || !live.device().is_cpu()) return;
  // The bytes `live` spans (strides >= 0, as every tensor the runner updates has).
  int64_t last = 0;
  for (int64_t d = 0; d < live.dim(); ++d) last += (live.size(d) - 1) * live.stride(d);
  pending_snapshot_->copy_overlapping(live.data_ptr(), static_cast<size_t>(last + 1) * live.element_size());
}

std::optional<Result<Committed>> Saver::poll() {
  if (!pending_) return std::nullopt;
  if (!committing_) {
    const bool mine = pending_write_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
    if (comm_.all_min(mine ? 1 : 0) == 0) return std::nullopt;
    auto outcomes = gather_written();
    committing_ = true;
    if (comm_.rank() == 0)
      root_commit_ = std::async(std::launch::async, [this, step = pending_step_, outcomes = std::move(outcomes)] {
        return commit_on_root(step, outcomes);
      });
    return std::nullopt;   // the verdict comes with a later poll
  }
  // "0": rank 0 is still committing; "1" + verdict once it is done.
  std::string news = "0";
  if (comm_.rank() == 0 && root_commit_.wait_for(std::chrono::seconds(0)) == std::future_status::ready)
    news = "1" + root_commit_.get();
  news = comm_.broadcast(news);
  if (news.empty() || news[0] != '1') return std::nullopt;
  pending_ = committing_ = false;
  return outcome(pending_step_, written_, news.substr(1));
}

std::optional<Result<Committed>> Saver::finish() {
  if (!pending_) return std::nullopt;
  std::string verdict;
  if (committing_) {
    if (comm_.rank() == 0) verdict = root_commit_.get();
  } else {
    const auto outcomes = gather_written();
    if (comm_.rank() == 0) verdict = commit_on_root(pending_step_, outcomes);
  }
  verdict = comm_.broadcast(verdict);
  pending_ = committing_ = false;
  return outcome(pending_step_, written_, verdict);
}

std::vector<std::string> Saver::gather_written() {
  written_ = pending_write_.get();
  spare_ = pending_snapshot_->release_copies();
  pending_snapshot_.reset();
  return comm_.gather(shard_outcome(pending_step_, written_));
}

Result<Committed> Saver::commit(int64_t step, const Written& w) {
  const auto outcomes = comm_.gather(shard_outcome(step, w));
  std::string verdict = comm_.rank() == 0 ? commit_on_root(step, outcomes) : "";
  return outcome(step, w, comm_.broadcast(verdict));
}

std::string Saver::shard_outcome(int64_t step, const Written& w) const {
  std::string mine;
  if (!w.shard) {
    mine = kErrorPrefix + w.shard.error().message;
  } else if (!w.shard->has_value()) {
    mine = kNothing;
  } else {
    Manifest one;
    one.step = step;
    one.world_size = comm_.size();
    one.shards.push_back(**w.shard);
    mine = manifest_to_json(one);
  }
  return mine;
}

Result<Committed> Saver::outcome(int64_t step, const Written& w, const std::string& verdict) const {
  if (!verdict.empty()) return Error{verdict, root_, 0, "", ""};
  Committed c;
  c.step = step;
  c.dir = root_ + "/" + step_dir_name(step);
  c.bytes = w.shard && w.shard->has_value() ? (*w.shard)->bytes : 0;
  c.snapshot_bytes = w.snapshot_bytes;
  c.write_seconds = w.seconds;
  return c;
}

std::string Saver::commit_on_root(int64_t step, const std::vector<std::string>& outcomes) {
  const std::string name = step_dir_name(step);
  const std::string partial = root_ + "/" + name + kPartialSuffix;
  const std::string final_dir = root_ + "/" + name;
  std::error_code ec;

  Manifest m;
  m.step = step;
  m.created = utc_now();
  m.code_version = meta_.code_version;
  m.strategy = meta_.strategy;
  m.tp = meta_.tp;
  m.pp = meta_.pp;
  m.dp = meta_.dp;
  m.world_size = comm_.size();
  m.model_name = meta_.model_name;
  m.config_hash = meta_.config_hash;
  m.model_config = meta_.model_config;
  std::string failures;
  for (size_t r = 0; r < outcomes.size(); ++r) {
    const auto& o = outcomes[r];
    if (o == kNothing) continue;
    if (o.rfind(kErrorPrefix, 0) == 0) {
      failures += (failures.empty() ? "" : "; ") + ("rank " + std::to_string(r) + ": " + o.substr(6));
      continue;
    }
    auto one = parse_manifest(o, "rank " + std::to_string(r));
    if (!one) {
      failures += (failures.empty() ? "" : "; ") + one.error().message;
      continue;
    }
    m.shards.push_back(one->shards.front());
  }
  if (failures.empty() && m.shards.empty()) failures = "no rank had anything to save";
  auto abandon = [&](const std::string& why) {
    fs::remove_all(partial, ec);
    return "checkpoint step " + std::to_string(step) + " not saved, earlier checkpoints are untouched: " + why;
  };
  if (!failures.empty()) return abandon(failures);

  // The merged manifest must pass the same checks a reader applies (e.g. overlapping slices).
  const std::string text = manifest_to_json(m);
  if (auto check = parse_manifest(text, partial + "/" + kManifestName); !check) return abandon(check.error().message);
  // Files from an earlier attempt at this step that this manifest does not name.
  for (const auto& f : fs::directory_iterator(partial, ec)) {
    const std::string fname = f.path().filename().string();
    bool named = false;
    for (const auto& s : m.shards) named = named || s.file == fname;
    if (!named) fs::remove_all(f.path(), ec);
  }
  if (auto e = write_synced(partial + "/" + kManifestName, text); !e.empty()) return abandon(e);
  if (!fsync_dir(partial)) return abandon("fsync of " + partial + " failed: " + std::strerror(errno));

  // A committed step-N already there (e.g. a rerun after falling back past a corrupt one)
  // is moved aside under a .partial name, so a crash here never leaves two or zero copies
  // that look committed.
  const std::string replaced = final_dir + ".replaced" + kPartialSuffix;
  if (fs::exists(final_dir, ec)) {
    fs::remove_all(replaced, ec);
    if (::rename(final_dir.c_str(), replaced.c_str()) != 0)
      return abandon("cannot move aside the existing " + final_dir + ": " + std::strerror(errno));
    log_("replacing the existing " + final_dir);
  }
  if (::rename(partial.c_str(), final_dir.c_str()) != 0)
    return abandon("rename " + partial + " -> " + final_dir + " failed: " + std::strerror(errno));
  if (!fsync_dir(root_)) return "fsync of " + root_ + " after committing " + name + " failed: " + std::strerror(errno);
  fs::remove_all(replaced, ec);

  const std::string tmp = root_ + "/" + kLatestName + ".tmp";
  if (auto e = write_synced(tmp, name + "\n"); !e.empty()) return "committed " + name + " but cannot update latest: " + e;
  if (::rename(tmp.c_str(), (root_ + "/" + kLatestName).c_str()) != 0 || !fsync_dir(root_))
    return "committed " + name + " but cannot update latest: " + std::strerror(errno);

  if (keep_last_ > 0) {
    auto listed = list_checkpoints(root_);
    if (listed) {
      std::vector<Listed> committed;
      for (auto& l : *listed)
        if (l.status == Status::committed) committed.push_back(l);
      for (size_t i = 0; i + keep_last_ < committed.size(); ++i) {
        if (committed[i].step == step) continue;
        fs::remove_all(committed[i].path, ec);
        log_("retention (keep_last=" + std::to_string(keep_last_) + "): removed " + committed[i].path);
      }
    }
  }
  log_("committed " + final_dir);
  return "";
}

}  // namespace scaleguard::ckpt
