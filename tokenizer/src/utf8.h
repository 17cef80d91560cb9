// UTF-8 helpers shared by the tokenizers and the corpus reader.
#pragma once

#include <cstddef>
#include <string_view>

namespace scaleguard::tokenizer::detail {

// The bytes of the character at s[i] when they form valid UTF-8 (Unicode table 3-7), with
// `valid` true; otherwise the length of the maximal invalid subpart there (>= 1), `valid`
// false.
size_t utf8_char(std::string_view s, size_t i, bool& valid);

bool valid_utf8(std::string_view s);

// The length of the Unicode White_Space character at s[i] (what Rust's char::is_whitespace
// and regex \s mean), 0 if none there.
size_t whitespace_at(std::string_view s, size_t i);

}  // namespace scaleguard::tokenizer::detail
