// The tokenizers on small hand-made models whose ids are worked out by hand, and every kind
// of broken tokenizer file. The parity with the reference implementations over a large mixed
// corpus is parity_*.sh.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "byte_bpe.h"
#include "scaleguard/tokenizer.h"
#include "utf8.h"

namespace tk = scaleguard::tokenizer;
using nlohmann::json;

namespace {

std::vector<uint32_t> encode(const tk::Tokenizer& t, std::string_view text) {
  std::vector<uint32_t> ids;
  t.encoder()->encode(text, ids);
  return ids;
}

// GPT-2's byte -> character map (written out independently of hf_json.cpp's).
std::string byte_char(unsigned char b) {
  static std::vector<uint32_t> map = [] {
    std::vector<uint32_t> m(256);
    std::vector<int> bs;
    for (int i = '!'; i <= '~'; ++i) bs.push_back(i);
    for (int i = 0xA1; i <= 0xAC; ++i) bs.push_back(i);
    for (int i = 0xAE; i <= 0xFF; ++i) bs.push_back(i);
    for (int b : bs) m[b] = b;
    int n = 0;
    for (int b = 0; b < 256; ++b)
      if (std::find(bs.begin(), bs.end(), b) == bs.end()) m[b] = 256 + n++;
    return m;
  }();
  const uint32_t cp = map[b];
  std::string s;
  if (cp < 0x80) s += static_cast<char>(cp);
  else s += static_cast<char>(0xC0 | (cp >> 6)), s += static_cast<char>(0x80 | (cp & 0x3F));
  return s;
}

std::string mapped(const std::string& bytes) {
  std::string s;
  for (unsigned char b : bytes) s += byte_char(b);
  return s;
}

// A byte-level BPE: the 256 bytes are ids 0..255 in byte order, then the merges' tokens.
json tiny_tokenizer_json(const std::vector<std::pair<std::string, std::string>>& merges) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_char(static_cast<unsigned char>(b))] = b;
  json m = json::array();
  uint32_t next = 256;
  for (const auto& [a, b] : merges) {
    const std::string ab = mapped(a + b);
    if (!vocab.contains(ab)) vocab[ab] = next++;
    m.push_back(mapped(a) + " " + mapped(b));
  }
  return {{"version", "1.0"},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
          {"added_tokens", json::array()},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", m}}}};
}

const std::vector<std::pair<std::string, std::string>> kMerges = {
    {"l", "l"}, {"h", "e"}, {"he", "ll"}, {" ", "w"}, {"hell", "o"}, {"o", "r"}, {" w", "or"}, {"l", "d"}};
// ids: ll 256, he 257, hell 258, " w" 259, hello 260, or 261, " wor" 262, ld 263

TEST(Utf8, RepairReplacesMaximalSubpartsLikePython) {
  std::string out;
  // Python: b"a\xff\xe2\x82b".decode(errors="replace") == "a\ufffd\ufffdb"
  EXPECT_EQ(tk::repair_utf8("a\xff\xe2\x82" "b", out), 2u);
  EXPECT_EQ(out, "a\xEF\xBF\xBD\xEF\xBF\xBD" "b");
  // A surrogate (ED A0 80): three replacements, as Python.
  EXPECT_EQ(tk::repair_utf8("\xed\xa0\x80", out), 3u);
  EXPECT_EQ(tk::repair_utf8("plain \xc3\xa9t\xc3\xa9 \xf0\x9f\x98\x80", out), 0u);
  EXPECT_FALSE(tk::detail::valid_utf8("\xc0\xaf"));  // overlong
  EXPECT_FALSE(tk::detail::valid_utf8("\xf4\x90\x80\x80"));  // above U+10FFFF
}

TEST(Regex, WhitespaceIsUnicodeWhiteSpaceAsInTheReferenceEngines) {
  EXPECT_EQ(tk::detail::whitespace_as_unicode(R"(a[^\s\p{L}]b)", "t").find("\\s"), std::string::npos);
  EXPECT_THROW(tk::detail::whitespace_as_unicode(R"([\S])", "t"), tk::Error);
  // \s is Unicode White_Space, as in Rust's regex and Oniguruma: U+0085 and U+3000 in, U+FEFF out.
  auto matches = [](const char* pattern, std::string_view text) {
    tk::detail::Regex re(pattern, "t");
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(re.code(), nullptr);
    const int rc = pcre2_match(re.code(), reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0, 0, md, nullptr);
    pcre2_match_data_free(md);
    return rc > 0;
  };
  EXPECT_TRUE(matches(R"(^\s$)", "\xc2\x85"));
  EXPECT_TRUE(matches(R"(^[^\s\p{L}]$)", "!"));
  EXPECT_FALSE(matches(R"(^[^\s\p{L}]$)", "\xc2\x85"));
  EXPECT_FALSE(matches(R"(^\S$)", "\xe3\x80\x80"));  // U+3000
  EXPECT_TRUE(matches(R"(^\S$)", "\xef\xbb\xbf"));   // U+FEFF is not White_Space
}

