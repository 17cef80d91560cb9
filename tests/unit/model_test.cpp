// Model specs: counts (derived shape), presets, explicit shapes, options, bad input.
#include <gtest/gtest.h>

#include "scaleguard/model.h"
#include "test_support.h"

using namespace scaleguard;
using scaleguard::test::real_catalog;

TEST(ModelSpec, GptParamFormula) {
  // 12*L*h^2 + 13*L*h + (vocab + seq)*h for GPT-2 small: 12*12*768^2 + 13*12*768 + (50257+1024)*768.
  EXPECT_DOUBLE_EQ(gpt_params(12, 768, 1024, 50257), 84934656.0 + 119808.0 + 39383808.0);
}

TEST(ModelSpec, CountDerivesAGptShape) {
  auto m = parse_model_spec("350M", real_catalog()).value();
  EXPECT_DOUBLE_EQ(m.params, 350e6);
  // ratio = 32*(3.5)^(1/6) = 39.3; h = cbrt(350e6*39.3/12) = 1047 -> 1024 (multiple of 64);
  // layers = (350e6 - (51200+2048)*1024) / (12*1024^2) = 23.48 -> 23; heads = 1024/64.
  EXPECT_EQ(m.hidden, 1024);
  EXPECT_EQ(m.layers, 23);
  EXPECT_EQ(m.heads, 16);
  EXPECT_EQ(m.seq, 2048);
  EXPECT_EQ(m.vocab, 51200);
  // GPT-3 175B is 96 x 12288; the rule lands close: hidden 11776, 105 layers.
  auto big = parse_model_spec("175B", real_catalog()).value();
  EXPECT_EQ(big.hidden, 11776);
  EXPECT_EQ(big.heads, 92);
  EXPECT_NEAR(big.layers, 105, 1);
  // The derived shape's own parameter count is within 5% of the asked one.
  for (const char* spec : {"125M", "350M", "1.3B", "7B", "13B", "70B", "175B", "1T"}) {
    auto s = parse_model_spec(spec, real_catalog()).value();
    EXPECT_NEAR(gpt_params(s.layers, s.hidden, s.seq, s.vocab) / s.params, 1.0, 0.05) << spec;
    EXPECT_EQ(s.hidden % s.heads, 0) << spec;
  }
}

TEST(ModelSpec, PresetsFromTheCatalog) {
  auto m = parse_model_spec("llama2-7b", real_catalog()).value();
  EXPECT_DOUBLE_EQ(m.params, 6738415616.0);  // llama: the exact count of the shape (catalog says 6.74B)
  EXPECT_EQ(m.layers, 32);
  EXPECT_EQ(m.hidden, 4096);
  EXPECT_EQ(m.seq, 4096);
  for (const char* name : {"gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "bert-base", "bert-large", "llama2-13b",
                           "llama2-70b", "llama3-8b", "llama3-70b", "llama3-405b", "gpt3-175b"})
    EXPECT_TRUE(parse_model_spec(name, real_catalog()).ok()) << name;
  EXPECT_TRUE(parse_model_spec("LLaMA2-7B", real_catalog()).ok());  // case-insensitive
}

TEST(ModelSpec, ExplicitShapeAndOptions) {
  auto m = parse_model_spec("layers=48,hidden=8192,heads=64,seq=2048,vocab=51200", real_catalog()).value();
  EXPECT_EQ(m.layers, 48);
  EXPECT_EQ(m.heads, 64);
  EXPECT_DOUBLE_EQ(m.params, gpt_params(48, 8192, 2048, 51200));
  auto o = parse_model_spec("1B,optimizer=sgd,precision=fp32,recompute=full,seq=1024", real_catalog()).value();
  EXPECT_EQ(o.optimizer, Optimizer::sgd);
  EXPECT_EQ(o.precision, Precision::fp32);
  ASSERT_TRUE(o.recompute.has_value());
  EXPECT_EQ(*o.recompute, Recompute::full);
  EXPECT_EQ(o.seq, 1024);
  EXPECT_DOUBLE_EQ(o.params, 1e9);
  EXPECT_FALSE(o.flash_attention);
  EXPECT_TRUE(parse_model_spec("llama2-7b,attention=flash", real_catalog()).value().flash_attention);
  EXPECT_FALSE(parse_model_spec("llama2-7b,attention=standard", real_catalog()).value().flash_attention);
  auto d = parse_model_spec("layers=2,hidden=1024", real_catalog()).value();
  EXPECT_EQ(d.heads, 16);  // hidden/64 below 2048
  EXPECT_EQ(d.vocab, 51200);
}

TEST(ModelSpec, BadSpecsAreClearErrors) {
  const Catalog& cat = real_catalog();
  for (const char* bad : {"", "1e30", "0", "-7B", "1e300", "10", "lama2-7b", "350M,layers", "350M,foo=1",
                          "layers=0,hidden=1024", "layers=48", "layers=2,hidden=1000,heads=3", "layers=2,hidden=1024,heads=0",
                          "layers=2000,hidden=1024", "350M,precision=fp8", "350M,optimizer=lion", "350M,recompute=some",
                          "350M,attention=fast", "350M,attention=",
                          "gpt2,llama2-7b", "350M,seq=-1", "7B;rm -rf /"}) {
    auto r = parse_model_spec(bad, cat);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_FALSE(r.error().hint.empty()) << bad;
    }
  }
  EXPECT_NE(parse_model_spec("1e30", cat).error().message.find("absurd"), std::string::npos);
  EXPECT_NE(parse_model_spec("1e15", cat).error().message.find("out of range"), std::string::npos);
  // A near-miss preset name gets a suggestion.
  EXPECT_NE(parse_model_spec("lama2-7b", cat).error().hint.find("llama2-7b"), std::string::npos);
  EXPECT_FALSE(parse_model_spec(std::string(300, 'a'), cat).ok());
  EXPECT_FALSE(parse_model_spec("7B\nx", cat).ok());
  EXPECT_TRUE(validate_model_spec("llama2-7b", cat).ok());
  EXPECT_FALSE(validate_model_spec("7Q", cat).ok());
}
