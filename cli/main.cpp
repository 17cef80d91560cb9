// `scaleguard VERB [options]`: dispatches to the verbs that registered themselves.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "verbs.h"
#include "scaleguard/build_info.h"

namespace scaleguard::cli {
namespace {
std::vector<Verb>& verbs() {
  static std::vector<Verb> all;
  return all;
}
}  // namespace

bool register_verb(const Verb& verb) {
  verbs().push_back(verb);
  return true;
}
}  // namespace scaleguard::cli

int main(int argc, char** argv) {
  using scaleguard::cli::verbs;
  auto& all = verbs();
  std::sort(all.begin(), all.end(),
            [](const auto& a, const auto& b) { return std::strcmp(a.name, b.name) < 0; });
  const bool want_help = argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h");
  if (argc >= 2 && !std::strcmp(argv[1], "--version")) {
    std::printf("scaleguard %s\n", scaleguard::build_version());
    return 0;
  }
  if (!want_help) {
    for (const auto& verb : all) {
      if (!std::strcmp(verb.name, argv[1])) {
        try {
          return verb.run(argc - 1, argv + 1);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "scaleguard %s: %s\n", verb.name, e.what());
          return 1;
        }
      }
    }
    std::fprintf(stderr, "scaleguard: unknown command '%s' (see scaleguard --help)\n", argv[1]);
  }
  FILE* out = want_help ? stdout : stderr;
  std::fprintf(out, "usage: scaleguard COMMAND [options]   (scaleguard COMMAND --help)\n\ncommands:\n");
  for (const auto& verb : all) std::fprintf(out, "  %-14s %s\n", verb.name, verb.summary);
  return want_help ? 0 : 2;
}