TEST(ByteBpe, MergesByRankLeftmostFirst) {
  auto t = tk::load_hf_json(tiny_tokenizer_json(kMerges).dump(), "t.json");
  EXPECT_EQ(t->vocab_size(), 264u);
  // "hello" -> ll, he, hell, hello; " world" -> " w", or, " wor", ld; "!" a byte.
  EXPECT_EQ(encode(*t, "hello world!"), (std::vector<uint32_t>{260, 262, 263, '!'}));
  // "lll": the leftmost "ll" merges first.
  EXPECT_EQ(encode(*t, "lll"), (std::vector<uint32_t>{256, 'l'}));
  // Pre-tokenization: "hello", " " (\s+(?!\S)), " hello"; no merge across pieces ("l l").
  EXPECT_EQ(encode(*t, "hello  hello"), (std::vector<uint32_t>{260, ' ', ' ', 260}));
  EXPECT_EQ(encode(*t, "hel lo"), (std::vector<uint32_t>{257, 'l', ' ', 'l', 'o'}));
  // Bytes of other scripts pass through as bytes.
  EXPECT_EQ(encode(*t, "\xd0\xb4"), (std::vector<uint32_t>{0xD0, 0xB4}));
  std::vector<uint32_t> ids;
  EXPECT_THROW(t->encoder()->encode("bad \xff", ids), tk::Error);
}

TEST(ByteBpe, IgnoreMergesTakesAWholeTokenFirst) {
  // "ab" merges only through a rank-0 "b c" first; "abc" is a token reachable only whole.
  json j = tiny_tokenizer_json({{"b", "c"}, {"a", "bc"}, {"a", "b"}});
  j["model"]["vocab"][mapped("xyz")] = 300;
  EXPECT_EQ(encode(*tk::load_hf_json(j.dump(), "t.json"), "xyz"), (std::vector<uint32_t>{'x', 'y', 'z'}));
  j["model"]["ignore_merges"] = true;
  EXPECT_EQ(encode(*tk::load_hf_json(j.dump(), "t.json"), "xyz"), (std::vector<uint32_t>{300}));
  // New-style merges ([a, b] lists) read alike.
  json k = tiny_tokenizer_json(kMerges);
  json list = json::array();
  for (const auto& m : k["model"]["merges"]) {
    const std::string s = m.get<std::string>();
    list.push_back({s.substr(0, s.find(' ')), s.substr(s.find(' ') + 1)});
  }
  k["model"]["merges"] = list;
  EXPECT_EQ(encode(*tk::load_hf_json(k.dump(), "t.json"), "hello world!"), (std::vector<uint32_t>{260, 262, 263, '!'}));
}

TEST(ByteBpe, AddedTokensSplitTheTextFirst) {
  json j = tiny_tokenizer_json(kMerges);
  j["added_tokens"] = {{{"id", 264}, {"content", "<|end|>"}, {"special", true}},
                       {{"id", 265}, {"content", "<|end|>x"}, {"special", true}},
                       {{"id", 266}, {"content", "<s>"}, {"lstrip", true}, {"rstrip", true}}};
  auto t = tk::load_hf_json(j.dump(), "t.json");
  EXPECT_EQ(t->vocab_size(), 267u);
  EXPECT_EQ(encode(*t, "hello<|end|>hello"), (std::vector<uint32_t>{260, 264, 260}));
  EXPECT_EQ(encode(*t, "<|end|>xy"), (std::vector<uint32_t>{265, 'y'}));  // the longest
  EXPECT_EQ(encode(*t, "hello  <s>  hello"), (std::vector<uint32_t>{260, 266, 260}));  // strips both sides
  EXPECT_EQ(t->eos(), std::nullopt);
  EXPECT_EQ(t->token_id("<|end|>"), 264u);
  // The usual names give the end-of-document token; tokenizer_config.json overrides.
  j["added_tokens"].push_back({{"id", 267}, {"content", "<|endoftext|>"}, {"special", true}});
  EXPECT_EQ(tk::load_hf_json(j.dump(), "t.json")->eos(), 267u);
  EXPECT_EQ(tk::load_hf_json(j.dump(), "t.json", R"({"eos_token": {"content": "<|end|>"}})")->eos(), 264u);
  EXPECT_THROW(tk::load_hf_json(j.dump(), "t.json", R"({"eos_token": "<nope>"})"), tk::Error);
}

