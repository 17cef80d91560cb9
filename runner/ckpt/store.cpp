#include "ckpt/store.h"

#include <filesystem>

namespace scaleguard::ckpt {
namespace fs = std::filesystem;

Store::Store(std::string root, Log log) : root_(std::move(root)), log_(std::move(log)) {}

Result<std::vector<Listed>> Store::list() const { return list_checkpoints(root_); }

int Store::remove_partials() const {
  std::error_code ec;
  int removed = 0;
  const std::string suffix = kPartialSuffix;
  for (const auto& e : fs::directory_iterator(root_, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("step-", 0) != 0 || name.size() <= suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    fs::remove_all(e.path(), ec);
    if (ec) {
      log_("cannot remove the unfinished save " + e.path().string() + ": " + ec.message());
    } else {
      log_("removed the unfinished save " + e.path().string());
      ++removed;
    }
  }
  return removed;
}

Result<std::optional<Reader>> Store::open_newest_valid(const OpenOptions& options) const {
  if (!fs::exists(root_)) return std::optional<Reader>{};
  auto listed = list();
  if (!listed) return listed.error();
  int tried = 0;
  for (auto it = listed->rbegin(); it != listed->rend(); ++it) {
    if (it->status == Status::partial) continue;
    ++tried;
    if (it->status == Status::broken) {
      log_("skipping " + it->path + ": " + it->why);
      continue;
    }
    auto reader = Reader::open(it->path, options);
    if (reader) {
      log_("resuming from " + it->path);
      return std::optional<Reader>(std::move(reader).value());
    }
    if (reader.error().field == "config_hash") return reader.error();
    log_("skipping " + it->path + ": " + reader.error().message);
  }
  if (tried == 0) return std::optional<Reader>{};
  return Error{"none of the " + std::to_string(tried) + " checkpoints in " + root_ + " is valid (see the log above)",
               root_, 0, "", "remove the directory to start fresh"};
}

Result<std::optional<Reader>> resume(const Store& store, CommitComm& comm, const OpenOptions& options) {
  std::optional<Result<std::optional<Reader>>> mine;
  std::string choice;
  if (comm.rank() == 0) {
    store.remove_partials();
    mine = store.open_newest_valid(options);
    if (!*mine) choice = "error:" + (*mine).error().message;
    else if (!(*mine)->has_value()) choice = "none";
    else choice = (**mine)->dir();
  }
  choice = comm.broadcast(choice);
  if (choice.rfind("error:", 0) == 0) {
    if (comm.rank() == 0) return std::move(*mine);
    return Error{choice.substr(6) + " (reported by rank 0)", store.root(), 0, "", ""};
  }
  if (choice == "none") return std::optional<Reader>{};
  if (comm.rank() != 0) {
    OpenOptions light = options;
    light.verify_files = false;
    mine = [&]() -> Result<std::optional<Reader>> {
      auto r = Reader::open(choice, light);
      if (!r) return r.error();
      return std::optional<Reader>(std::move(r).value());
    }();
  }
  if (comm.all_min(*mine ? 1 : 0) == 0) {
    if (!*mine) return std::move(*mine);
    return Error{"another rank could not open " + choice + " (see its log)", choice, 0, "", ""};
  }
  return std::move(*mine);
}

}  // namespace scaleguard::ckpt
