// Llama shapes in the planner (issue 26): the catalog's llama sections (arch, kv_heads,
// ffn_hidden, rope_theta, norm_eps, tied), the exact parameter count of GQA + SwiGLU shapes
// (what scaleguard-run --model llama builds; tests/runner/llama_strategies.sh compares the
// runner's count with `scaleguard plan`'s), and the memory model's untied embedding.
#include <gtest/gtest.h>

#include "scaleguard/catalog.h"
#include "scaleguard/decide.h"
#include "scaleguard/model.h"
#include "scaleguard/plan.h"
#include "test_support.h"

using namespace scaleguard;
using scaleguard::test::real_catalog;
using scaleguard::test::TempFile;

namespace {
// Llama counted tensor by tensor as Hugging Face names them (d = hidden / heads):
// embed_tokens V*h; per layer q_proj h*h, k_proj and v_proj (kv*d)*h, o_proj h*h,
// gate_proj and up_proj f*h, down_proj h*f, input_layernorm and post_attention_layernorm
// h; model.norm h; lm_head V*h unless tied.
double hand_count(double L, double h, double heads, double kv, double f, double V, bool tied) {
  const double d = h / heads;
  double layer = 0;
  layer += h * h;              // q_proj
  layer += 2 * (kv * d) * h;   // k_proj, v_proj
  layer += h * h;              // o_proj
  layer += 2 * f * h;          // gate_proj, up_proj
  layer += h * f;              // down_proj
  layer += 2 * h;              // the two RMSNorm weights
  return V * h + L * layer + h + (tied ? 0 : V * h);
}

Error catalog_error(const std::string& model_section) {
  TempFile f(model_section, "catalog.ini");
  auto c = load_catalog(f.path());
  EXPECT_FALSE(c.ok()) << model_section;
  return c.ok() ? Error{} : c.error();
}
}  // namespace

TEST(Llama, FfnRuleIsMetas) {
  EXPECT_EQ(llama_ffn_hidden(4096), 11008);  // llama2-7b
  EXPECT_EQ(llama_ffn_hidden(5120), 13824);  // llama2-13b
  EXPECT_EQ(llama_ffn_hidden(64), 256);      // int(2*256/3) = 170 -> 256
  EXPECT_EQ(llama_ffn_hidden(768), 2048);    // 2048 exactly: no rounding
}

TEST(Llama, ParamCountEqualsAHandCount) {
  // The runner test's shape: 2 layers, hidden 64, 4 heads, 2 kv heads, ffn 256, vocab 256, untied.
  EXPECT_DOUBLE_EQ(llama_params(2, 64, 4, 2, 256, 256, false), 155968.0);
  EXPECT_DOUBLE_EQ(llama_params(2, 64, 4, 2, 256, 256, false), hand_count(2, 64, 4, 2, 256, 256, false));
  EXPECT_DOUBLE_EQ(llama_params(2, 64, 4, 4, 256, 256, true), hand_count(2, 64, 4, 4, 256, 256, true));
  // Published counts: Llama 2 7B 6,738,415,616; Llama 3 8B 8,030,261,248 (GQA, 8 kv heads).
  EXPECT_DOUBLE_EQ(llama_params(32, 4096, 32, 32, 11008, 32000, false), 6738415616.0);
  EXPECT_DOUBLE_EQ(llama_params(32, 4096, 32, 8, 14336, 128256, false), 8030261248.0);
  EXPECT_DOUBLE_EQ(llama_params(32, 4096, 32, 8, 14336, 128256, false), hand_count(32, 4096, 32, 8, 14336, 128256, false));
}

