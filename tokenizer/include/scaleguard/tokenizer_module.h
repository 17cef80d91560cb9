// The tokenizers for a process that also loads LibTorch (scaleguard-run). Debian's
// libsentencepiece carries its own copy of protobuf-lite with every symbol exported;
// linked beside LibTorch's libprotobuf the two copies resolve each other's symbols and the
// process crashes while loading. So scaleguard-run links only this loader: it dlopen()s
// libscaleguard_tokenizer.so (the library with libsentencepiece) with RTLD_LOCAL |
// RTLD_DEEPBIND, which keeps each copy to its own symbols, and talks to it through plain C.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

extern "C" {
// The module's one entry point (ABI version 1): prep() with its options as C strings.
struct sg_tokenizer_prep_args {
  const char* tokenizer;
  const char* const* inputs;
  size_t n_inputs;
  const char* output;
  const char* format;
  const char* field;
  const char* eos;
  unsigned threads;
};
struct sg_tokenizer_prep_result {
  uint64_t documents, tokens, input_bytes, replaced_utf8;
  unsigned threads;
  uint32_t token_bytes, vocab_size;
  double seconds;
  char description[256];
  char written[4096];  // the files made, '\n' between them
  char error[4096];    // empty when it succeeded
};
typedef int (*sg_tokenizer_prep_fn)(const sg_tokenizer_prep_args*, sg_tokenizer_prep_result*);
}

namespace scaleguard::tokenizer {

// Loads the module (SCALEGUARD_TOKENIZER_MODULE, else beside the executable, else the build
// tree's and the installed path compiled in) and runs prep(); throws std::runtime_error
// with the module's message.
sg_tokenizer_prep_result prep_in_module(const sg_tokenizer_prep_args& args);

}  // namespace scaleguard::tokenizer
