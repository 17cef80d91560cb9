// A Hugging Face tokenizer.json holding a byte-level BPE (GPT-2, Llama 3, Qwen-style without
// a normalizer): model.vocab and model.merges, the pre_tokenizer (ByteLevel, Split with a
// regex, or a Sequence of them), added_tokens. What the `tokenizers` library would do with
// anything else is not guessed: it is refused by name.
#include <nlohmann/json.hpp>

#include "byte_bpe.h"

namespace scaleguard::tokenizer {
namespace {

using nlohmann::json;

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the others for
// U+0100 upwards in byte order. Returns the code point standing for each byte.
std::array<uint32_t, 256> byte_to_char() {
  std::array<uint32_t, 256> map{};
  uint32_t extra = 0;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    map[b] = printable ? b : 256 + extra++;
  }
  return map;
}

// A vocabulary entry's text -> its bytes; false if it holds a character no byte stands for.
bool entry_bytes(const std::string& s, const std::unordered_map<uint32_t, char>& char_to_byte, std::string& out) {
  out.clear();
  for (size_t i = 0; i < s.size();) {
    const auto c0 = static_cast<unsigned char>(s[i]);
    uint32_t cp;
    size_t n;
    if (c0 < 0x80) cp = c0, n = 1;
    else if ((c0 & 0xE0) == 0xC0 && i + 1 < s.size()) cp = (c0 & 0x1Fu) << 6 | (s[i + 1] & 0x3F), n = 2;
    else return false;  // every character a byte stands for is below U+0800
    auto it = char_to_byte.find(cp);
    if (it == char_to_byte.end()) return false;
    out += it->second;
    i += n;
  }
  return true;
}

const json& member(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) throw Error(where + ": '" + key + "' is missing");
  return j.at(key);
}

bool flag(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || j.at(key).is_null()) return false;
  if (!j.at(key).is_boolean()) throw Error(where + ": '" + key + "' is not true or false");
  return j.at(key).get<bool>();
}

std::string text_of(const json& j, const std::string& where) {
  if (!j.is_string()) throw Error(where + " is not a string");
  return j.get<std::string>();
}

// One pre_tokenizer object -> steps.
void add_steps(const json& p, const std::string& where, std::vector<detail::Step>& steps, bool& byte_level,
               const std::string& origin) {
  const std::string type = text_of(member(p, "type", where), where + ".type");
  if (type == "Sequence") {
    const json& list = member(p, "pretokenizers", where);
    if (!list.is_array()) throw Error(where + ".pretokenizers is not a list");
    for (size_t i = 0; i < list.size(); ++i)
      add_steps(list[i], where + ".pretokenizers[" + std::to_string(i) + "]", steps, byte_level, origin);
  } else if (type == "ByteLevel") {
    byte_level = true;
    detail::Step s;
    s.add_prefix_space = flag(p, "add_prefix_space", where);
    // use_regex defaults to true: GPT-2's pattern.
    if (!p.contains("use_regex") || flag(p, "use_regex", where))
      s.regex = std::make_shared<detail::Regex>(
          R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)", origin);
    steps.push_back(std::move(s));
  } else if (type == "Split") {
    const json& pattern = member(p, "pattern", where);
    std::string regex;
    if (pattern.contains("Regex")) {
      regex = text_of(pattern.at("Regex"), where + ".pattern.Regex");
    } else if (pattern.contains("String")) {  // a literal: quote it for PCRE2
      regex = "\\Q" + text_of(pattern.at("String"), where + ".pattern.String") + "\\E";
    } else {
      throw Error(where + ".pattern holds neither 'Regex' nor 'String'");
    }
    const std::string behavior = text_of(member(p, "behavior", where), where + ".behavior");
    if (behavior != "Isolated")
      throw Error(where + ": Split with behavior '" + behavior + "' is not supported (only 'Isolated')");
    if (flag(p, "invert", where)) throw Error(where + ": Split with invert=true is not supported");
    detail::Step s;
    s.regex = std::make_shared<detail::Regex>(regex, origin);
    steps.push_back(std::move(s));
  } else {
    throw Error(where + ": the pre-tokenizer '" + type +
                "' is not supported (ByteLevel, Split with behavior Isolated, Sequence of them)");
  }
}

}  // namespace

