#include "text.h"

namespace sg_slurm {

bool has_control(std::string_view text) {
  for (unsigned char c : text)
    if (c < 0x20 || c == 0x7f) return true;
  return false;
}

std::string one_line(std::string_view text, size_t max) {
  std::string out;
  out.reserve(text.size() < max ? text.size() : max);
  for (unsigned char c : text) {
    bool space = c < 0x20 || c == 0x7f || c == ' ';
    if (space) {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += static_cast<char>(c);
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  if (out.size() <= max) return out;
  size_t cut = max > 3 ? max - 3 : 0;
  // Do not split a UTF-8 sequence: back up over continuation bytes.
  while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
  out.resize(cut);
  return out + "...";
}

std::string preview(std::string_view value) {
  return "'" + one_line(value.substr(0, 64), 40) + "'" +
         (value.size() > 40 ? " (" + std::to_string(value.size()) + " bytes)" : "");
}

bool is_plan_env_name(std::string_view name) {
  constexpr std::string_view prefix = "SCALEGUARD_";
  if (name.size() <= prefix.size() || name.size() > 64 || name.substr(0, prefix.size()) != prefix)
    return false;
  for (char c : name)
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

}  // namespace sg_slurm
