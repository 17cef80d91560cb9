// `scaleguard ckpt ls|verify|inspect DIR`: checkpoints without HDF5 (manifest + checksums).
#include <boost/program_options.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "common.h"
#include "scaleguard/checksum.h"
#include "scaleguard/ckpt_manifest.h"
#include "verbs.h"

namespace po = boost::program_options;
namespace ck = scaleguard::ckpt;
namespace fs = std::filesystem;

namespace {

const char* kUsage =
    "usage: scaleguard ckpt ls DIR [--json]       list checkpoints: step, time, size, status\n"
    "       scaleguard ckpt verify DIR [--json]   check manifests and file checksums (exit 1 if bad)\n"
    "       scaleguard ckpt inspect DIR [--json]  strategy, shards, datasets, shapes\n"
    "DIR is a checkpoint root (holding step-N directories) or one step-N directory.\n";


std::string shape_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

bool is_checkpoint(const std::string& dir) { return fs::exists(fs::path(dir) / ck::kManifestName); }

// The checkpoints a verb works on: DIR itself, or every step-N under it.
scaleguard::Result<std::vector<ck::Listed>> targets(const std::string& dir) {
  if (is_checkpoint(dir)) {
    ck::Listed l;
    l.path = dir;
    l.name = fs::path(dir).filename().string();
    auto m = ck::read_manifest(dir);
    l.status = m ? ck::Status::committed : ck::Status::broken;
    if (m) l.step = m->step;
    else l.why = m.error().message;
    return std::vector<ck::Listed>{l};
  }
  return ck::list_checkpoints(dir);
}

int ls(const std::string& dir, bool json) {
  auto listed = targets(dir);
  if (!listed) {
    std::fprintf(stderr, "scaleguard ckpt ls: %s\n", listed.error().message.c_str());
    return 1;
  }
  const std::string latest = is_checkpoint(dir) ? "" : ck::read_latest(dir);
  if (json) {
    auto out = nlohmann::json::array();
    for (const auto& l : *listed)
      out.push_back({{"name", l.name}, {"step", l.step}, {"status", ck::status_name(l.status)}, {"bytes", l.bytes},
                     {"mtime", scaleguard::cli::utc_text(l.mtime)}, {"latest", l.name == latest}, {"why", l.why}});
    std::cout << out.dump(1) << "\n";
    return 0;
  }
  std::printf("%-24s %10s  %-20s %12s  %s\n", "NAME", "STEP", "TIME (UTC)", "BYTES", "STATUS");
  for (const auto& l : *listed) {
    std::string status = ck::status_name(l.status);
    if (l.name == latest) status += " (latest)";
    if (l.status == ck::Status::partial) status += " (ignored, removed at the next start)";
    if (l.status == ck::Status::broken) status += ": " + l.why;
    std::printf("%-24s %10lld  %-20s %12llu  %s\n", l.name.c_str(), static_cast<long long>(l.step),
                scaleguard::cli::utc_text(l.mtime).c_str(), static_cast<unsigned long long>(l.bytes), status.c_str());
  }
  return 0;
}

int verify(const std::string& dir, bool json) {
  auto listed = targets(dir);
  if (!listed) {
    std::fprintf(stderr, "scaleguard ckpt verify: %s\n", listed.error().message.c_str());
    return 1;
  }
  int bad = 0, good = 0;
  auto out = nlohmann::json::array();
  for (const auto& l : *listed) {
    if (l.status == ck::Status::partial) continue;
    std::vector<ck::Problem> problems;
    if (auto m = ck::read_manifest(l.path); !m) problems.push_back({l.path + "/" + ck::kManifestName, m.error().message});
    else problems = ck::verify_files(l.path, *m);
    auto jp = nlohmann::json::array();
    for (const auto& p : problems) {
      jp.push_back({{"file", p.file}, {"why", p.why}});
      if (!json) std::fprintf(stderr, "BAD %s: %s\n", p.file.c_str(), p.why.c_str());
    }
    if (!json && problems.empty()) std::printf("ok  %s\n", l.path.c_str());
    out.push_back({{"path", l.path}, {"ok", problems.empty()}, {"problems", jp}});
    (problems.empty() ? good : bad)++;
  }
  if (json) std::cout << out.dump(1) << "\n";
  else std::printf("%d checkpoint(s) ok, %d bad\n", good, bad);
  if (good + bad == 0) {
    std::fprintf(stderr, "scaleguard ckpt verify: no committed checkpoint in %s\n", dir.c_str());
    return 1;
  }
  return bad ? 1 : 0;
}

int inspect(const std::string& dir, bool json) {
  std::string path = dir;
  if (!is_checkpoint(dir)) {
    // A root: the one `latest` names, else the newest committed.
    path.clear();
    const std::string latest = ck::read_latest(dir);
    if (!latest.empty() && is_checkpoint((fs::path(dir) / latest).string())) path = (fs::path(dir) / latest).string();
    auto listed = ck::list_checkpoints(dir);
    if (path.empty() && listed)
      for (const auto& l : *listed)
        if (l.status == ck::Status::committed) path = l.path;
    if (path.empty()) {
      std::fprintf(stderr, "scaleguard ckpt inspect: no committed checkpoint in %s\n", dir.c_str());
      return 1;
    }
  }
  auto m = ck::read_manifest(path);
  if (!m) {
    std::fprintf(stderr, "scaleguard ckpt inspect: %s\n", m.error().message.c_str());
    return 1;
  }
  if (json) {
    std::ifstream in(fs::path(path) / ck::kManifestName);
    std::cout << nlohmann::json::parse(in, nullptr, false).dump(1) << "\n";
    return 0;
  }
  std::printf("checkpoint %s\n  step %lld, created %s, code %s\n  model %s (config hash %s)\n"
              "  strategy %s, tp %d pp %d dp %d, world size %d, %zu shard(s)\n",
              path.c_str(), static_cast<long long>(m->step), m->created.c_str(), m->code_version.c_str(),
              m->model_name.c_str(), m->config_hash.c_str(), m->strategy.c_str(), m->tp, m->pp, m->dp, m->world_size,
              m->shards.size());
  for (const auto& s : m->shards) {
    std::printf("  %s  rank %d, %llu bytes, xxh3 %s, %zu dataset(s)\n", s.file.c_str(), s.rank,
                static_cast<unsigned long long>(s.bytes), scaleguard::hex64(s.xxh3).c_str(), s.datasets.size());
    for (const auto& d : s.datasets)
      std::printf("    %-48s %-8s %s of %s at %s%s\n", d.name.c_str(), d.dtype.c_str(), shape_str(d.extent).c_str(),
                  shape_str(d.global_shape).c_str(), shape_str(d.offset).c_str(), d.rank_scoped ? " (rank state)" : "");
  }
  return 0;
}

int run(int argc, char** argv) {
  po::options_description opts("scaleguard ckpt options");
  opts.add_options()("help,h", "show this help")("json", "machine-readable output");
  po::options_description hidden;
  hidden.add_options()("action", po::value<std::string>())("dir", po::value<std::string>());
  po::options_description all;
  all.add(opts).add(hidden);
  po::positional_options_description pos;
  pos.add("action", 1).add("dir", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(all).positional(pos).run(), vm);
  } catch (const po::error& e) {
    std::fprintf(stderr, "scaleguard ckpt: %s\n%s", e.what(), kUsage);
    return 2;
  }
  if (vm.count("help")) {
    std::printf("%s", kUsage);
    return 0;
  }
  if (!vm.count("action") || !vm.count("dir")) {
    std::fprintf(stderr, "scaleguard ckpt: need an action and a directory\n%s", kUsage);
    return 2;
  }
  const auto action = vm["action"].as<std::string>();
  const auto dir = vm["dir"].as<std::string>();
  const bool json = vm.count("json") > 0;
  if (!fs::is_directory(dir)) {
    std::fprintf(stderr, "scaleguard ckpt %s: %s is not a directory\n", action.c_str(), dir.c_str());
    return 1;
  }
  if (action == "ls") return ls(dir, json);
  if (action == "verify") return verify(dir, json);
  if (action == "inspect") return inspect(dir, json);
  std::fprintf(stderr, "scaleguard ckpt: unknown action '%s'\n%s", action.c_str(), kUsage);
  return 2;
}

const bool registered = scaleguard::cli::register_verb({"ckpt", "list, verify and inspect checkpoints", run});

}  // namespace
