// Slurm-style INI files ("key = value" lines, "[kind name]" sections, '#' comments), read
// line by line so that syntax errors and duplicate keys come with their line. No Boost: the
// Slurm plugins link this reader (it used to re-read values with Boost.Program_options'
// parse_config_file, which agreed with this scan line for line and needed libboost_* on
// every Slurm node).
#pragma once
#include <string>
#include <vector>

#include "scaleguard/result.h"

namespace scaleguard::ini {

struct Entry {
  std::string section;   // "" for the global part, else the header text: "gpu A100-80GB"
  std::string key;
  std::string value;
  int line = 0;
};

struct Section {
  std::string kind;      // first word of the header: "gpu", "partition", "rules"
  std::string name;      // the rest: "A100-80GB" (may be empty)
  int line = 0;
};

struct File {
  std::string path;
  std::vector<Section> sections;   // in file order, the global part not included
  std::vector<Entry> entries;      // in file order
  Error error_at(const Entry& e, std::string message, std::string hint = "") const;
};

// Reads and checks a file (at most 1 MiB): every line blank, a comment, a "[header]" or
// "key = value"; no key twice in one section; no section header twice.
Result<File> read(const std::string& path);

}  // namespace scaleguard::ini

namespace scaleguard::ini {

// Binds the keys of one section to variables: unknown keys, malformed values, values out of
// range and missing required keys are errors with file, line, key and a hint.
struct Field {
  const char* key;
  enum Kind { number, integer, text, yes_no } kind;
  void* target;          // double*, int*, std::string*, bool*
  double min = 0, max = 0;
  bool required = false;
  const char* help = "";  // what the value means, for hints
};
// `section` is the header text ("" = global part); `header_line` for missing-key errors.
Result<bool> bind(const File& file, const std::string& section, int header_line,
                  const std::vector<Field>& fields);

}  // namespace scaleguard::ini
