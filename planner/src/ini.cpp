#include "scaleguard/ini.h"

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "scaleguard/text.h"

namespace scaleguard::ini {

Error File::error_at(const Entry& e, std::string message, std::string hint) const {
  Error err;
  err.file = path;
  err.line = e.line;
  err.field = e.section.empty() ? e.key : "[" + e.section + "] " + e.key;
  err.message = std::move(message);
  err.hint = std::move(hint);
  return err;
}

namespace {

Error file_error(const std::string& path, int line, std::string message, std::string hint) {
  Error err;
  err.file = path;
  err.line = line;
  err.message = std::move(message);
  err.hint = std::move(hint);
  return err;
}

// Normalises a header "[ gpu   A100-80GB ]" to "gpu A100-80GB" (the whole line trimmed;
// inner runs of blanks are rejected below).
std::string header_text(const std::string& line) { return text::trim(line.substr(1, line.size() - 2)); }

}  // namespace

Result<File> read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return file_error(path, 0, "cannot open file", "check the path and its permissions");
  std::string content;
  {
    // Read in pieces: a config file is a few KB, and zero-filling a 1 MiB buffer for each one
    // made every load (and the fuzz harness, 28 loads/s) pay for the limit.
    constexpr size_t kMax = 1 << 20;
    char piece[16384];
    while (in.read(piece, sizeof piece) || in.gcount() > 0) {
      content.append(piece, static_cast<size_t>(in.gcount()));
      if (content.size() > kMax) return file_error(path, 0, "file larger than 1 MiB", "is this the right file?");
    }
  }

  // Pre-scan: structure, line numbers, duplicates.
  File file;
  file.path = path;
  std::vector<Entry> scanned;
  std::string section;
  std::set<std::string> seen_sections;
  std::map<std::string, int> seen_keys;  // "section\nkey" -> line
  std::istringstream lines(content);
  std::string raw;
  for (int number = 1; std::getline(lines, raw); ++number) {
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();
    std::string s = raw;
    if (auto hash = s.find('#'); hash != std::string::npos) s.resize(hash);
    s = text::trim(s);
    if (s.empty()) continue;
    if (text::has_control(s))
      return file_error(path, number, "control character in line", "remove tabs/escape characters");
    if (s.front() == '[') {
      if (s.back() != ']')
        return file_error(path, number, "section header without closing ']'", "write [kind name]");
      section = header_text(s);
      if (section.empty() || section.find(']') != std::string::npos || section.find('[') != std::string::npos)
        return file_error(path, number, "malformed section header '" + s + "'", "write [kind name]");
      auto words = text::split(section, ' ');
      Section sec;
      sec.kind = words[0];
      for (size_t i = 1; i < words.size(); ++i) {
        if (words[i].empty())
          return file_error(path, number, "section header with repeated blanks", "write [kind name] with one space");
        if (!sec.name.empty())
          return file_error(path, number, "section header has more than two words", "write [kind name]");
        sec.name = words[i];
      }
      section = sec.kind + (sec.name.empty() ? "" : " " + sec.name);
      sec.line = number;
      if (!seen_sections.insert(section).second)
        return file_error(path, number, "section [" + section + "] appears twice", "merge the two sections");
      file.sections.push_back(sec);
      continue;
    }
    auto eq = s.find('=');
    if (eq == std::string::npos)
      return file_error(path, number, "expected 'key = value', got '" + s + "'", "add '=' or comment the line out with #");
    Entry e{section, text::trim(s.substr(0, eq)), text::trim(s.substr(eq + 1)), number};
    if (e.key.empty()) return file_error(path, number, "missing key before '='", "write key = value");
    if (e.key.find_first_of(" .[]") != std::string::npos)
      return file_error(path, number, "malformed key '" + e.key + "'", "keys are single words like max_time");
    auto [it, fresh] = seen_keys.emplace(section + "\n" + e.key, number);
    if (!fresh)
      return file_error(path, number, "key '" + e.key + "' set twice (first on line " + std::to_string(it->second) + ")",
                        "keep one of the two lines");
    scanned.push_back(std::move(e));
  }

  file.entries = std::move(scanned);
  return file;
}

}  // namespace scaleguard::ini

#include "parse_number.h"

namespace scaleguard::ini {

Result<bool> bind(const File& file, const std::string& section, int header_line,
                  const std::vector<Field>& fields) {
  std::vector<bool> seen(fields.size(), false);
  std::vector<std::string> known;
  for (const auto& f : fields) known.push_back(f.key);
  for (const auto& e : file.entries) {
    if (e.section != section) continue;
    size_t i = 0;
    while (i < fields.size() && e.key != fields[i].key) ++i;
    if (i == fields.size()) {
      std::string near = text::closest(e.key, known);
      std::string hint = near.empty() ? "known keys here: " : "did you mean '" + near + "'? known keys: ";
      for (size_t k = 0; k < known.size(); ++k) hint += (k ? ", " : "") + known[k];
      return file.error_at(e, "unknown key '" + e.key + "'", hint);
    }
    const Field& f = fields[i];
    seen[i] = true;
    const std::string range = text::format(" between %g and %g", f.min, f.max);
    switch (f.kind) {
      case Field::number: {
        auto v = parse_number(e.value);
        if (!v) return file.error_at(e, "'" + e.value + "' is not a number", std::string("expected ") + f.help);
        if (*v < f.min || *v > f.max)
          return file.error_at(e, "'" + e.value + "' is out of range", "expected a value" + range);
        *static_cast<double*>(f.target) = *v;
        break;
      }
      case Field::integer: {
        auto v = parse_integer(e.value);
        if (!v) return file.error_at(e, "'" + e.value + "' is not a whole number", std::string("expected ") + f.help);
        if (*v < f.min || *v > f.max)
          return file.error_at(e, "'" + e.value + "' is out of range", "expected a whole number" + range);
        *static_cast<int*>(f.target) = static_cast<int>(*v);
        break;
      }
      case Field::text:
        if (e.value.empty()) return file.error_at(e, "empty value", std::string("expected ") + f.help);
        *static_cast<std::string*>(f.target) = e.value;
        break;
      case Field::yes_no: {
        const std::string v = text::lower(e.value);
        if (v == "yes" || v == "true" || v == "1") *static_cast<bool*>(f.target) = true;
        else if (v == "no" || v == "false" || v == "0") *static_cast<bool*>(f.target) = false;
        else return file.error_at(e, "'" + e.value + "' is not yes or no", "write yes or no");
        break;
      }
    }
  }
  for (size_t i = 0; i < fields.size(); ++i) {
    if (fields[i].required && !seen[i]) {
      Error err;
      err.file = file.path;
      err.line = header_line;
      err.field = section.empty() ? fields[i].key : "[" + section + "] " + fields[i].key;
      err.message = std::string("missing key '") + fields[i].key + "'";
      err.hint = std::string("add ") + fields[i].key + " = <" + fields[i].help + ">";
      return err;
    }
  }
  return true;
}

}  // namespace scaleguard::ini