TEST(Llama, CatalogPresetsCarryTheArchitecture) {
  auto m = parse_model_spec("llama3-8b", real_catalog()).value();
  EXPECT_EQ(m.arch, "llama");
  EXPECT_EQ(m.kv_heads, 8);
  EXPECT_EQ(m.ffn_hidden, 14336);
  EXPECT_FALSE(m.tied);
  EXPECT_DOUBLE_EQ(m.params, 8030261248.0);
  const ModelPreset* p = real_catalog().find_model("llama3-8b");
  ASSERT_NE(p, nullptr);
  EXPECT_DOUBLE_EQ(p->rope_theta, 500000);
  EXPECT_DOUBLE_EQ(p->norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(parse_model_spec("llama2-7b", real_catalog()).value().params, 6738415616.0);
  // Every llama preset's stated count agrees with its shape (the catalog refuses otherwise).
  for (const char* name : {"llama2-7b", "llama2-13b", "llama2-70b", "llama3-8b", "llama3-70b", "llama3-405b"}) {
    auto s = parse_model_spec(name, real_catalog()).value();
    EXPECT_EQ(s.arch, "llama") << name;
    EXPECT_DOUBLE_EQ(s.params, hand_count(s.layers, s.hidden, s.heads, s.kv_heads, s.ffn_hidden, s.vocab, s.tied)) << name;
  }
  EXPECT_EQ(parse_model_spec("gpt2", real_catalog()).value().arch, "gpt");
}

TEST(Llama, ExplicitSpec) {
  auto m = parse_model_spec("arch=llama,layers=2,hidden=64,heads=4,kv_heads=2,seq=64,vocab=256,tied=no",
                            real_catalog()).value();
  EXPECT_EQ(m.ffn_hidden, 256);
  EXPECT_DOUBLE_EQ(m.params, 155968.0);
  EXPECT_FALSE(parse_model_spec("arch=llama,layers=2,hidden=64,heads=4,kv_heads=3", real_catalog()).ok());
  EXPECT_FALSE(parse_model_spec("layers=2,hidden=64,heads=4,kv_heads=2", real_catalog()).ok());  // gpt has none
  EXPECT_FALSE(parse_model_spec("arch=mamba,layers=2,hidden=64", real_catalog()).ok());
}

TEST(Llama, CatalogErrors) {
  const std::string base = "[model x]\nlayers = 2\nhidden = 64\nheads = 4\nseq = 64\nvocab = 256\n";
  EXPECT_NE(catalog_error(base + "arch = llama\nkv_head = 2\n").message.find("kv_head"), std::string::npos);  // unknown key
  EXPECT_NE(catalog_error(base + "kv_heads = 2\n").message.find("llama key"), std::string::npos);
  EXPECT_NE(catalog_error(base + "arch = llama\nkv_heads = 3\n").message.find("kv_heads"), std::string::npos);
  EXPECT_NE(catalog_error(base + "arch = rwkv\n").message.find("arch"), std::string::npos);
  EXPECT_NE(catalog_error(base + "arch = llama\ntied = maybe\n").message.find("tied"), std::string::npos);
  Error e = catalog_error(base + "arch = llama\nparams = 200K\n");
  EXPECT_NE(e.message.find("disagree"), std::string::npos) << e.message;
  EXPECT_EQ(e.line, 8);  // the params line
}

TEST(Llama, MemoryCountsTheUntiedHead) {
  auto m = parse_model_spec("llama2-7b,precision=fp32", real_catalog()).value();
  Layout one;
  const Assumptions a;
  // One GPU holds every parameter: 4 bytes each under fp32.
  EXPECT_DOUBLE_EQ(memory_per_gpu(m, one, 1, a).weights, 4 * 6738415616.0);
  // tp=2: everything split, the embedding and the head by vocabulary.
  Layout tp2;
  tp2.tp = 2;
  EXPECT_DOUBLE_EQ(memory_per_gpu(m, tp2, 1, a).weights, 4 * 6738415616.0 / 2);
  // pp=2: a stage holds half the layers and one of embed_tokens / lm_head.
  Layout pp2;
  pp2.pp = 2;
  const double emb = 32000.0 * 4096;
  EXPECT_DOUBLE_EQ(memory_per_gpu(m, pp2, 1, a).weights, 4 * ((6738415616.0 - 2 * emb) / 2 + emb));
}
