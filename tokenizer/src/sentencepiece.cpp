// SentencePiece models (Llama 2, Mistral, T5's tokenizer.model) through Debian's
// libsentencepiece: its normalizer, unigram/BPE and byte fallback are the library's own.
#include <sentencepiece_processor.h>

#include "scaleguard/tokenizer.h"
#include "utf8.h"

namespace scaleguard::tokenizer {
namespace {

class SentencePieceEncoder : public Encoder {
 public:
  explicit SentencePieceEncoder(const sentencepiece::SentencePieceProcessor& sp) : sp_(sp) {}
  void encode(std::string_view text, std::vector<uint32_t>& ids) override {
    if (!detail::valid_utf8(text)) throw Error("the text to encode is not valid UTF-8");
    const auto status = sp_.Encode(text, &scratch_);  // const and read-only: safe across threads
    if (!status.ok()) throw Error("SentencePiece: " + status.ToString());
    ids.insert(ids.end(), scratch_.begin(), scratch_.end());
  }

 private:
  const sentencepiece::SentencePieceProcessor& sp_;
  std::vector<int> scratch_;
};

class SentencePieceTokenizer : public Tokenizer {
 public:
  std::unique_ptr<Encoder> encoder() const override { return std::make_unique<SentencePieceEncoder>(sp_); }
  uint32_t vocab_size() const override { return static_cast<uint32_t>(sp_.GetPieceSize()); }
  std::optional<uint32_t> token_id(std::string_view token) const override {
    const int id = sp_.PieceToId(token);  // the unknown piece's id when there is none
    if (id < 0 || sp_.IdToPiece(id) != token) return std::nullopt;
    return static_cast<uint32_t>(id);
  }
  std::optional<uint32_t> eos() const override {
    const int id = sp_.eos_id();  // -1 when the model was trained without one
    if (id < 0) return std::nullopt;
    return static_cast<uint32_t>(id);
  }
  std::string describe() const override {
    return "SentencePiece model, " + std::to_string(sp_.GetPieceSize()) + " pieces";
  }
  std::string decode(const std::vector<uint32_t>& ids) const override {
    std::vector<int> in;
    for (uint32_t id : ids) {
      if (id >= vocab_size()) throw Error("token id " + std::to_string(id) + " is outside the vocabulary");
      in.push_back(static_cast<int>(id));
    }
    std::string text;
    const auto status = sp_.Decode(in, &text);
    if (!status.ok()) throw Error("SentencePiece: " + status.ToString());
    return text;
  }
  sentencepiece::SentencePieceProcessor sp_;
};

}  // namespace

std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& bytes, const std::string& origin) {
  auto t = std::make_unique<SentencePieceTokenizer>();
  const auto status = t->sp_.LoadFromSerializedProto(bytes);
  if (!status.ok())
    throw Error(origin + ": not a tokenizer.json, a tiktoken ranks file or a SentencePiece model (SentencePiece: " +
                status.ToString() + ")");
  if (t->sp_.GetPieceSize() <= 0) throw Error(origin + ": the SentencePiece model has no pieces");
  return t;
}

}  // namespace scaleguard::tokenizer
