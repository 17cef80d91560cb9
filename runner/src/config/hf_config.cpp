#include "config/hf_config.h"

#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>  // header-only, in the default include path
#include <sstream>

#include "config/config.h"

namespace scaleguard::run {
using json = nlohmann::json;

std::string hf_value_text(const HfKey& k) {
  if (k.kind == HfKey::Kind::kBool) return k.value != 0 ? "true" : "false";
  if (k.kind == HfKey::Kind::kInt) return std::to_string(static_cast<long long>(k.value));
  if (k.value == std::floor(k.value) && std::fabs(k.value) < 1e15)  // 500000, not 5e+05
    return std::to_string(static_cast<long long>(k.value));
  return short_double_text(k.value);
}

namespace {

bool is_directory(const std::string& p) {
  struct stat sb {};
  return ::stat(p.c_str(), &sb) == 0 && S_ISDIR(sb.st_mode);
}

// A token id field: an integer, or a list of them (Llama 3's eos_token_id): its first.
std::optional<int64_t> token_id(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return std::nullopt;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_array() && !it->empty() && it->front().is_number_integer()) return it->front().get<int64_t>();
  return std::nullopt;
}

}  // namespace

std::optional<HfModelConfig> read_hf_model_config(const std::string& dir) {
  if (!is_directory(dir)) return std::nullopt;
  HfModelConfig out;
  out.file = dir + (dir.empty() || dir.back() == '/' ? "" : "/") + "config.json";
  std::ifstream in(out.file, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().size() > (16u << 20)) throw RunError(out.file + ": larger than 16 MiB; not a model configuration");
  const json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) throw RunError(out.file + ": not a JSON object");
  auto fail = [&](const std::string& what) { throw RunError(out.file + ": " + what); };

  out.model_type = j.value("model_type", std::string());
  if (out.model_type != "llama" && out.model_type != "mistral")
    fail("model_type '" + out.model_type + "': --init-from DIR reads the shape of llama (and mistral) models; " +
         "give the .safetensors file itself, with the shape options, to load other weights");
  // What the runner's Llama does not implement is refused by name, never ignored.
  const std::string act = j.value("hidden_act", std::string("silu"));
  if (act != "silu") fail("hidden_act '" + act + "': the llama model's MLP is SwiGLU (silu)");
  for (const char* bias : {"attention_bias", "mlp_bias"})
    if (j.contains(bias) && j[bias].is_boolean() && j[bias].get<bool>())
      fail(std::string(bias) + " is true: the llama model has no biases");
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
    fail("rope_scaling " + j["rope_scaling"].dump() + " is not implemented (plain rotary embeddings only)");
  double rope_theta = 10000;  // LlamaConfig's default
  std::string theta_from = "(default)";
  if (j.contains("rope_theta") && j["rope_theta"].is_number()) {
    rope_theta = j["rope_theta"].get<double>();
    theta_from = "rope_theta";
  }
  if (auto rp = j.find("rope_parameters"); rp != j.end() && rp->is_object()) {  // newer transformers' form
    const std::string type = rp->value("rope_type", std::string("default"));
    if (type != "default") fail("rope_parameters.rope_type '" + type + "' is not implemented (plain rotary embeddings only)");
    if (rp->contains("rope_theta") && (*rp)["rope_theta"].is_number()) {
      rope_theta = (*rp)["rope_theta"].get<double>();
      theta_from = "rope_parameters.rope_theta";
    }
  }

  auto integer = [&](const char* key) -> int64_t {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_integer() || it->get<int64_t>() <= 0)
      fail(std::string("needs a positive integer ") + key + (it == j.end() ? " (missing)" : ", has " + it->dump()));
    return it->get<int64_t>();
  };
  const int64_t hidden = integer("hidden_size"), heads = integer("num_attention_heads");
  int64_t kv = heads;
  std::string kv_from = "(default: num_attention_heads)";
  if (j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null()) {
    kv = integer("num_key_value_heads");
    kv_from = "num_key_value_heads";
  }
  if (hidden % heads != 0)
    fail("num_attention_heads " + std::to_string(heads) + " does not divide hidden_size " + std::to_string(hidden));
  if (j.contains("head_dim") && !j["head_dim"].is_null() && j["head_dim"] != json(hidden / heads))
    fail("head_dim " + j["head_dim"].dump() + " is not hidden_size / num_attention_heads = " +
         std::to_string(hidden / heads) + " (not implemented)");
  double eps = 1e-6;  // LlamaConfig's and MistralConfig's default
  std::string eps_from = "(default)";
  if (j.contains("rms_norm_eps") && j["rms_norm_eps"].is_number()) {
    eps = j["rms_norm_eps"].get<double>();
    eps_from = "rms_norm_eps";
  }
  bool tied = false;  // LlamaConfig's default
  std::string tied_from = "(default: tie_word_embeddings false)";
  if (j.contains("tie_word_embeddings") && j["tie_word_embeddings"].is_boolean()) {
    tied = j["tie_word_embeddings"].get<bool>();
    tied_from = "tie_word_embeddings";
  }
  using K = HfKey::Kind;
  out.keys = {{"n-embd", "hidden_size", static_cast<double>(hidden), K::kInt},
              {"n-layer", "num_hidden_layers", static_cast<double>(integer("num_hidden_layers")), K::kInt},
              {"n-head", "num_attention_heads", static_cast<double>(heads), K::kInt},
              {"n-kv-head", kv_from, static_cast<double>(kv), K::kInt},
              {"ffn-hidden", "intermediate_size", static_cast<double>(integer("intermediate_size")), K::kInt},
              {"rope-theta", theta_from, rope_theta, K::kReal},
              {"norm-eps", eps_from, eps, K::kReal},
              {"vocab-size", "vocab_size", static_cast<double>(integer("vocab_size")), K::kInt},
              {"untied-head", tied_from, tied ? 0.0 : 1.0, K::kBool}};
  for (HfKey& k : out.keys)
    k.shown = k.key == "untied-head" ? (k.hf == "tie_word_embeddings" ? "tie_word_embeddings = " : "tie_word_embeddings absent: ") +
                                           std::string(k.value != 0 ? "false" : "true")
              : k.hf[0] == '(' ? k.key + " " + hf_value_text(k) + " " + k.hf
                               : k.hf + " = " + hf_value_text(k);
  if (j.contains("max_position_embeddings") && !j["max_position_embeddings"].is_null())
    out.keys.push_back({"seq-len", "max_position_embeddings", static_cast<double>(integer("max_position_embeddings")), K::kInt,
                        "max_position_embeddings = " + std::to_string(integer("max_position_embeddings"))});
  if (rope_theta <= 0 || eps <= 0) fail("rope_theta and rms_norm_eps must be positive");
  if (out.model_type == "mistral" && j.contains("sliding_window") && !j["sliding_window"].is_null())
    out.sliding_window = integer("sliding_window");
  out.bos = token_id(j, "bos_token_id");
  out.eos = token_id(j, "eos_token_id");
  return out;
}

}  // namespace scaleguard::run
