// Byte-level BPE, the one algorithm behind GPT-2, Llama 3 and tiktoken's encodings; the
// tokenizer.json and tiktoken loaders fill a ByteBpe and hand it to make_byte_bpe().
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>

#include "scaleguard/tokenizer.h"

namespace scaleguard::tokenizer::detail {

// A pre-tokenizer regex compiled by PCRE2 (UTF, Unicode properties, JIT). \s and \S are
// spelled out as Unicode White_Space, what Rust's regex, fancy-regex and Oniguruma (the
// references' engines) mean by them, rather than left to the PCRE2 build's UCP tables.
class Regex {
 public:
  Regex(const std::string& pattern, const std::string& origin);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  pcre2_code* code() const { return code_; }
  bool jit() const { return jit_; }
  const std::string& pattern() const { return pattern_; }

 private:
  pcre2_code* code_ = nullptr;
  bool jit_ = false;
  std::string pattern_;
};

// The pattern with \s / \S spelled out as Unicode White_Space (exposed for the tests).
std::string whitespace_as_unicode(const std::string& pattern, const std::string& origin);

// One pre-tokenization step, applied to every piece the steps before it made.
struct Step {
  std::shared_ptr<Regex> regex;   // null: the piece passes whole
  bool keep_gaps = true;          // Hugging Face's Split "Isolated": text between matches is a piece too;
                                  // false: tiktoken, which keeps the matches only
  bool add_prefix_space = false;  // Hugging Face's ByteLevel: a piece not starting with ' ' gets one
};

// A token matched in the raw text before pre-tokenization (tokenizer.json's added_tokens).
struct AddedToken {
  std::string content;
  uint32_t id = 0;
  bool lstrip = false, rstrip = false;  // the token takes the white space on its left / right
};

struct Merge {
  uint32_t rank;  // lower merges first; ties: the leftmost pair
  uint32_t id;    // the merged token
};

struct ByteBpe {
  std::string description;
  uint32_t vocab_size = 0;
  std::array<uint32_t, 256> byte_ids{};                     // the token of each single byte
  std::unordered_map<std::string, uint32_t> ids_by_bytes;   // every mergeable token's bytes
  std::unordered_map<uint64_t, Merge> merges;               // (left id << 32 | right id)
  bool whole_piece_first = false;  // a piece that is a token is that token (tiktoken; HF ignore_merges)
  std::vector<Step> steps;
  std::vector<AddedToken> added;       // make_byte_bpe() sorts them longest first
  std::array<bool, 256> added_first{};  // the first bytes of the added tokens (set by make_byte_bpe)
  std::unordered_map<std::string, uint32_t> named;  // special / added tokens by their text
  std::optional<uint32_t> eos;
};

std::unique_ptr<Tokenizer> make_byte_bpe(ByteBpe model);

inline uint64_t pair_key(uint32_t left, uint32_t right) { return uint64_t{left} << 32 | right; }

}  // namespace scaleguard::tokenizer::detail
