// The tokenizer library's prep() as a command, for the parity tests and the benchmark (the
// same call `scaleguard-run prep --tokenizer` makes, without MPI or LibTorch):
//   sg_tokenize TOKENIZER OUTPUT FORMAT FIELD EOS THREADS INPUT...
#include <cstdio>
#include <string>

#include "scaleguard/token_prep.h"

int main(int argc, char** argv) {
  if (argc < 8) {
    std::fprintf(stderr, "usage: sg_tokenize TOKENIZER OUTPUT FORMAT FIELD EOS THREADS INPUT...\n");
    return 64;
  }
  namespace tk = scaleguard::tokenizer;
  try {
    auto tok = tk::load(argv[1]);
    tk::PrepOptions o;
    o.output = argv[2];
    o.format = argv[3];
    o.field = argv[4];
    o.eos = std::string(argv[5]) == "default" ? "" : argv[5];
    o.threads = static_cast<unsigned>(std::stoul(argv[6]));
    for (int i = 7; i < argc; ++i) o.inputs.push_back(argv[i]);
    const tk::PrepStats s = tk::prep(*tok, o);
    std::printf("%s: %llu documents, %llu tokens, %.2f MB in %.3f s: %.2f MB/s on %u threads\n", tok->describe().c_str(),
                static_cast<unsigned long long>(s.documents), static_cast<unsigned long long>(s.tokens),
                s.input_bytes / 1e6, s.seconds, s.input_bytes / 1e6 / s.seconds, s.threads);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sg_tokenize: %s\n", e.what());
    return 1;
  }
  return 0;
}
