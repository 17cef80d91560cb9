// safetensors reader and writer (runner/ckpt/safetensors.cpp): a round trip, the sharded
// index, and every hostile header the reader must refuse with an error naming the file and
// the tensor (never a crash, never an allocation the header asks for).
#include "scaleguard/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace st = scaleguard::safetensors;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/sg-safetensors-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<size_t>(i)] = static_cast<char>(n >> (8 * i));
  return s;
}

// A file of the 8-byte length, `header` and `data_bytes` zero bytes.
std::string write_raw(const TempDir& d, const std::string& header, size_t data_bytes, const std::string& name = "x.safetensors",
                      int64_t claimed_len = -1) {
  const std::string path = d.file(name);
  std::ofstream f(path, std::ios::binary);
  f << le64(claimed_len < 0 ? header.size() : static_cast<uint64_t>(claimed_len)) << header << std::string(data_bytes, '\0');
  return path;
}

std::string open_error(const std::string& path) {
  auto r = st::File::open(path);
  return r ? "" : r.error().str();
}

void expect_refused(const std::string& path, std::initializer_list<const char*> words) {
  const std::string e = open_error(path);
  ASSERT_FALSE(e.empty()) << "accepted " << path;
  EXPECT_NE(e.find(path), std::string::npos) << e;
  for (const char* w : words) EXPECT_NE(e.find(w), std::string::npos) << "'" << w << "' not in: " << e;
}

st::Fetch iota_fetch() {
  return [](const st::TensorSpec& s, std::vector<uint8_t>& out) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i * 7 + s.name.size());
    return std::string();
  };
}

}  // namespace

