#include "byte_bpe.h"

#include <algorithm>
#include <functional>
#include <string_view>

#include "utf8.h"

namespace scaleguard::tokenizer::detail {
namespace {

// Unicode White_Space, as the members of a character class.
constexpr const char* kWhiteSpace =
    "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

}  // namespace

std::string whitespace_as_unicode(const std::string& pattern, const std::string& origin) {
  std::string out;
  bool in_class = false;
  size_t class_start = 0;  // where the class's members begin (a ']' there is a member)
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      if (e == 's') {
        out += in_class ? std::string(kWhiteSpace) : "[" + std::string(kWhiteSpace) + "]";
      } else if (e == 'S') {
        if (in_class)
          throw Error(origin + ": the regex '" + pattern + "' uses \\S inside a character class, which is not supported");
        out += "[^" + std::string(kWhiteSpace) + "]";
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      class_start = i + 1;
      continue;
    }
    if (in_class && c == ']' && i != class_start) in_class = false;
    out += c;
  }
  return out;
}

Regex::Regex(const std::string& pattern, const std::string& origin) : pattern_(pattern) {
  const std::string translated = whitespace_as_unicode(pattern, origin);
  int err = 0;
  PCRE2_SIZE offset = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(), PCRE2_UTF | PCRE2_UCP,
                        &err, &offset, nullptr);
  if (!code_) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw Error(origin + ": the pre-tokenizer regex '" + pattern + "' does not compile (PCRE2: " +
                reinterpret_cast<const char*>(msg) + ", at offset " + std::to_string(offset) + ")");
  }
  jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;  // without JIT the interpreter matches alike
}

Regex::~Regex() { pcre2_code_free(code_); }

namespace {

// A regex's per-thread match state.
class Matcher {
 public:
  explicit Matcher(const Regex& re) : re_(re) {
    data_ = pcre2_match_data_create_from_pattern(re.code(), nullptr);
    context_ = pcre2_match_context_create(nullptr);
    // Long runs of white space or punctuation backtrack deeply: give JIT room (32 KiB default).
    stack_ = pcre2_jit_stack_create(32 << 10, 8 << 20, nullptr);
    if (!data_ || !context_ || !stack_) throw Error("out of memory for the pre-tokenizer regex");
    pcre2_jit_stack_assign(context_, nullptr, stack_);
  }
  ~Matcher() {
    pcre2_jit_stack_free(stack_);
    pcre2_match_context_free(context_);
    pcre2_match_data_free(data_);
  }
  Matcher(const Matcher&) = delete;
  Matcher& operator=(const Matcher&) = delete;

  // Calls piece(start, end) for every match of `text` (valid UTF-8) and, with keep_gaps, for
  // the text between them, in order.
  template <class F>
  void split(std::string_view text, bool keep_gaps, F&& piece) {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    size_t from = 0, done = 0;  // search from; pieces made up to
    while (from < text.size()) {
      const int rc = pcre2_match(re_.code(), subject, text.size(), from, PCRE2_NO_UTF_CHECK, data_, context_);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof msg);
        throw Error("the pre-tokenizer regex '" + re_.pattern() + "' failed on the input (PCRE2: " +
                    reinterpret_cast<const char*>(msg) + ")");
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data_);
      const size_t start = ov[0], end = ov[1];
      if (end == start) {  // an empty match: no piece; move on by one character
        bool ok;
        from = start + utf8_char(text, start, ok);
        continue;
      }
      if (keep_gaps && start > done) piece(done, start);
      piece(start, end);
      done = from = end;
    }
    if (keep_gaps && done < text.size()) piece(done, text.size());
  }

 private:
  const Regex& re_;
  pcre2_match_data* data_ = nullptr;
  pcre2_match_context* context_ = nullptr;
  pcre2_jit_stack* stack_ = nullptr;
};

class ByteBpeEncoder : public Encoder {
 public:
  explicit ByteBpeEncoder(const ByteBpe& m) : m_(m) {
    for (const Step& s : m.steps) matchers_.push_back(s.regex ? std::make_unique<Matcher>(*s.regex) : nullptr);
  }

