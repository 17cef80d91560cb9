// Tokenizers with the real algorithms (issue 39): SentencePiece models through Debian's
// libsentencepiece, and byte-level BPE (GPT-2, Llama 3, cl100k/o200k) from a Hugging Face
// tokenizer.json or a tiktoken ranks file. Token ids equal the reference implementations'
// (tests/tokenizer checks them against python3-sentencepiece and OpenAI's tiktoken).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace scaleguard::tokenizer {

// Every failure: a missing, unreadable, malformed or unsupported tokenizer file, invalid
// input text. The message names the file and what is wrong.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One thread's encoder: holds scratch buffers and caches, so each thread takes its own.
class Encoder {
 public:
  virtual ~Encoder() = default;
  // Appends the ids of `text` (UTF-8; invalid UTF-8 is an Error) to `ids`.
  virtual void encode(std::string_view text, std::vector<uint32_t>& ids) = 0;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // A fresh encoder; the tokenizer is read-only, so encoders of one tokenizer may run in
  // parallel threads.
  virtual std::unique_ptr<Encoder> encoder() const = 0;
  // Ids are 0 .. vocab_size() - 1 (special tokens included).
  virtual uint32_t vocab_size() const = 0;
  // The id of a token given by its text ("</s>", "<|endoftext|>"), if it has one.
  virtual std::optional<uint32_t> token_id(std::string_view token) const = 0;
  // The end-of-document token the tokenizer names, if any.
  virtual std::optional<uint32_t> eos() const = 0;
  // What was loaded, for people: "SentencePiece unigram, 32000 pieces".
  virtual std::string describe() const = 0;
  // The text of `ids` (what `scaleguard-run sample` prints): byte-level BPE joins the tokens'
  // bytes (added and special tokens as their text), so it may end inside a UTF-8 character;
  // SentencePiece is the library's DecodeIds (U+2581 as spaces, the first one dropped, byte
  // pieces joined). An id outside the vocabulary is an Error.
  virtual std::string decode(const std::vector<uint32_t>& ids) const = 0;
};

// Loads FILE: a tokenizer.json (byte-level BPE), a tiktoken ranks file, or a SentencePiece
// model (the kind is told from the content), or a directory holding tokenizer.json or
// tokenizer.model. Files are read whole up to kMaxTokenizerBytes.
std::unique_ptr<Tokenizer> load(const std::string& path);

constexpr uint64_t kMaxTokenizerBytes = uint64_t{512} << 20;

// The loaders behind load(), for a file already read (`origin` names it in errors).
std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& bytes, const std::string& origin);
// `config_json`: the tokenizer_config.json beside it ("" if none), for its eos_token.
std::unique_ptr<Tokenizer> load_hf_json(const std::string& text, const std::string& origin,
                                        const std::string& config_json = "");
std::unique_ptr<Tokenizer> load_tiktoken(const std::string& text, const std::string& origin);

// Replaces invalid UTF-8 in `text` by U+FFFD, one per maximal invalid subpart (what Python's
// decode(errors="replace") does); returns how many were replaced (0: `out` is untouched and
// `text` is valid).
uint64_t repair_utf8(std::string_view text, std::string& out);

}  // namespace scaleguard::tokenizer
