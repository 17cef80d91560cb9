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

// A tokenizer loaded once, for encoding and decoding (`scaleguard-run sample`):
// sg_tokenizer_open_v1 returns a handle (NULL on error, the message in info->error);
// encode/decode write at most `cap` ids / bytes and return how many the whole result has
// (call again with a larger buffer when that is more), or -1 with the message in `error`.
struct sg_tokenizer_info {
  uint32_t vocab_size;
  int has_eos;
  uint32_t eos;
  char description[256];
  char error[4096];
};
typedef void* (*sg_tokenizer_open_fn)(const char* path, sg_tokenizer_info* info);
typedef long (*sg_tokenizer_encode_fn)(void* tokenizer, const char* text, size_t len, uint32_t* ids, size_t cap,
                                       char* error, size_t error_size);
typedef long (*sg_tokenizer_decode_fn)(void* tokenizer, const uint32_t* ids, size_t n, char* text, size_t cap,
                                       char* error, size_t error_size);
typedef void (*sg_tokenizer_close_fn)(void* tokenizer);
}

namespace scaleguard::tokenizer {

// Loads the module (SCALEGUARD_TOKENIZER_MODULE, else beside the executable, else the build
// tree's and the installed path compiled in) and runs prep(); throws std::runtime_error
// with the module's message.
sg_tokenizer_prep_result prep_in_module(const sg_tokenizer_prep_args& args);

// A tokenizer file or model directory loaded in the module (tokenizer.h's load()): encode
// and decode for a process that also holds LibTorch. Throws std::runtime_error.
class ModuleTokenizer {
 public:
  explicit ModuleTokenizer(const std::string& path);
  ~ModuleTokenizer();
  ModuleTokenizer(const ModuleTokenizer&) = delete;
  ModuleTokenizer& operator=(const ModuleTokenizer&) = delete;
  std::vector<uint32_t> encode(const std::string& text) const;
  std::string decode(const std::vector<uint32_t>& ids) const;
  uint32_t vocab_size() const { return info_.vocab_size; }
  bool has_eos() const { return info_.has_eos != 0; }
  uint32_t eos() const { return info_.eos; }
  std::string describe() const { return info_.description; }

 private:
  void* handle_ = nullptr;
  sg_tokenizer_info info_{};
};

}  // namespace scaleguard::tokenizer
