// Small string helpers shared by the planner's sources (private header).
#pragma once
#include <string>
#include <vector>

namespace scaleguard::text {

std::string trim(const std::string& s);
std::string lower(std::string s);
std::vector<std::string> split(const std::string& s, char sep);  // trimmed pieces, empties kept
std::string join(const std::vector<std::string>& parts, const std::string& sep);
bool iequals(const std::string& a, const std::string& b);
// True when s has control characters (newlines, tabs, NUL, DEL) that must never reach a
// message, comment or environment variable.
bool has_control(const std::string& s);
// printf into a std::string (numbers in messages); bounded to 1 KiB.
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// "11", "1.5", "0.25": at most `digits` significant decimals, no trailing zeros.
std::string num(double v, int digits = 2);
// "$11", "$1,234", "$0.92"
std::string money(double usd);
// Closest of `candidates` to `word` by edit distance (<= 3), empty when none is close.
std::string closest(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace scaleguard::text
