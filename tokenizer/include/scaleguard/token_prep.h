// Text and JSONL corpora -> token files, on every core: what `scaleguard-run prep
// --tokenizer FILE` runs. Documents are tokenized in chunks by worker threads and written in
// input order, each followed by the end-of-document token.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "scaleguard/tokenizer.h"

namespace scaleguard::tokenizer {

struct PrepOptions {
  // A *.jsonl / *.json file holds one JSON document per line with the text in `field`;
  // any other file is one document of text.
  std::vector<std::string> inputs;
  std::string output;
  // sg: scaleguard's file (uint16 tokens); llmc: llm.c's .bin, uint16 or, for vocabularies
  // above 65536, uint32 (version 7); llmc-u32: always uint32; megatron: PREFIX.bin +
  // PREFIX.idx (uint16 below 65500 tokens, else int32, as Megatron's preprocess_data.py).
  std::string format = "llmc";
  std::string field = "text";
  // The token after each document: "" the tokenizer's own end-of-document token, "none", or
  // a token's text or id.
  std::string eos;
  unsigned threads = 0;  // 0: every core
};

struct PrepStats {
  uint64_t documents = 0, tokens = 0, input_bytes = 0;
  uint64_t skipped_empty = 0;    // empty documents (nothing written)
  uint64_t replaced_utf8 = 0;    // invalid UTF-8 sequences replaced by U+FFFD
  unsigned threads = 0;
  uint32_t token_bytes = 0;      // 2 or 4
  double seconds = 0;
  std::vector<std::string> written;  // the files made
};

// Throws Error (file:line for input errors); writes to OUTPUT.tmp and renames at the end.
PrepStats prep(const Tokenizer& tokenizer, const PrepOptions& options);

}  // namespace scaleguard::tokenizer