TEST(ByteBpe, SplitSequenceAndPrefixSpace) {
  json j = tiny_tokenizer_json(kMerges);
  // Llama 3's shape: Split(regex, Isolated) then ByteLevel without its own regex.
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         {{{"type", "Split"}, {"pattern", {{"Regex", R"(\p{N}{1,3}|[^\p{N}]+)"}}}, {"behavior", "Isolated"}, {"invert", false}},
                          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  auto t = tk::load_hf_json(j.dump(), "t.json");
  // "hello world" is one piece here: " w" + "or" + "ld" still merge inside it.
  EXPECT_EQ(encode(*t, "hello world"), (std::vector<uint32_t>{260, 262, 263}));
  EXPECT_EQ(encode(*t, "12345"), (std::vector<uint32_t>{'1', '2', '3', '4', '5'}));
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}};
  EXPECT_EQ(encode(*tk::load_hf_json(j.dump(), "t.json"), "world"), (std::vector<uint32_t>{262, 263}));
}

TEST(ByteBpe, BrokenTokenizerJsonIsRefusedByName) {
  auto refuses = [](const json& j, const std::string& words) {
    try {
      tk::load_hf_json(j.dump(), "my/tokenizer.json");
    } catch (const tk::Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("my/tokenizer.json"), std::string::npos) << what;
      EXPECT_NE(what.find(words), std::string::npos) << what;
      return;
    }
    ADD_FAILURE() << "accepted; expected an error about " << words;
  };
  const json good = tiny_tokenizer_json(kMerges);
  json j = good;
  j["normalizer"] = {{"type", "NFC"}};
  refuses(j, "normalizer");
  j = good;
  j["pre_tokenizer"] = {{"type", "Metaspace"}};
  refuses(j, "Metaspace");
  j = good;
  j["pre_tokenizer"] = nullptr;
  refuses(j, "ByteLevel");
  j = good;
  j["model"]["type"] = "Unigram";
  refuses(j, "Unigram");
  j = good;
  j["model"]["merges"].push_back("q nope");
  refuses(j, "nope");
  j = good;
  j["model"]["merges"][0] = 5;
  refuses(j, "merges[0]");
  j = good;
  j["model"]["vocab"]["x"] = -1;
  refuses(j, "vocab");
  j = good;
  j["model"]["vocab"].erase(byte_char(0x80));
  refuses(j, "byte 128");
  j = good;
  j["model"].erase("merges");
  refuses(j, "merges");
  j = good;
  j["model"]["byte_fallback"] = true;
  refuses(j, "byte_fallback");
  j = good;
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  refuses(j, "does not compile");
  j = good;
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "x"}}}, {"behavior", "Removed"}};
  refuses(j, "Removed");
  j = good;
  j["added_tokens"] = {{{"id", 9}, {"content", ""}}};
  refuses(j, "empty");
  EXPECT_THROW(tk::load_hf_json("{\"model\": {", "my/tokenizer.json"), tk::Error);
}

// A ranks file of r50k_base's size: the 256 bytes, then two-byte tokens in order.
std::string base64(const std::string& s) {
  static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < s.size(); i += 3) {
    uint32_t w = uint32_t(static_cast<unsigned char>(s[i])) << 16;
    if (i + 1 < s.size()) w |= uint32_t(static_cast<unsigned char>(s[i + 1])) << 8;
    if (i + 2 < s.size()) w |= static_cast<unsigned char>(s[i + 2]);
    out += a[w >> 18], out += a[(w >> 12) & 63];
    out += i + 1 < s.size() ? a[(w >> 6) & 63] : '=';
    out += i + 2 < s.size() ? a[w & 63] : '=';
  }
  return out;
}

std::string r50k_sized_ranks(std::vector<std::string>* tokens = nullptr) {
  std::vector<std::string> t;
  for (int b = 0; b < 256; ++b) t.push_back(std::string(1, static_cast<char>(b)));
  for (int x = 'a'; x <= 'z'; ++x)
    for (int y = 'a'; y <= 'z'; ++y) t.push_back({static_cast<char>(x), static_cast<char>(y)});
  t.push_back("abc");  // made from "ab"+"c" or "a"+"bc": one rank either way
  for (int i = 0; t.size() < 50256; ++i) t.push_back("\x01\x02" + std::to_string(i));
  std::string text;
  for (size_t r = 0; r < t.size(); ++r) text += base64(t[r]) + " " + std::to_string(r) + "\n";
  if (tokens) *tokens = t;
  return text;
}