TEST(Safetensors, RoundTripSortedPaddedMetadata) {
  TempDir d;
  std::vector<st::TensorSpec> specs{{"b.weight", "F32", {2, 3}}, {"a.bias", "BF16", {5}}, {"c.scalar", "F32", {}}};
  auto w = st::write_file(d.file("m.safetensors"), specs, iota_fetch(), {{"scaleguard_model", "gpt"}});
  ASSERT_TRUE(w) << w.error().str();
  EXPECT_EQ(*w, fs::file_size(d.file("m.safetensors")));
  auto f = st::File::open(d.file("m.safetensors"));
  ASSERT_TRUE(f) << f.error().str();
  const st::Header& h = (*f)->header();
  EXPECT_EQ(h.data_start % 8, 0u);  // header padded to a multiple of 8
  ASSERT_EQ(h.tensors.size(), 3u);
  EXPECT_EQ(h.tensors[0].name, "a.bias");
  EXPECT_EQ(h.tensors[0].begin, 0u);  // data in name order
  EXPECT_EQ(h.tensors[1].name, "b.weight");
  EXPECT_EQ(h.tensors[1].begin, 10u);
  EXPECT_EQ(h.tensors[1].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(h.tensors[2].shape, std::vector<int64_t>{});
  EXPECT_EQ(h.metadata.at("format"), "pt");
  EXPECT_EQ(h.metadata.at("scaleguard_model"), "gpt");
  const st::TensorInfo* b = h.find("b.weight");
  ASSERT_NE(b, nullptr);
  const uint8_t* p = (*f)->data(*b);
  for (size_t i = 0; i < 24; ++i) ASSERT_EQ(p[i], static_cast<uint8_t>(i * 7 + 8));
  // no temporary left behind
  int files = 0;
  for (const auto& e : fs::directory_iterator(d.path)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

TEST(Safetensors, ReadsAFileWrittenByHand) {
  TempDir d;  // the layout of the reference implementation's documentation
  const std::string hdr = R"({"t":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},"__metadata__":{"k":"v"}})";
  auto f = st::File::open(write_raw(d, hdr, 4));
  ASSERT_TRUE(f) << f.error().str();
  EXPECT_EQ((*f)->header().tensors.at(0).numel(), 2u);
}

TEST(Safetensors, ShardedIndexRoundTrip) {
  TempDir d;
  std::vector<st::TensorSpec> specs;
  for (int i = 0; i < 5; ++i) specs.push_back({"layer." + std::to_string(i), "F32", {4, 4}});  // 64 bytes each
  auto files = st::write_model(d.path.string(), specs, iota_fetch(), 130);
  ASSERT_TRUE(files) << files.error().str();
  ASSERT_EQ(files->size(), 4u);  // 2 + 2 + 1 tensors, plus the index
  EXPECT_EQ(files->at(0), "model-00001-of-00003.safetensors");
  EXPECT_EQ(files->back(), "model.safetensors.index.json");
  auto w = st::Weights::open(d.path.string());
  ASSERT_TRUE(w) << w.error().str();
  EXPECT_EQ(w->names().size(), 5u);
  const auto* e = w->find("layer.4");
  ASSERT_NE(e, nullptr);
  EXPECT_NE(e->file->path().find("model-00003-of-00003"), std::string::npos);
  // Unsharded when it fits, and a stale index from an earlier sharded export is removed.
  auto one = st::write_model(d.path.string(), specs, iota_fetch(), 1 << 20);
  ASSERT_TRUE(one) << one.error().str();
  EXPECT_EQ(one->size(), 1u);
  EXPECT_FALSE(fs::exists(d.file("model.safetensors.index.json")));
  auto w1 = st::Weights::open(d.path.string());
  ASSERT_TRUE(w1) << w1.error().str();
  EXPECT_EQ(w1->origin(), d.file("model.safetensors"));
}

TEST(Safetensors, RefusesBadHeaderLength) {
  TempDir d;
  const std::string hdr = R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  expect_refused(write_raw(d, hdr, 4, "long.safetensors", 1 << 20), {"header length", "past the end of the file"});
  expect_refused(write_raw(d, hdr, 4, "huge.safetensors", int64_t{1} << 40), {"header length", "allowed"});
  {
    std::ofstream f(d.file("short.safetensors"), std::ios::binary);
    f << "abc";
  }
  expect_refused(d.file("short.safetensors"), {"8-byte"});
  expect_refused(write_raw(d, "", 0, "empty-header.safetensors"), {"'{'"});
}

TEST(Safetensors, RefusesInvalidJsonAndNonObjects) {
  TempDir d;
  expect_refused(write_raw(d, R"({"t": {"dtype": "F32", )", 0, "a.safetensors"), {"not a valid JSON"});
  expect_refused(write_raw(d, R"({"t": [1, 2]})", 0, "b.safetensors"), {"tensor 't'", "not an object"});
  expect_refused(write_raw(d, R"({"t": {"dtype": "F32", "shape": [1]}})", 0, "c.safetensors"), {"tensor 't'", "data_offsets"});
  expect_refused(write_raw(d, R"({"t": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4, "d.safetensors"),
                 {"tensor 't'", "shape"});
  expect_refused(write_raw(d, R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "x": 1}})", 4, "e.safetensors"),
                 {"tensor 't'", "unknown field"});
  expect_refused(write_raw(d, R"({"__metadata__": {"a": 1}})", 0, "f.safetensors"), {"__metadata__"});
}

TEST(Safetensors, RefusesOffsetsPastTheEndAndBackwards) {
  TempDir d;
  expect_refused(write_raw(d, R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 8, "a.safetensors"),
                 {"tensor 'w'", "past the end"});
  expect_refused(write_raw(d, R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}})", 8, "b.safetensors"),
                 {"tensor 'w'", "begin after end"});
  expect_refused(
      write_raw(d, R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 18446744073709551615]}})", 8, "c.safetensors"),
      {"tensor 'w'", "past the end"});
}

TEST(Safetensors, RefusesExtentNotMatchingShape) {
  TempDir d;
  expect_refused(write_raw(d, R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8, "a.safetensors"),
                 {"tensor 'w'", "needs 12"});
  // 2^32 x 2^32 x 4 bytes overflows 64 bits: refused, not wrapped to a small number.
  expect_refused(
      write_raw(d, R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})", 0, "b.safetensors"),
      {"tensor 'w'", "overflows"});
}

