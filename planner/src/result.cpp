#include "scaleguard/result.h"

namespace scaleguard {

std::string Error::str() const {
  std::string out;
  if (!file.empty()) out += file + (line > 0 ? ":" + std::to_string(line) : "") + ": ";
  if (!field.empty()) out += field + ": ";
  out += message;
  if (!hint.empty()) out += " (hint: " + hint + ")";
  return out;
}

}  // namespace scaleguard
