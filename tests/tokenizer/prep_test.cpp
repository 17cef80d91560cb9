// prep(): text and JSONL in, token files out (their headers and Megatron index byte by byte),
// the order kept whatever the threads, input errors by file:line.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "scaleguard/token_prep.h"

namespace tk = scaleguard::tokenizer;
using nlohmann::json;

namespace {

// The smallest byte-level BPE: the 256 bytes (GPT-2's map) and one merge "h e" -> 256, and
// "<|endoftext|>" = 257.
std::string tokenizer_json() {
  json vocab = json::object();
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    const uint32_t cp = printable ? b : 256 + n++;
    std::string s;
    if (cp < 0x80) s += static_cast<char>(cp);
    else s += static_cast<char>(0xC0 | (cp >> 6)), s += static_cast<char>(0x80 | (cp & 0x3F));
    vocab[s] = b;
  }
  vocab["he"] = 256;
  return json{{"pre_tokenizer", {{"type", "ByteLevel"}}},
              {"added_tokens", {{{"id", 257}, {"content", "<|endoftext|>"}, {"special", true}}}},
              {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"h e"}}}}}
      .dump();
}

class Prep : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/sg_prep_" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::system(("rm -rf " + dir_ + " && mkdir -p " + dir_).c_str());
    tok_ = tk::load_hf_json(tokenizer_json(), "t.json");
  }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name, std::ios::binary) << text;
    return dir_ + "/" + name;
  }
  std::string read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  template <class T>
  std::vector<T> values(const std::string& bytes, size_t from) {
    std::vector<T> v((bytes.size() - from) / sizeof(T));
    std::memcpy(v.data(), bytes.data() + from, v.size() * sizeof(T));
    return v;
  }
  std::string dir_;
  std::unique_ptr<tk::Tokenizer> tok_;
};

TEST_F(Prep, JsonlAndTextDocumentsEachEndWithEos) {
  tk::PrepOptions o;
  o.inputs = {write("a.jsonl", "{\"text\": \"hehe\"}\n\n{\"id\": 2, \"text\": \"h\\u00e9\"}\n{\"text\": \"\"}\n"),
              write("b.txt", "he\n")};
  o.output = dir_ + "/out.bin";
  o.format = "llmc";
  const tk::PrepStats s = tk::prep(*tok_, o);
  EXPECT_EQ(s.documents, 3u);
  EXPECT_EQ(s.skipped_empty, 1u);
  EXPECT_EQ(s.token_bytes, 2u);
  const std::string f = read(o.output);
  ASSERT_EQ(f.size(), 1024u + 2 * s.tokens);
  const auto header = values<int32_t>(f.substr(0, 12), 0);
  EXPECT_EQ(header, (std::vector<int32_t>{20240520, 1, static_cast<int32_t>(s.tokens)}));
  // hehe | EOS | h, é (C3 A9) | EOS | he, \n | EOS
  EXPECT_EQ(values<uint16_t>(f, 1024), (std::vector<uint16_t>{256, 256, 257, 'h', 0xC3, 0xA9, 257, 256, '\n', 257}));
  EXPECT_EQ(s.written, (std::vector<std::string>{o.output}));
}