TEST(Safetensors, RefusesOverlapGapsAndTrailingBytes) {
  TempDir d;
  expect_refused(write_raw(d,
                           R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                               "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                           12, "overlap.safetensors"),
                 {"tensor 'b'", "overlap tensor 'a'"});
  expect_refused(write_raw(d,
                           R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                               "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
                           12, "gap.safetensors"),
                 {"tensor 'b'", "belong to no tensor"});
  expect_refused(write_raw(d, R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 12, "trailing.safetensors"),
                 {"8 bytes after the last tensor"});
}

TEST(Safetensors, RefusesUnknownDtypeAndDuplicates) {
  TempDir d;
  expect_refused(write_raw(d, R"({"w": {"dtype": "F33", "shape": [1], "data_offsets": [0, 4]}})", 4, "a.safetensors"),
                 {"tensor 'w'", "unknown dtype 'F33'"});
  expect_refused(write_raw(d,
                           R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                               "w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                           8, "dup.safetensors"),
                 {"tensor 'w'", "twice"});
}

TEST(Safetensors, IndexRefusesPathTraversalAndMismatches) {
  TempDir d;
  for (const char* bad : {"../x.safetensors", "/etc/passwd", "sub/x.safetensors", "..", ""}) {
    auto r = st::parse_index(std::string(R"({"weight_map": {"w": ")") + bad + "\"}}", "idx");
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().str().find("tensor 'w'"), std::string::npos) << r.error().str();
  }
  EXPECT_FALSE(st::parse_index(R"({"metadata": {}})", "idx"));
  EXPECT_FALSE(st::parse_index(R"({"weight_map": {"w": 3}})", "idx"));
  // The index names a tensor its file lacks; a file holds a tensor the index does not list.
  auto one = st::write_file(d.file("a.safetensors"), {{"w", "F32", {1}}, {"extra", "F32", {1}}}, iota_fetch());
  ASSERT_TRUE(one);
  {
    std::ofstream f(d.file("model.safetensors.index.json"));
    f << R"({"weight_map": {"w": "a.safetensors", "v": "a.safetensors", "extra": "a.safetensors"}})";
  }
  auto w = st::Weights::open(d.path.string());
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().str().find("tensor 'v'"), std::string::npos) << w.error().str();
  {
    std::ofstream f(d.file("model.safetensors.index.json"));
    f << R"({"weight_map": {"w": "a.safetensors"}})";
  }
  w = st::Weights::open(d.path.string());
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().str().find("tensor 'extra'"), std::string::npos) << w.error().str();
  {
    std::ofstream f(d.file("model.safetensors.index.json"));
    f << R"({"weight_map": {"w": "a.safetensors", "extra": "a.safetensors"}})";
  }
  w = st::Weights::open(d.path.string());
  ASSERT_TRUE(w) << w.error().str();
  EXPECT_EQ(w->names(), (std::vector<std::string>{"extra", "w"}));
}

TEST(Safetensors, DirectoryWithoutWeights) {
  TempDir d;
  auto w = st::Weights::open(d.path.string());
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().str().find("neither model.safetensors"), std::string::npos);
}

// Every prefix of a valid file is refused cleanly (truncation anywhere).
TEST(Safetensors, EveryTruncationRefused) {
  TempDir d;
  auto w = st::write_file(d.file("full.safetensors"), {{"a", "F32", {3}}, {"b", "BF16", {2, 2}}}, iota_fetch());
  ASSERT_TRUE(w);
  std::ifstream in(d.file("full.safetensors"), std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (size_t n = 0; n < all.size(); ++n) {
    auto r = st::parse_prefix(reinterpret_cast<const uint8_t*>(all.data()), n, n, "cut");
    EXPECT_FALSE(r) << "a prefix of " << n << " bytes was accepted";
  }
  EXPECT_TRUE(st::parse_prefix(reinterpret_cast<const uint8_t*>(all.data()), all.size(), all.size(), "whole"));
}
