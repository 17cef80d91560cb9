// A Hugging Face config.json as the runner's model keys (runner/src/config/hf_config.cpp) and
// how `--init-from DIR` applies it (parse_train_args): HF's defaults for absent keys, what
// the llama does not implement refused by name, given options compared (runner.hf_config.*).
#include "config/hf_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "config/config.h"

namespace fs = std::filesystem;
using scaleguard::run::Config;
using scaleguard::run::parse_train_args;
using scaleguard::run::read_hf_model_config;
using scaleguard::run::RunError;

namespace {

class HfConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hf-config-test.XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& json) { std::ofstream(dir_ + "/config.json") << json; }
  std::string error_of() {
    try {
      read_hf_model_config(dir_);
    } catch (const RunError& e) {
      return e.what();
    }
    return "";
  }
  Config parse(std::vector<std::string> args) {
    args.insert(args.end(), {"--init-from", dir_, "--synthetic", "1000"});
    Config c;
    parse_train_args(args, c);
    return c;
  }
  std::string parse_error(std::vector<std::string> args) {
    try {
      parse(std::move(args));
    } catch (const RunError& e) {
      return e.what();
    }
    return "";
  }
  std::string dir_;
};

const char* kLlama = R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4,
  "num_key_value_heads": 2, "intermediate_size": 96, "rope_theta": 500000.0, "rms_norm_eps": 1e-05,
  "vocab_size": 300, "tie_word_embeddings": false, "max_position_embeddings": 128, "bos_token_id": 1,
  "eos_token_id": [2, 7]})";

}  // namespace

TEST_F(HfConfig, NoConfigJsonIsNotAnError) {
  EXPECT_FALSE(read_hf_model_config(dir_).has_value());
  EXPECT_FALSE(read_hf_model_config(dir_ + "/no-such").has_value());
}

TEST_F(HfConfig, EveryKeyApplied) {
  write(kLlama);
  const Config c = parse({});
  EXPECT_EQ(c.model, "llama");
  EXPECT_EQ(c.n_embd, 64);
  EXPECT_EQ(c.n_layer, 3);
  EXPECT_EQ(c.n_head, 4);
  EXPECT_EQ(c.n_kv_head, 2);
  EXPECT_EQ(c.ffn_hidden, 96);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.norm_eps, 1e-5);
  EXPECT_EQ(c.vocab_size, 300);
  EXPECT_TRUE(c.untied_head);
  EXPECT_EQ(c.seq_len, 128);
  EXPECT_EQ(c.effective.at("n-kv-head"), "2");
  EXPECT_EQ(c.effective.at("untied-head"), "true");
  EXPECT_EQ(c.shape_from, dir_ + "/config.json");
  const auto hf = read_hf_model_config(dir_);
  EXPECT_EQ(hf->bos, 1);
  EXPECT_EQ(hf->eos, 2);  // the first of a list
}

TEST_F(HfConfig, HuggingFacesDefaultsForAbsentKeys) {
  write(R"({"model_type": "llama", "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 4,
            "intermediate_size": 64, "vocab_size": 256})");
  const Config c = parse({"--seq-len", "16"});
  EXPECT_EQ(c.n_kv_head, 4);      // num_attention_heads
  EXPECT_EQ(c.rope_theta, 10000);
  EXPECT_EQ(c.norm_eps, 1e-6);
  EXPECT_TRUE(c.untied_head);     // tie_word_embeddings false
  EXPECT_EQ(c.seq_len, 16);       // no max_position_embeddings: the option stands
}

TEST_F(HfConfig, GivenOptionsMustAgree) {
  write(kLlama);
  EXPECT_NO_THROW(parse({"--n-embd", "64", "--model", "llama", "--seq-len", "32"}));
  EXPECT_EQ(parse({"--seq-len", "32"}).seq_len, 32);
  EXPECT_NE(parse_error({"--n-layer", "2"}).find("--n-layer 2 disagrees with " + dir_ +
                                                  "/config.json: num_hidden_layers = 3"), std::string::npos);
  EXPECT_NE(parse_error({"--norm-eps", "1e-6"}).find("--norm-eps 1e-06 disagrees with " + dir_ +
                                                      "/config.json: rms_norm_eps = 1e-05"), std::string::npos);
  EXPECT_NE(parse_error({"--vocab-size", "256"}).find("vocab_size = 300"), std::string::npos);
  EXPECT_NE(parse_error({"--seq-len", "129"}).find("longer than the model's context"), std::string::npos);
  EXPECT_NE(parse_error({"--model", "gpt"}).find("--model gpt, but"), std::string::npos);
  // SCALEGUARD_* is a given value too.
  setenv("SCALEGUARD_N_HEAD", "8", 1);
  const std::string env_error = parse_error({});
  unsetenv("SCALEGUARD_N_HEAD");
  EXPECT_NE(env_error.find("--n-head 8 disagrees"), std::string::npos) << env_error;
}

TEST_F(HfConfig, UnimplementedRefusedByName) {
  const std::string base = R"("hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4,
                              "intermediate_size": 96, "vocab_size": 256)";
  auto refused = [&](const std::string& extra, const std::string& want) {
    write("{" + base + ", " + extra + "}");
    const std::string e = error_of();
    EXPECT_NE(e.find(want), std::string::npos) << extra << " -> '" << e << "'";
  };
  refused(R"("model_type": "gpt2")", "model_type 'gpt2'");
  refused(R"("model_type": "llama", "rope_scaling": {"rope_type": "llama3", "factor": 8.0})", "rope_scaling");
  refused(R"("model_type": "llama", "attention_bias": true)", "attention_bias is true");
  refused(R"("model_type": "llama", "mlp_bias": true)", "mlp_bias is true");
  refused(R"("model_type": "llama", "hidden_act": "gelu")", "hidden_act 'gelu'");
  refused(R"("model_type": "llama", "head_dim": 32)", "head_dim 32");
  refused(R"("model_type": "llama", "rope_parameters": {"rope_type": "yarn"})", "rope_type 'yarn'");
  write("{" + base + R"(, "model_type": "llama", "rope_scaling": null, "head_dim": 16})");
  EXPECT_EQ(error_of(), "");
  write(R"({"model_type": "llama", "hidden_size": 64})");
  EXPECT_NE(error_of().find("num_attention_heads (missing)"), std::string::npos) << error_of();
  write("not json");
  EXPECT_NE(error_of().find("not a JSON object"), std::string::npos);
}

TEST_F(HfConfig, MistralSlidingWindow) {
  write(R"({"model_type": "mistral", "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4,
            "intermediate_size": 96, "vocab_size": 256, "sliding_window": 32, "max_position_embeddings": 128})");
  EXPECT_EQ(parse({"--seq-len", "32"}).model, "llama");
  EXPECT_NE(parse_error({"--seq-len", "64"}).find("sliding_window = 32 is shorter than seq-len 64"), std::string::npos);
}