  void encode(std::string_view text, std::vector<uint32_t>& ids) override {
    if (!valid_utf8(text)) throw Error("the text to encode is not valid UTF-8");
    if (m_.added.empty()) return pretokenize(text, 0, ids);
    // Added tokens first, leftmost-longest (Hugging Face's AddedVocabulary), then the text
    // between them.
    size_t pos = 0, segment = 0;
    while (pos < text.size()) {
      if (!m_.added_first[static_cast<unsigned char>(text[pos])]) {
        ++pos;
        continue;
      }
      const AddedToken* hit = nullptr;
      for (const AddedToken& a : m_.added)  // longest first
        if (text.compare(pos, a.content.size(), a.content) == 0) {
          hit = &a;
          break;
        }
      if (!hit) {
        ++pos;
        continue;
      }
      size_t begin = pos, end = pos + hit->content.size();
      if (hit->lstrip)
        while (begin > segment) {
          size_t back = begin - 1;
          while (back > segment && (static_cast<unsigned char>(text[back]) & 0xC0) == 0x80) --back;
          if (whitespace_at(text, back) != begin - back) break;
          begin = back;
        }
      if (hit->rstrip)
        while (size_t n = whitespace_at(text, end)) end += n;
      pretokenize(text.substr(segment, begin - segment), 0, ids);
      ids.push_back(hit->id);
      pos = segment = end;
    }
    pretokenize(text.substr(segment), 0, ids);
  }

 private:
  void pretokenize(std::string_view piece, size_t step, std::vector<uint32_t>& ids) {
    if (piece.empty()) return;
    if (step == m_.steps.size()) return bpe(piece, ids);
    const Step& s = m_.steps[step];
    std::string prefixed;
    if (s.add_prefix_space && piece.front() != ' ') {
      prefixed = " " + std::string(piece);
      piece = prefixed;
    }
    if (!s.regex) return pretokenize(piece, step + 1, ids);
    matchers_[step]->split(piece, s.keep_gaps,
                           [&](size_t b, size_t e) { pretokenize(piece.substr(b, e - b), step + 1, ids); });
  }

  void bpe(std::string_view piece, std::vector<uint32_t>& ids) {
    if (piece.size() == 1) {
      ids.push_back(m_.byte_ids[static_cast<unsigned char>(piece[0])]);
      return;
    }
    if (m_.whole_piece_first) {
      auto it = m_.ids_by_bytes.find(std::string(piece));
      if (it != m_.ids_by_bytes.end()) {
        ids.push_back(it->second);
        return;
      }
    }
    // Words repeat: remember short ones (bounded; dropped whole when full).
    const bool cacheable = piece.size() <= 64;
    size_t h = 0;
    if (cacheable) {
      h = std::hash<std::string_view>()(piece);
      auto it = cache_.find(h);
      if (it != cache_.end() && it->second.first == piece) {
        ids.insert(ids.end(), it->second.second.begin(), it->second.second.end());
        return;
      }
    }
    const size_t first = ids.size();
    merge(piece, ids);
    if (cacheable) {
      if (cache_.size() >= (1u << 16)) cache_.clear();
      cache_[h] = {std::string(piece), std::vector<uint32_t>(ids.begin() + first, ids.end())};
    }
  }