std::unique_ptr<Tokenizer> load_hf_json(const std::string& text, const std::string& origin,
                                        const std::string& config_json) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(origin + ": not valid JSON (" + e.what() + ")");
  }
  const json& model = member(j, "model", origin);
  const std::string where = origin + ": model";
  const std::string type = model.contains("type") ? text_of(model.at("type"), where + ".type") : "BPE";
  if (type != "BPE")
    throw Error(origin + ": model type '" + type + "' is not supported; byte-level BPE only (a SentencePiece "
                "model is read from its tokenizer.model)");
  if (model.contains("dropout") && !model.at("dropout").is_null() && !(model.at("dropout").is_number() && model.at("dropout").get<double>() == 0.0))
    throw Error(where + ".dropout is set: BPE dropout is for training, not for preparing data");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(k) && !model.at(k).is_null() && !(model.at(k).is_string() && model.at(k).get<std::string>().empty()))
      throw Error(where + "." + k + " is set, which byte-level BPE does not use; not supported");
  if (flag(model, "byte_fallback", where))
    throw Error(where + ".byte_fallback is true: a SentencePiece-style BPE, not byte-level; give its tokenizer.model");
  if (j.contains("normalizer") && !j.at("normalizer").is_null())
    throw Error(origin + ": normalizer '" +
                (j.at("normalizer").contains("type") ? j.at("normalizer").at("type").dump() : j.at("normalizer").dump()) +
                "' is not supported (byte-level BPE without a normalizer only)");

  detail::ByteBpe m;
  bool byte_level = false;
  if (j.contains("pre_tokenizer") && !j.at("pre_tokenizer").is_null())
    add_steps(j.at("pre_tokenizer"), origin + ": pre_tokenizer", m.steps, byte_level, origin);
  if (!byte_level)
    throw Error(origin + ": no ByteLevel pre-tokenizer, so not a byte-level BPE (a SentencePiece model is read "
                "from its tokenizer.model)");

  const auto to_char = byte_to_char();
  std::unordered_map<uint32_t, char> char_to_byte;
  for (int b = 0; b < 256; ++b) char_to_byte[to_char[b]] = static_cast<char>(b);

  const json& vocab = member(model, "vocab", where);
  if (!vocab.is_object()) throw Error(where + ".vocab is not an object");
  std::unordered_map<std::string, uint32_t> ids;  // entry text -> id
  uint64_t max_id = 0;
  std::string bytes;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_unsigned() || it.value().get<uint64_t>() >= (uint64_t{1} << 31))
      throw Error(where + ".vocab['" + it.key() + "'] is not an id in 0..2^31-1");
    const auto id = it.value().get<uint32_t>();
    ids[it.key()] = id;
    max_id = std::max<uint64_t>(max_id, id);
    if (entry_bytes(it.key(), char_to_byte, bytes)) m.ids_by_bytes[bytes] = id;
  }
  for (int b = 0; b < 256; ++b) {
    auto it = m.ids_by_bytes.find(std::string(1, static_cast<char>(b)));
    if (it == m.ids_by_bytes.end()) throw Error(where + ".vocab has no token for byte " + std::to_string(b) + ": not byte-level");
    m.byte_ids[b] = it->second;
  }
  const json& merges = member(model, "merges", where);
  if (!merges.is_array()) throw Error(where + ".merges is not a list");
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string at = where + ".merges[" + std::to_string(i) + "]";
    std::string a, b;
    if (merges[i].is_string()) {  // "a b" (the older format)
      const std::string s = merges[i].get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        throw Error(at + " '" + s + "' is not two tokens separated by one space");
      a = s.substr(0, space), b = s.substr(space + 1);
    } else if (merges[i].is_array() && merges[i].size() == 2) {  // ["a", "b"]
      a = text_of(merges[i][0], at + "[0]"), b = text_of(merges[i][1], at + "[1]");
    } else {
      throw Error(at + " is neither \"a b\" nor [\"a\", \"b\"]");
    }
    auto ia = ids.find(a), ib = ids.find(b), iab = ids.find(a + b);
    if (ia == ids.end() || ib == ids.end() || iab == ids.end())
      throw Error(at + ": '" + (ia == ids.end() ? a : ib == ids.end() ? b : a + b) + "' is not in the vocabulary");
    // A pair listed twice takes its later rank, as the tokenizers library's map does.
    m.merges[detail::pair_key(ia->second, ib->second)] = {static_cast<uint32_t>(i), iab->second};
  }
  m.whole_piece_first = flag(model, "ignore_merges", where);

  if (j.contains("added_tokens") && !j.at("added_tokens").is_null()) {
    const json& added = j.at("added_tokens");
    if (!added.is_array()) throw Error(origin + ": added_tokens is not a list");
    for (size_t i = 0; i < added.size(); ++i) {
      const std::string at = origin + ": added_tokens[" + std::to_string(i) + "]";
      const json& a = added[i];
      detail::AddedToken t;
      t.content = text_of(member(a, "content", at), at + ".content");
      const json& id = member(a, "id", at);
      if (!id.is_number_unsigned() || id.get<uint64_t>() >= (uint64_t{1} << 31)) throw Error(at + ".id is not an id");
      t.id = id.get<uint32_t>();
      if (t.content.empty()) throw Error(at + ".content is empty");
      if (flag(a, "single_word", at)) throw Error(at + " ('" + t.content + "'): single_word is not supported");
      t.lstrip = flag(a, "lstrip", at);
      t.rstrip = flag(a, "rstrip", at);
      max_id = std::max<uint64_t>(max_id, t.id);
      m.named[t.content] = t.id;
      m.added.push_back(std::move(t));
    }
  }
  m.vocab_size = static_cast<uint32_t>(max_id + 1);

  // The end of a document: tokenizer_config.json's eos_token when it is beside the file,
  // else the first special token of the usual names.
  std::string eos_name;
  if (!config_json.empty()) {
    try {
      const json c = json::parse(config_json);
      if (c.contains("eos_token")) {
        const json& e = c.at("eos_token");
        if (e.is_string()) eos_name = e.get<std::string>();
        else if (e.is_object() && e.contains("content") && e.at("content").is_string()) eos_name = e.at("content").get<std::string>();
      }
    } catch (const json::exception& e) {
      throw Error(origin + ": its tokenizer_config.json is not valid JSON (" + e.what() + ")");
    }
  }
  for (const char* name : {"<|end_of_text|>", "<|endoftext|>", "</s>", "<eos>", "<|im_end|>"})
    if (eos_name.empty() && m.named.count(name)) eos_name = name;
  if (!eos_name.empty()) {
    auto it = m.named.find(eos_name);
    if (it == m.named.end()) throw Error(origin + ": tokenizer_config.json's eos_token '" + eos_name + "' is no added token");
    m.eos = it->second;
  }
  m.description = "tokenizer.json byte-level BPE, " + std::to_string(m.vocab_size) + " tokens, " +
                  std::to_string(m.merges.size()) + " merges";
  return detail::make_byte_bpe(std::move(m));
}

}  // namespace scaleguard::tokenizer