TEST(Tiktoken, RanksMergeLowestConcatenationFirst) {
  std::vector<std::string> tokens;
  auto t = tk::load_tiktoken(r50k_sized_ranks(&tokens), "r.tiktoken");
  EXPECT_EQ(t->vocab_size(), 50257u);
  EXPECT_EQ(t->eos(), 50256u);
  auto rank = [&](const std::string& s) { return uint32_t(std::find(tokens.begin(), tokens.end(), s) - tokens.begin()); };
  EXPECT_EQ(encode(*t, "abc"), (std::vector<uint32_t>{rank("abc")}));          // whole
  EXPECT_EQ(encode(*t, "abcd"), (std::vector<uint32_t>{rank("ab"), rank("cd")}));  // ab < bc < cd
  EXPECT_EQ(encode(*t, "zab"), (std::vector<uint32_t>{'z', rank("ab")}));     // ab ranks below za
}

TEST(Tiktoken, BrokenRanksFilesAreRefused) {
  const std::string good = r50k_sized_ranks();
  auto refuses = [](const std::string& text, const std::string& words) {
    try {
      tk::load_tiktoken(text, "r.tiktoken");
    } catch (const tk::Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
      return;
    }
    ADD_FAILURE() << "accepted; expected an error about " << words;
  };
  refuses("IQ== 0\n", "no encoding known");
  refuses(good + "QUJD 7\n", "given twice");
  refuses(good + "QQ== 50256\n", "listed twice");
  refuses(good + "!!!! 50256\n", "not base64");
  refuses(good + "QUJDRA== x\n", "not a number");
  refuses(good + "QUJDRA== 99999999999\n", "below 2^31");
  refuses(good + "QUJDRA== 2000000000\n", "gap");
  refuses(good + "QUJDRA==\n", "BASE64 RANK");
}

TEST(Load, TellsTheKindAndRefusesWhatIsNone) {
  const std::string dir = ::testing::TempDir() + "/sg_tokenizer_load";
  std::system(("mkdir -p " + dir).c_str());
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir + "/" + name, std::ios::binary) << text;
    return dir + "/" + name;
  };
  EXPECT_NE(tk::load(write("tokenizer.json", tiny_tokenizer_json(kMerges).dump()))->describe().find("tokenizer.json"),
            std::string::npos);
  EXPECT_NE(tk::load(dir)->describe().find("tokenizer.json"), std::string::npos);  // a model directory
  EXPECT_NE(tk::load(write("r.tiktoken", r50k_sized_ranks()))->describe().find("r50k"), std::string::npos);
  try {
    tk::load(write("junk.model", "\x08\x96\x01 this is no protobuf"));
    ADD_FAILURE() << "junk loaded";
  } catch (const tk::Error& e) {
    EXPECT_NE(std::string(e.what()).find("junk.model"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tk::load(dir + "/missing.model"), tk::Error);
  EXPECT_THROW(tk::load(write("empty.model", "")), tk::Error);
  EXPECT_THROW(tk::load("/"), tk::Error);  // a directory without a tokenizer
}

}  // namespace

// decode() (what `scaleguard-run sample` prints): the tokens' bytes, added tokens as their text;
// decode(encode(text)) == text for byte-level BPE of either file kind; unknown ids refused.
TEST(Decode, ByteLevelBpeGivesBackTheBytes) {
  json j = tiny_tokenizer_json(kMerges);
  j["added_tokens"] = {{{"id", 264}, {"content", "<|end|>"}, {"special", true}}};
  auto t = tk::load_hf_json(j.dump(), "t.json");
  EXPECT_EQ(t->decode({260, 262, 263, '!'}), "hello world!");
  EXPECT_EQ(t->decode({260, 264, 0xD0}), "hello<|end|>\xd0");  // may end inside a character
  for (const std::string text : {"hello  hello", "hel lo\n\tworld", "\xd0\xb4\xd0\xb0 \xf0\x9f\x98\x80 12345",
                                 "x<|end|>y"})
    EXPECT_EQ(t->decode(encode(*t, text)), text) << text;
  EXPECT_THROW(t->decode({265}), tk::Error);
  std::vector<std::string> tokens;
  auto r = tk::load_tiktoken(r50k_sized_ranks(&tokens), "r.tiktoken");
  EXPECT_EQ(r->decode({50256}), "<|endoftext|>");
  for (const std::string text : {"abcd zab", "hello world \xe2\x82\xac"}) EXPECT_EQ(r->decode(encode(*r, text)), text);
  EXPECT_THROW(r->decode({50257}), tk::Error);
}