  // Repeatedly merges the adjacent pair of lowest rank (the leftmost among equal ranks) until
  // no pair merges: a heap of candidate pairs over a linked list of symbols, O(n log n).
  void merge(std::string_view piece, std::vector<uint32_t>& ids) {
    const int n = static_cast<int>(piece.size());
    sym_.resize(n);
    next_.resize(n);
    prev_.resize(n);
    heap_.clear();
    for (int i = 0; i < n; ++i) {
      sym_[i] = m_.byte_ids[static_cast<unsigned char>(piece[i])];
      prev_[i] = i - 1;
      next_[i] = i + 1 < n ? i + 1 : -1;
    }
    for (int i = 0; i + 1 < n; ++i) push(i, sym_[i], sym_[i + 1]);
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
      const Candidate c = heap_.back();
      heap_.pop_back();
      const int pos = c.pos, right = next_[pos];
      if (sym_[pos] == kDead || right < 0) continue;
      auto it = m_.merges.find(pair_key(sym_[pos], sym_[right]));
      if (it == m_.merges.end() || it->second.id != c.id) continue;  // stale: a neighbour merged first
      sym_[pos] = c.id;
      sym_[right] = kDead;
      next_[pos] = next_[right];
      if (next_[pos] >= 0) prev_[next_[pos]] = pos;
      if (prev_[pos] >= 0) push(prev_[pos], sym_[prev_[pos]], sym_[pos]);
      if (next_[pos] >= 0) push(pos, sym_[pos], sym_[next_[pos]]);
    }
    for (int i = 0; i >= 0; i = next_[i]) ids.push_back(sym_[i]);
  }

  void push(int pos, uint32_t left, uint32_t right) {
    auto it = m_.merges.find(pair_key(left, right));
    if (it == m_.merges.end()) return;
    heap_.push_back({it->second.rank, pos, it->second.id});
    std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
  }

  struct Candidate {
    uint32_t rank;
    int pos;
    uint32_t id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  static constexpr uint32_t kDead = UINT32_MAX;

  const ByteBpe& m_;
  std::vector<std::unique_ptr<Matcher>> matchers_;
  std::vector<uint32_t> sym_;
  std::vector<int> next_, prev_;
  std::vector<Candidate> heap_;
  std::unordered_map<size_t, std::pair<std::string, std::vector<uint32_t>>> cache_;
};

class ByteBpeTokenizer : public Tokenizer {
 public:
  explicit ByteBpeTokenizer(ByteBpe m) : m_(std::move(m)) {
    std::stable_sort(m_.added.begin(), m_.added.end(),
                     [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
    m_.added_first.fill(false);
    for (const AddedToken& a : m_.added) m_.added_first[static_cast<unsigned char>(a.content[0])] = true;
    // decode(): each id's bytes; added and special tokens as their text.
    text_of_.resize(m_.vocab_size);
    known_.assign(m_.vocab_size, false);
    auto set = [this](uint32_t id, const std::string& text) {
      if (id < text_of_.size()) text_of_[id] = text, known_[id] = true;
    };
    for (int b = 0; b < 256; ++b) set(m_.byte_ids[static_cast<size_t>(b)], std::string(1, static_cast<char>(b)));
    for (const auto& [bytes, id] : m_.ids_by_bytes) set(id, bytes);
    for (const auto& [text, id] : m_.named) set(id, text);
    for (const AddedToken& a : m_.added) set(a.id, a.content);
  }
  std::string decode(const std::vector<uint32_t>& ids) const override {
    std::string out;
    for (uint32_t id : ids) {
      if (id >= known_.size() || !known_[id])
        throw Error("token id " + std::to_string(id) + " is not a token of " + m_.description);
      out += text_of_[id];
    }
    return out;
  }
  std::unique_ptr<Encoder> encoder() const override { return std::make_unique<ByteBpeEncoder>(m_); }
  uint32_t vocab_size() const override { return m_.vocab_size; }
  std::optional<uint32_t> token_id(std::string_view token) const override {
    auto it = m_.named.find(std::string(token));
    if (it != m_.named.end()) return it->second;
    auto b = m_.ids_by_bytes.find(std::string(token));
    if (b != m_.ids_by_bytes.end()) return b->second;
    return std::nullopt;
  }
  std::optional<uint32_t> eos() const override { return m_.eos; }
  std::string describe() const override { return m_.description; }

 private:
  ByteBpe m_;
  std::vector<std::string> text_of_;
  std::vector<bool> known_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_byte_bpe(ByteBpe model) { return std::make_unique<ByteBpeTokenizer>(std::move(model)); }

}  // namespace scaleguard::tokenizer::detail
