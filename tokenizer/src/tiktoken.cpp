// A tiktoken ranks file: one "BASE64(token bytes) RANK" per line, the rank being the token's
// id and its merge priority (tiktoken's load_tiktoken_bpe; Llama 3's original
// tokenizer.model is one). The file holds neither the pre-tokenizer regex nor the special
// tokens: those come from the encoding it is, told by its number of ranks.
#include <string_view>

#include "byte_bpe.h"

namespace scaleguard::tokenizer {
namespace {

constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// cl100k_base's, and Llama 3's (Meta's llama/tokenizer.py spells it alike).
constexpr const char* kCl100kPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kO200kPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct Encoding {
  const char* name;
  size_t ranks;
  const char* pattern;
  std::vector<std::pair<const char*, uint32_t>> specials;
  const char* eos;
  uint32_t vocab_size;
};

const std::vector<Encoding>& encodings() {
  static const std::vector<Encoding> known = {
      {"r50k_base (GPT-2)", 50256, kGpt2Pattern, {{"<|endoftext|>", 50256}}, "<|endoftext|>", 50257},
      {"cl100k_base",
       100256,
       kCl100kPattern,
       {{"<|endoftext|>", 100257},
        {"<|fim_prefix|>", 100258},
        {"<|fim_middle|>", 100259},
        {"<|fim_suffix|>", 100260},
        {"<|endofprompt|>", 100276}},
       "<|endoftext|>",
       100277},
      {"Llama 3",
       128000,
       kCl100kPattern,
       {{"<|begin_of_text|>", 128000},
        {"<|end_of_text|>", 128001},
        {"<|start_header_id|>", 128006},
        {"<|end_header_id|>", 128007},
        {"<|eom_id|>", 128008},
        {"<|eot_id|>", 128009}},
       "<|end_of_text|>",
       128256},  // 256 special tokens follow the ranks
      {"o200k_base", 199998, kO200kPattern, {{"<|endoftext|>", 199999}, {"<|endofprompt|>", 200018}}, "<|endoftext|>",
       200019},
  };
  return known;
}

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Strict standard base64 with padding; false on anything else.
bool base64_decode(std::string_view in, std::string& out) {
  out.clear();
  if (in.empty() || in.size() % 4 != 0) return false;
  for (size_t i = 0; i < in.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = in[i + k];
      if (c == '=' && i + 4 == in.size() && k >= 2) {
        v[k] = 0;
        ++pad;
      } else if (pad > 0 || (v[k] = base64_value(c)) < 0) {
        return false;
      }
    }
    const uint32_t w = uint32_t(v[0]) << 18 | uint32_t(v[1]) << 12 | uint32_t(v[2]) << 6 | uint32_t(v[3]);
    out += static_cast<char>(w >> 16);
    if (pad < 2) out += static_cast<char>((w >> 8) & 0xFF);
    if (pad < 1) out += static_cast<char>(w & 0xFF);
  }
  return true;
}

}  // namespace

std::unique_ptr<Tokenizer> load_tiktoken(const std::string& text, const std::string& origin) {
  detail::ByteBpe m;
  std::vector<std::string> by_rank;
  size_t line_no = 0, pos = 0;
  std::string token;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const std::string where = origin + ":" + std::to_string(line_no);
    const size_t space = line.find(' ');
    if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos)
      throw Error(where + ": expected 'BASE64 RANK' (a tiktoken ranks file)");
    if (!base64_decode(line.substr(0, space), token))
      throw Error(where + ": '" + std::string(line.substr(0, space).substr(0, 64)) + "' is not base64");
    const std::string_view digits = line.substr(space + 1);
    uint64_t rank = 0;
    if (digits.empty() || digits.size() > 10) throw Error(where + ": the rank is not a number below 2^31");
    for (char c : digits) {
      if (c < '0' || c > '9') throw Error(where + ": the rank '" + std::string(digits) + "' is not a number");
      rank = rank * 10 + static_cast<uint64_t>(c - '0');
    }
    if (rank >= (uint64_t{1} << 31)) throw Error(where + ": the rank " + std::string(digits) + " is not below 2^31");
    if (!m.ids_by_bytes.emplace(token, static_cast<uint32_t>(rank)).second)
      throw Error(where + ": the token is listed twice");
    if (rank >= by_rank.size()) {
      if (rank > 4 * (by_rank.size() + 1024)) throw Error(where + ": the rank " + std::string(digits) + " leaves a gap");
      by_rank.resize(rank + 1);
    }
    if (!by_rank[rank].empty()) throw Error(where + ": the rank " + std::string(digits) + " is given twice");
    by_rank[rank] = token;
  }
  if (by_rank.size() != m.ids_by_bytes.size())
    throw Error(origin + ": the ranks are not 0.." + std::to_string(m.ids_by_bytes.size() - 1) + " without gaps");
  const Encoding* enc = nullptr;
  for (const Encoding& e : encodings())
    if (e.ranks == by_rank.size()) enc = &e;
  if (!enc) {
    std::string known;
    for (const Encoding& e : encodings()) known += std::string(known.empty() ? "" : ", ") + e.name + " " + std::to_string(e.ranks);
    throw Error(origin + ": a tiktoken ranks file with " + std::to_string(by_rank.size()) +
                " ranks, which is no encoding known here (" + known +
                "); its regex and special tokens are not in the file. Give a tokenizer.json instead");
  }
  for (int b = 0; b < 256; ++b) {
    auto it = m.ids_by_bytes.find(std::string(1, static_cast<char>(b)));
    if (it == m.ids_by_bytes.end()) throw Error(origin + ": byte " + std::to_string(b) + " has no token");
    m.byte_ids[b] = it->second;
  }
  // tiktoken merges the adjacent pair whose concatenation has the lowest rank: every way of
  // splitting a token into two tokens is a merge of that rank.
  for (uint32_t rank = 0; rank < by_rank.size(); ++rank) {
    const std::string& t = by_rank[rank];
    for (size_t k = 1; k < t.size(); ++k) {
      auto left = m.ids_by_bytes.find(t.substr(0, k));
      if (left == m.ids_by_bytes.end()) continue;
      auto right = m.ids_by_bytes.find(t.substr(k));
      if (right == m.ids_by_bytes.end()) continue;
      m.merges[detail::pair_key(left->second, right->second)] = {rank, rank};
    }
  }
  m.whole_piece_first = true;
  m.steps.push_back({std::make_shared<detail::Regex>(enc->pattern, origin), /*keep_gaps=*/false, false});
  for (const auto& [name, id] : enc->specials) m.named.emplace(name, id);
  m.eos = m.named.at(enc->eos);
  m.vocab_size = enc->vocab_size;
  m.description = "tiktoken ranks, " + std::string(enc->name) + ", " + std::to_string(enc->vocab_size) + " tokens";
  return detail::make_byte_bpe(std::move(m));
}

}  // namespace scaleguard::tokenizer
