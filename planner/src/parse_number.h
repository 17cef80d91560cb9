// Locale-free number parsing shared by the parsers and config loaders (private header).
#pragma once
#include <optional>
#include <string>

namespace scaleguard {
std::optional<double> parse_number(const std::string& s);    // finite doubles only
std::optional<long long> parse_integer(const std::string& s);
}  // namespace scaleguard
