// The files beside the weights in a Hugging Face model directory that `export` writes:
// the tokenizer's (copied from where the user or the run's --init-from directory had them)
// and generation_config.json. No Torch.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace scaleguard::run {

// The tokenizer files a model directory may hold, copied as they are.
const std::vector<std::string>& tokenizer_file_names();

// The files of `dir` that hold a tokenizer (tokenizer.json or tokenizer.model), in that order.
std::vector<std::string> tokenizer_files_in(const std::string& dir);

struct TokenizerCopy {
  std::vector<std::string> copied;           // file names written into the output directory
  std::string generation_config_from;        // a source directory's generation_config.json, copied ("" if none)
  std::optional<int64_t> bos, eos;           // the special tokens' ids, when the sources tell them
  std::string from;                          // the sources, for the log
};

// Copies the tokenizer files of `sources` into `output`: a directory gives every file of
// tokenizer_file_names() it holds (and its generation_config.json), a file is copied under
// its own name when that is one of them, else as tokenizer.json (JSON) or tokenizer.model.
// `required`: a source that holds no tokenizer file is an error (--tokenizer given by the
// user); otherwise it is skipped. Token ids: the source directory's config.json
// (bos_token_id, eos_token_id), else tokenizer_config.json's tokens looked up in
// tokenizer.json. Throws RunError.
TokenizerCopy copy_tokenizer_files(const std::vector<std::string>& sources, const std::string& output, bool required);

// generation_config.json for the exported model: the ids it knows (none for byte-level).
std::string generation_config_json(const std::optional<int64_t>& bos, const std::optional<int64_t>& eos);

}  // namespace scaleguard::run
