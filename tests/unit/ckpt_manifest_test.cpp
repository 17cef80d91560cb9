// Checkpoint manifest: JSON round trip, validation of lying manifests, directory listing and
// file verification (real files in a temporary directory).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "scaleguard/checksum.h"
#include "scaleguard/ckpt_manifest.h"

namespace ck = scaleguard::ckpt;
namespace fs = std::filesystem;

namespace {

ck::Manifest sample() {
  ck::Manifest m;
  m.step = 42;
  m.created = "2026-12-02T17:00:00Z";
  m.code_version = "0.1.0";
  m.strategy = "ddp";
  m.dp = 2;
  m.world_size = 2;
  m.model_name = "mlp";
  m.config_hash = "abc";
  for (int r = 0; r < 2; ++r) {
    ck::ShardEntry s;
    s.rank = r;
    s.file = ck::shard_file_name(r);
    s.bytes = 100;
    s.xxh3 = 0x0123456789abcdefULL + r;
    s.datasets.push_back({"params/w", "float32", false, {4, 3}, {2 * r, 0}, {2, 3}, 24, 7});
    s.datasets.push_back({"state/rng", "uint8", true, {5}, {0}, {5}, 5, 9});
    m.shards.push_back(s);
  }
  return m;
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
  const auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? s : s.replace(at, from.size(), to);
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("ckpt_manifest_test." + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

}  // namespace

TEST(CkptManifest, RoundTrip) {
  const auto m = sample();
  auto back = ck::parse_manifest(ck::manifest_to_json(m), "test");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->step, 42);
  EXPECT_EQ(back->strategy, "ddp");
  ASSERT_EQ(back->shards.size(), 2u);
  EXPECT_EQ(back->shards[1].xxh3, m.shards[1].xxh3);
  EXPECT_EQ(back->shards[1].datasets[0].offset, (std::vector<int64_t>{2, 0}));
  EXPECT_TRUE(back->shards[0].datasets[1].rank_scoped);
}

TEST(CkptManifest, RejectsShapesThatLie) {
  auto parse = [](const ck::Manifest& m) { return ck::parse_manifest(ck::manifest_to_json(m), "m.json"); };
  ck::Manifest m = sample();
  m.shards[1].datasets[0].extent = {9, 3};   // slice outside the global shape
  m.shards[1].datasets[0].bytes = 108;
  auto r = parse(m);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("outside global_shape"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("m.json"), std::string::npos);

  m = sample();
  m.shards[0].datasets[0].bytes = 48;        // bytes that do not match the extent
  r = parse(m);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("bytes 48"), std::string::npos) << r.error().message;

  m = sample();
  m.shards[1].datasets[0].offset = {1, 0};   // two shards claiming the same row
  r = parse(m);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("overlap"), std::string::npos) << r.error().message;

  m = sample();
  m.shards[1].datasets[0].global_shape = {6, 3};   // one tensor, two global shapes
  r = parse(m);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("different dtype or global_shape"), std::string::npos) << r.error().message;
}

TEST(CkptManifest, RejectsMalformed) {
  EXPECT_FALSE(ck::parse_manifest("{", "m.json"));
  EXPECT_FALSE(ck::parse_manifest("[]", "m.json"));
  const std::string good = ck::manifest_to_json(sample());
  auto r = ck::parse_manifest(replace(good, "\"float32\"", "\"float7\""), "m.json");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("unknown dtype"), std::string::npos);
  r = ck::parse_manifest(replace(good, "\"world_size\"", "\"world_sizes\""), "m.json");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("missing field 'world_size'"), std::string::npos) << r.error().message;
  r = ck::parse_manifest(replace(good, "\"step\": 42", "\"step\": \"42\""), "m.json");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("wrong type"), std::string::npos);
  r = ck::parse_manifest(replace(good, "\"format_version\": 1", "\"format_version\": 9"), "m.json");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("not supported"), std::string::npos);
}

TEST(CkptManifest, Names) {
  EXPECT_EQ(ck::step_dir_name(100), "step-00000100");
  EXPECT_EQ(ck::step_dir_name(123456789012), "step-123456789012");
  EXPECT_EQ(ck::shard_file_name(3), "shard-3.h5");
  EXPECT_EQ(ck::dtype_size("bfloat16"), 2u);
  EXPECT_EQ(ck::dtype_size("complex"), 0u);
}

TEST(Checksum, StreamEqualsOneShotAndHexRoundTrips) {
  const std::string data(100000, 'x');
  scaleguard::Xxh3Stream s;
  s.update(data.data(), 1234);
  s.update(data.data() + 1234, data.size() - 1234);
  EXPECT_EQ(s.digest(), scaleguard::xxh3_64(data.data(), data.size()));
  const uint64_t v = 0xfedcba9876543210ULL;
  EXPECT_EQ(scaleguard::hex64(v), "fedcba9876543210");
  EXPECT_EQ(scaleguard::parse_hex64("fedcba9876543210"), v);
  EXPECT_FALSE(scaleguard::parse_hex64("xyz"));
  EXPECT_FALSE(scaleguard::xxh3_file("/nonexistent/file"));
}

TEST(CkptManifest, ListAndVerifyRealFiles) {
  TempDir tmp;
  // A committed checkpoint with one real shard file.
  const fs::path dir = tmp.path / ck::step_dir_name(5);
  fs::create_directories(dir);
  const std::string payload(4096, 'a');
  write_file(dir / "shard-0.h5", payload);
  ck::Manifest m = sample();
  m.step = 5;
  m.world_size = 1;
  m.shards.resize(1);
  m.shards[0].datasets.resize(1);
  m.shards[0].datasets[0].offset = {0, 0};
  m.shards[0].datasets[0].extent = {4, 3};
  m.shards[0].datasets[0].bytes = 48;
  m.shards[0].bytes = payload.size();
  m.shards[0].xxh3 = scaleguard::xxh3_64(payload.data(), payload.size());
  write_file(dir / ck::kManifestName, ck::manifest_to_json(m));
  // An unfinished save, a step without manifest, and an unrelated directory.
  fs::create_directories(tmp.path / "step-00000009.partial");
  fs::create_directories(tmp.path / "step-00000007");
  fs::create_directories(tmp.path / "notes");

  auto listed = ck::list_checkpoints(tmp.path.string());
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->size(), 3u);
  EXPECT_EQ((*listed)[0].step, 5);
  EXPECT_EQ((*listed)[0].status, ck::Status::committed);
  EXPECT_EQ((*listed)[1].status, ck::Status::broken);
  EXPECT_EQ((*listed)[2].status, ck::Status::partial);

  auto read = ck::read_manifest(dir.string());
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_TRUE(ck::verify_files(dir.string(), *read).empty());

  // One flipped byte: named, checksum reason.
  std::string flipped = payload;
  flipped[2000] = 'b';
  write_file(dir / "shard-0.h5", flipped);
  auto problems = ck::verify_files(dir.string(), *read);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].file.find("shard-0.h5"), std::string::npos);
  EXPECT_NE(problems[0].why.find("checksum"), std::string::npos);
  // Truncated: the size says so before any reading.
  write_file(dir / "shard-0.h5", payload.substr(0, 100));
  problems = ck::verify_files(dir.string(), *read);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].why.find("truncated"), std::string::npos);
  fs::remove(dir / "shard-0.h5");
  problems = ck::verify_files(dir.string(), *read);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].why.find("missing"), std::string::npos);
}
