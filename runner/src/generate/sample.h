// scaleguard-run sample: text from a trained model, one process.
//   scaleguard-run sample --ckpt CKPT_DIR | --init-from EXPORTED_DIR|FILE [train's shape options]
//       --prompt TEXT [--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S]
//       [--device auto|cpu|cuda] [--tokenizer bytes|FILE|DIR] [--no-cache]
// The model's shape comes from the checkpoint's manifest or the directory's config.json (a
// safetensors file alone needs train's shape options). Tokens: byte-level (what `prep` makes
// without --tokenizer) unless a tokenizer is named or found beside the weights.
#pragma once
#include <string>
#include <vector>

namespace scaleguard::run {

int sample_main(const std::vector<std::string>& args);

}  // namespace scaleguard::run