TEST_F(Prep, MegatronIndexDescribesEveryDocument) {
  tk::PrepOptions o;
  o.inputs = {write("a.jsonl", "{\"text\": \"hehe\"}\n{\"text\": \"x\"}\n")};
  o.output = dir_ + "/corpus.bin";  // the prefix is taken from it
  o.format = "megatron";
  tk::prep(*tok_, o);
  EXPECT_EQ(values<uint16_t>(read(dir_ + "/corpus.bin"), 0), (std::vector<uint16_t>{256, 256, 257, 'x', 257}));
  const std::string idx = read(dir_ + "/corpus.idx");
  ASSERT_EQ(idx.size(), 9 + 8 + 1 + 8 + 8 + 2 * 4 + 2 * 8 + 3 * 8u);
  EXPECT_EQ(idx.substr(0, 9), std::string("MMIDIDX\0\0", 9));
  EXPECT_EQ(values<uint64_t>(idx.substr(9, 8), 0), std::vector<uint64_t>{1});
  EXPECT_EQ(idx[17], 8);  // uint16
  EXPECT_EQ(values<uint64_t>(idx.substr(18, 16), 0), (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(values<int32_t>(idx.substr(34, 8), 0), (std::vector<int32_t>{3, 2}));
  EXPECT_EQ(values<int64_t>(idx.substr(42, 16), 0), (std::vector<int64_t>{0, 6}));
  EXPECT_EQ(values<int64_t>(idx.substr(58), 0), (std::vector<int64_t>{0, 1, 2}));
}

TEST_F(Prep, SgAndU32LayoutsAndTheEosChoice) {
  tk::PrepOptions o;
  o.inputs = {write("a.txt", "he")};
  o.output = dir_ + "/t.sg";
  o.format = "sg";
  o.eos = "none";
  tk::prep(*tok_, o);
  std::string f = read(o.output);
  ASSERT_EQ(f.size(), 32u + 2);
  EXPECT_EQ(f.substr(0, 8), "SGTOKENS");
  EXPECT_EQ(values<uint32_t>(f.substr(8, 8), 0), (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(values<uint64_t>(f.substr(16, 8), 0), std::vector<uint64_t>{1});
  o.format = "llmc-u32";
  o.eos = "10";  // an id
  o.output = dir_ + "/t.bin";
  tk::prep(*tok_, o);
  f = read(o.output);
  EXPECT_EQ(values<int32_t>(f.substr(0, 12), 0), (std::vector<int32_t>{20240801, 7, 2}));
  EXPECT_EQ(values<uint32_t>(f, 1024), (std::vector<uint32_t>{256, 10}));
  o.eos = "<nope>";
  EXPECT_THROW(tk::prep(*tok_, o), tk::Error);
}

TEST_F(Prep, ManyThreadsWriteInInputOrder) {
  std::string jsonl;
  for (int i = 0; i < 60000; ++i) jsonl += "{\"text\": \"he " + std::to_string(i) + " h\\u00e9\"}\n";  // > 1 chunk
  tk::PrepOptions o;
  o.inputs = {write("a.jsonl", jsonl), write("b.txt", "tail he")};
  o.output = dir_ + "/one.bin";
  o.threads = 1;
  tk::prep(*tok_, o);
  o.output = dir_ + "/many.bin";
  o.threads = 5;
  const tk::PrepStats s = tk::prep(*tok_, o);
  EXPECT_EQ(s.documents, 60001u);
  EXPECT_EQ(s.threads, 5u);
  EXPECT_GT(s.input_bytes, size_t{1} << 20);
  EXPECT_EQ(read(dir_ + "/one.bin"), read(dir_ + "/many.bin"));
}

TEST_F(Prep, InputErrorsNameFileAndLine) {
  auto fails = [&](const std::vector<std::string>& inputs, const std::string& field, const std::string& words) {
    tk::PrepOptions o;
    o.inputs = inputs;
    o.output = dir_ + "/x.bin";
    o.field = field;
    try {
      tk::prep(*tok_, o);
    } catch (const tk::Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
      std::ifstream tmp(dir_ + "/x.bin.tmp");
      EXPECT_FALSE(tmp.good()) << "the temporary file is left behind";
      return;
    }
    ADD_FAILURE() << "no error; expected " << words;
  };
  const std::string good = write("good.jsonl", "{\"text\": \"he\"}\n");
  fails({good, write("bad.jsonl", "{\"text\": \"he\"}\n{\"text\": \"he\"\n")}, "text", "bad.jsonl:2: not a JSON document");
  fails({write("nofield.jsonl", "{\"body\": \"he\"}\n")}, "text", "nofield.jsonl:1: no string field 'text'");
  fails({write("num.jsonl", "{\"text\": 5}\n")}, "text", "no string field");
  fails({dir_ + "/missing.txt"}, "text", "missing.txt");
  fails({write("empty.txt", "")}, "text", "no text");
  // Invalid UTF-8 in a text file is replaced, not fatal.
  tk::PrepOptions o;
  o.inputs = {write("latin1.txt", "caf\xe9")};
  o.output = dir_ + "/l.bin";
  EXPECT_EQ(tk::prep(*tok_, o).replaced_utf8, 1u);
}

}  // namespace
