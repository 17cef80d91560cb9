// A Hugging Face model directory's config.json as the runner's model keys: what
// `train --init-from DIR` (and `sample`) take the model's shape from, so an exported or
// downloaded Llama loads by its directory alone. No Torch, no Boost: parse and check only;
// config.cpp applies the keys (an explicit option that disagrees is an error naming both).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace scaleguard::run {

// One model key: the runner's option ("n-kv-head"), the config.json key it came from
// ("num_key_value_heads", or "(default)" text when HF's default applied), and its value.
struct HfKey {
  std::string key;
  std::string hf;
  double value = 0;
  enum class Kind { kInt, kReal, kBool } kind = Kind::kInt;
  std::string shown;  // config.json's side for messages: "num_key_value_heads = 2", "tie_word_embeddings = false"
};

struct HfModelConfig {
  std::string file;        // DIR/config.json
  std::string model_type;  // llama | mistral
  // n-embd, n-layer, n-head, n-kv-head, ffn-hidden, rope-theta, norm-eps, vocab-size,
  // untied-head, seq-len (from max_position_embeddings), in this order.
  std::vector<HfKey> keys;
  int64_t sliding_window = 0;          // mistral; 0 = none (full causal attention)
  std::optional<int64_t> bos, eos;     // bos_token_id / eos_token_id (the first of a list)
};

// The text a key's value is shown as in messages ("64", "1e-05", "true").
std::string hf_value_text(const HfKey& k);

// nullopt when `dir` is not a directory or holds no config.json. Throws RunError for a
// config.json that is unreadable, malformed, of another architecture (model_type other than
// llama or mistral), or asks for what the llama model does not implement (rope_scaling,
// attention or MLP biases, an activation other than silu, a head_dim other than
// hidden_size / num_attention_heads), each named with the file.
std::optional<HfModelConfig> read_hf_model_config(const std::string& dir);

}  // namespace scaleguard::run
