// Harness 2: the admin's config files. The input is one INI file, read both ways:
//   - as a policy (load_policy: ini pre-scan, Boost.Program_options, [rules], partitions),
//     with the shipped configs/catalog.ini;
//   - as a catalog (load_catalog), and then the shipped configs/policy.ini on that catalog.
// Whatever loads must describe itself and drive decide() on a few ordinary jobs: a file
// `scaleguard policy check` accepts must never crash slurmctld later.
//
// The file is written to a private temp directory that also holds catalog.ini (a link to
// the shipped one), so `catalog = catalog.ini` resolves the way it does on a cluster. A
// `catalog` line naming a path with '/' gets the shipped catalog as an override instead:
// the harness must not open whatever file (a FIFO, /dev/stdin) the fuzzer spells.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_common.h"
#include "scaleguard/policy.h"

namespace {

struct TempDir {
  std::string dir, input, catalog;
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/sg-fuzz-policy.XXXXXX";
    if (!mkdtemp(&pattern[0])) sg_fuzz::fail("mkdtemp failed", pattern);
    dir = pattern;
    input = dir + "/input.ini";
    catalog = sg_fuzz::config_dir() + "/catalog.ini";
    if (symlink(catalog.c_str(), (dir + "/catalog.ini").c_str()) != 0) sg_fuzz::fail("symlink failed", dir);
  }
  ~TempDir() {
    unlink(input.c_str());
    unlink((dir + "/catalog.ini").c_str());
    rmdir(dir.c_str());
  }
};

TempDir& temp() {
  static TempDir t;
  return t;
}

void write_file(const std::string& path, const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) sg_fuzz::fail("cannot write", path);
  if (size && std::fwrite(data, 1, size, f) != size) sg_fuzz::fail("short write", path);
  std::fclose(f);
}

// True if a line mentioning "catalog" also holds a '/' (see the header comment).
bool names_catalog_path(const std::string& text) {
  size_t b = 0;
  while (b < text.size()) {
    size_t e = text.find('\n', b);
    if (e == std::string::npos) e = text.size();
    std::string line = text.substr(b, e - b);
    for (char& c : line) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
    if (line.find("catalog") != std::string::npos && line.find('/') != std::string::npos) return true;
    b = e + 1;
  }
  return false;
}

void exercise(const scaleguard::Policy& policy) {
  std::string text = scaleguard::describe(policy);
  SG_FUZZ_CHECK(!text.empty(), "");
  SG_FUZZ_CHECK(policy.default_partition() != nullptr, policy.path);
  // A job without intent, a 350M model on 8 GPUs, a 7B model on the default partition with
  // a time limit, and one on every partition by name.
  scaleguard::JobRequest plain;
  plain.gpus_total = 8;
  (void)scaleguard::decide(plain, policy);
  scaleguard::JobRequest small;
  small.gpus_total = 8;
  small.model = "350M";
  small.single_gpu_hours = 11;
  (void)scaleguard::decide(small, policy);
  for (const auto& part : policy.partitions) {
    scaleguard::JobRequest big;
    big.gpus_per_node = 8;
    big.nodes_min = big.nodes_max = 2;
    big.model = "7B";
    big.tokens = 40e9;
    big.time_limit_min = 600;
    big.partition = part.name;
    auto d = scaleguard::decide(big, policy);
    (void)scaleguard::to_json(d);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 16)) return -1;  // keep inputs small; the 1 MiB limit is tested elsewhere
  TempDir& t = temp();
  write_file(t.input, data, size);
  const std::string text(reinterpret_cast<const char*>(data), size);

  auto policy = scaleguard::load_policy(t.input, names_catalog_path(text) ? t.catalog : "");
  if (policy) exercise(**policy);
  else SG_FUZZ_CHECK(!policy.error().message.empty(), "an error without a message");

  auto catalog = scaleguard::load_catalog(t.input);
  if (catalog) {
    auto on_it = scaleguard::load_policy(sg_fuzz::config_dir() + "/policy.ini", t.input);
    if (on_it) exercise(**on_it);
  }
  return 0;
}
