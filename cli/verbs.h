// The `scaleguard` CLI: one file per verb, each registering itself here, so a part can add
// a verb (e.g. `ckpt`, `report`) by dropping in a file. Exit codes: 0 ok (decide: accept or
// warn), 1 runtime error, 2 usage error, 3 decide: rewrite, 4 decide: reject.
#pragma once

namespace scaleguard::cli {

struct Verb {
  const char* name;
  const char* summary;                  // one line for `scaleguard --help`
  int (*run)(int argc, char** argv);    // argv[0] is the verb name
};

// Call from a namespace-scope initializer: static const bool r = register_verb({...});
bool register_verb(const Verb& verb);

}  // namespace scaleguard::cli
