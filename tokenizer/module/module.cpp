// libscaleguard_tokenizer.so: the tokenizer library behind a C entry point, for
// tokenizer_module.h's loader.
#include <cstring>

#include "scaleguard/token_prep.h"
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
