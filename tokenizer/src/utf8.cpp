#include "utf8.h"

#include <string>

#include "scaleguard/tokenizer.h"

namespace scaleguard::tokenizer {
namespace detail {

size_t utf8_char(std::string_view s, size_t i, bool& valid) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b = at(i);
  valid = true;
  if (b < 0x80) return 1;
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (b >= 0xC2 && b <= 0xDF) len = 2;
  else if (b >= 0xE0 && b <= 0xEF) len = 3, lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
  else if (b >= 0xF0 && b <= 0xF4) len = 4, lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
  else {
    valid = false;  // a continuation byte, C0, C1 or F5..FF: never starts a character
    return 1;
  }
  for (size_t k = 1; k < len; ++k) {
    if (i + k >= s.size()) {
      valid = false;
      return k;
    }
    const unsigned char c = at(i + k);
    if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) {
      valid = false;
      return k;  // the lead and the continuations that fitted: one maximal subpart
    }
  }
  return len;
}

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    // ASCII runs dominate most text: skip eight bytes at a time.
    while (i + 8 <= s.size()) {
      uint64_t w = 0;
      for (int k = 0; k < 8; ++k) w |= uint64_t{static_cast<unsigned char>(s[i + k])} << (8 * k);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= s.size()) break;
    bool ok;
    i += utf8_char(s, i, ok);
    if (!ok) return false;
  }
  return true;
}

size_t whitespace_at(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0; };
  const unsigned char c = b(0);
  if ((c >= 0x09 && c <= 0x0D) || c == 0x20) return 1;
  if (c == 0xC2 && (b(1) == 0x85 || b(1) == 0xA0)) return 2;
  if (c == 0xE1 && b(1) == 0x9A && b(2) == 0x80) return 3;  // U+1680
  if (c == 0xE2 && b(1) == 0x80 && ((b(2) >= 0x80 && b(2) <= 0x8A) || b(2) == 0xA8 || b(2) == 0xA9 || b(2) == 0xAF))
    return 3;  // U+2000..200A, 2028, 2029, 202F
  if (c == 0xE2 && b(1) == 0x81 && b(2) == 0x9F) return 3;  // U+205F
  if (c == 0xE3 && b(1) == 0x80 && b(2) == 0x80) return 3;  // U+3000
  return 0;
}

}  // namespace detail

uint64_t repair_utf8(std::string_view text, std::string& out) {
  if (detail::valid_utf8(text)) return 0;
  out.clear();
  out.reserve(text.size() + 16);
  uint64_t replaced = 0;
  size_t i = 0;
  while (i < text.size()) {
    bool ok;
    const size_t n = detail::utf8_char(text, i, ok);
    if (ok) {
      out.append(text.data() + i, n);
    } else {
      out.append("\xEF\xBF\xBD");  // U+FFFD
      ++replaced;
    }
    i += n;
  }
  return replaced;
}

}  // namespace scaleguard::tokenizer
