// libscaleguard_tokenizer.so: the tokenizer library behind a C entry point, for
// tokenizer_module.h's loader.
#include <algorithm>
#include <cstring>
#include <string_view>
#include <vector>

#include "scaleguard/token_prep.h"
#include "scaleguard/tokenizer.h"
#include "scaleguard/tokenizer_module.h"

namespace {
void copy(char* to, size_t size, const std::string& from) {
  std::strncpy(to, from.c_str(), size - 1);
  to[size - 1] = '\0';
}
}  // namespace

extern "C" __attribute__((visibility("default"))) int sg_tokenizer_prep_v1(const sg_tokenizer_prep_args* a,
                                                                            sg_tokenizer_prep_result* r) {
  namespace tk = scaleguard::tokenizer;
  *r = sg_tokenizer_prep_result{};
  try {
    auto tok = tk::load(a->tokenizer);
    tk::PrepOptions o;
    o.inputs.assign(a->inputs, a->inputs + a->n_inputs);
    o.output = a->output;
    o.format = a->format;
    o.field = a->field;
    o.eos = a->eos;
    o.threads = a->threads;
    const tk::PrepStats s = tk::prep(*tok, o);
    r->documents = s.documents, r->tokens = s.tokens, r->input_bytes = s.input_bytes;
    r->replaced_utf8 = s.replaced_utf8, r->threads = s.threads, r->token_bytes = s.token_bytes;
    r->vocab_size = tok->vocab_size(), r->seconds = s.seconds;
    copy(r->description, sizeof r->description, tok->describe());
    std::string written;
    for (const auto& w : s.written) written += (written.empty() ? "" : "\n") + w;
    copy(r->written, sizeof r->written, written);
    return 0;
  } catch (const std::exception& e) {
    copy(r->error, sizeof r->error, e.what());
    return 1;
  }
}

// A loaded tokenizer for encode/decode (tokenizer_module.h, ModuleTokenizer).
extern "C" __attribute__((visibility("default"))) void* sg_tokenizer_open_v1(const char* path, sg_tokenizer_info* info) {
  namespace tk = scaleguard::tokenizer;
  *info = sg_tokenizer_info{};
  try {
    auto tok = tk::load(path);
    info->vocab_size = tok->vocab_size();
    if (auto e = tok->eos()) info->has_eos = 1, info->eos = *e;
    copy(info->description, sizeof info->description, tok->describe());
    return tok.release();
  } catch (const std::exception& e) {
    copy(info->error, sizeof info->error, e.what());
    return nullptr;
  }
}

extern "C" __attribute__((visibility("default"))) long sg_tokenizer_encode_v1(void* t, const char* text, size_t len,
                                                                             uint32_t* ids, size_t cap, char* error,
                                                                             size_t error_size) {
  try {
    std::vector<uint32_t> out;
    static_cast<scaleguard::tokenizer::Tokenizer*>(t)->encoder()->encode(std::string_view(text, len), out);
    std::memcpy(ids, out.data(), std::min(cap, out.size()) * sizeof(uint32_t));
    return static_cast<long>(out.size());
  } catch (const std::exception& e) {
    copy(error, error_size, e.what());
    return -1;
  }
}

extern "C" __attribute__((visibility("default"))) long sg_tokenizer_decode_v1(void* t, const uint32_t* ids, size_t n,
                                                                             char* text, size_t cap, char* error,
                                                                             size_t error_size) {
  try {
    const std::string out = static_cast<scaleguard::tokenizer::Tokenizer*>(t)->decode(std::vector<uint32_t>(ids, ids + n));
    std::memcpy(text, out.data(), std::min(cap, out.size()));
    return static_cast<long>(out.size());
  } catch (const std::exception& e) {
    copy(error, error_size, e.what());
    return -1;
  }
}

extern "C" __attribute__((visibility("default"))) void sg_tokenizer_close_v1(void* t) {
  delete static_cast<scaleguard::tokenizer::Tokenizer*>(t);
}
