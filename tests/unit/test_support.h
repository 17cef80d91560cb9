// Helpers for the planner's unit tests: the real configs, temporary config files.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "scaleguard/catalog.h"
#include "scaleguard/decide.h"
#include "scaleguard/policy.h"

namespace scaleguard::test {

inline std::string source(const std::string& rel) { return std::string(SCALEGUARD_SOURCE_DIR) + "/" + rel; }
inline std::string catalog_file() { return source("configs/catalog.ini"); }

inline const Catalog& real_catalog() {
  static const Catalog cat = [] {
    auto c = load_catalog(catalog_file());
    if (!c) ADD_FAILURE() << c.error().str();
    return c.ok() ? c.value() : Catalog{};
  }();
  return cat;
}

// A file in a fresh temporary directory, removed with the object.
class TempFile {
 public:
  explicit TempFile(const std::string& content, const std::string& name = "config.ini") {
    char tmpl[] = "/tmp/scaleguard-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/" + name;
    std::ofstream(path_) << content;
  }
  ~TempFile() {
    std::remove(path_.c_str());
    rmdir(dir_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string dir_, path_;
};

// A policy over the real catalog: `rules` lines go into [rules], `partitions` replace the
// standard ones when given.
inline std::string policy_text(const std::string& rules = "", const std::string& partitions = "") {
  std::string p = "catalog = " + catalog_file() + "\ncheckpoint_roots = /scratch,/tmp\n[rules]\n" + rules + "\n";
  if (!partitions.empty()) return p + partitions;
  return p +
         "[partition od]\ninstance = p4d.24xlarge\ncapacity = on-demand\nfabric = efa\n"
         "default_time = 1:00:00\nmax_time = 7-00:00:00\ndefault = yes\n"
         "[partition spot]\ninstance = p4d.24xlarge\ncapacity = spot\nfabric = efa\nmax_time = 7-00:00:00\n"
         "[partition eth]\ninstance = p4d.24xlarge\nfabric = ethernet\nmax_time = 7-00:00:00\n"
         "[partition v100x1]\ninstance = p3.2xlarge\nfabric = none\nmax_time = 7-00:00:00\n"
         "[partition v100x4]\ninstance = p3.8xlarge\nfabric = none\nmax_time = 7-00:00:00\n"
         "[partition h100]\ninstance = p5.48xlarge\nfabric = efa\nmax_time = 7-00:00:00\n";
}

inline std::shared_ptr<const Policy> load(const std::string& text) {
  TempFile f(text, "policy.ini");
  auto p = load_policy(f.path());
  if (!p) ADD_FAILURE() << p.error().str();
  return p.ok() ? p.value() : nullptr;
}

inline bool fired(const Decision& d, const std::string& id) {
  for (const auto& r : d.rules)
    if (r.id == id) return true;
  return false;
}

}  // namespace scaleguard::test
