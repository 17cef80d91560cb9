// The next-token choice of `scaleguard-run sample` (runner/src/generate/choose.cpp, no Torch):
// greedy, temperature, top-k and top-p against hand-computed distributions, and the draws of
// a seed repeated exactly.
#include "generate/choose.h"

#include <gtest/gtest.h>

#include <cmath>

#include "config/config.h"

using scaleguard::run::Choice;
using scaleguard::run::choice_distribution;
using scaleguard::run::choose_token;

namespace {

const std::vector<float> kLogits{1.0f, 3.0f, 2.0f, 3.0f, -1.0f};

std::vector<double> softmax(const std::vector<double>& z) {
  double sum = 0;
  std::vector<double> p;
  for (double x : z) sum += std::exp(x);
  for (double x : z) p.push_back(std::exp(x) / sum);
  return p;
}

}  // namespace

TEST(Choose, GreedyTakesTheFirstLargest) {
  std::mt19937_64 rng(1);
  const auto before = rng;
  EXPECT_EQ(choose_token(kLogits, Choice{}, rng), 1);  // ids 1 and 3 tie: the lower
  EXPECT_EQ(rng, before) << "greedy must not draw";
}

TEST(Choose, TemperatureScalesTheLogits) {
  Choice c;
  c.temperature = 0.5;
  const auto p = choice_distribution(kLogits, c);
  const auto want = softmax({2, 6, 4, 6, -2});
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(p[i], want[i], 1e-12) << i;
}

TEST(Choose, TopKKeepsTiesAtTheKth) {
  Choice c;
  c.temperature = 1;
  c.top_k = 1;  // the k-th largest is 3, held by ids 1 and 3: both stay (Hugging Face's rule)
  auto p = choice_distribution(kLogits, c);
  EXPECT_DOUBLE_EQ(p[1], 0.5);
  EXPECT_DOUBLE_EQ(p[3], 0.5);
  EXPECT_EQ(p[0] + p[2] + p[4], 0);
  c.top_k = 3;
  p = choice_distribution(kLogits, c);
  const auto want = softmax({3, 2, 3});
  EXPECT_NEAR(p[1], want[0], 1e-12);
  EXPECT_NEAR(p[2], want[1], 1e-12);
  EXPECT_EQ(p[0], 0);
  EXPECT_EQ(p[4], 0);
}

TEST(Choose, TopPKeepsTheSmallestSetReachingP) {
  Choice c;
  c.temperature = 1;
  const auto full = softmax({1, 3, 2, 3, -1});  // ids 1, 3: 0.33 each; id 2: 0.12
  c.top_p = 0.5;  // id 1 alone is 0.33 < 0.5: id 3 joins (the stable order keeps 1 before 3)
  auto p = choice_distribution(kLogits, c);
  EXPECT_DOUBLE_EQ(p[1], 0.5);
  EXPECT_DOUBLE_EQ(p[3], 0.5);
  c.top_p = full[1] + full[3] + 1e-9;  // just over two: the third (id 2) is needed too
  p = choice_distribution(kLogits, c);
  EXPECT_GT(p[2], 0);
  EXPECT_EQ(p[0], 0);
  EXPECT_EQ(p[4], 0);
  EXPECT_NEAR(p[1] + p[2] + p[3], 1, 1e-12);
}

TEST(Choose, ASeedRepeatsItsDraws) {
  Choice c;
  c.temperature = 1;
  std::mt19937_64 a(42), b(42), other(43);
  std::vector<int64_t> x, y, z;
  for (int i = 0; i < 64; ++i) {
    x.push_back(choose_token(kLogits, c, a));
    y.push_back(choose_token(kLogits, c, b));
    z.push_back(choose_token(kLogits, c, other));
  }
  EXPECT_EQ(x, y);
  EXPECT_NE(x, z);
  for (int64_t id : x) EXPECT_LT(id, 5) << "out of range";
}

TEST(Choose, DrawsFollowTheDistribution) {
  Choice c;
  c.temperature = 1;
  c.top_k = 3;
  std::mt19937_64 rng(7);
  std::vector<int> count(kLogits.size());
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++count[static_cast<size_t>(choose_token(kLogits, c, rng))];
  const auto p = choice_distribution(kLogits, c);
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(count[i] / static_cast<double>(n), p[i], 0.02) << i;
}

TEST(Choose, BadSettingsAndLogits) {
  Choice c;
  c.top_p = 0;
  EXPECT_NE(scaleguard::run::check_choice(c), "");
  c = Choice{};
  c.temperature = -1;
  EXPECT_NE(scaleguard::run::check_choice(c), "");
  std::mt19937_64 rng(1);
  EXPECT_THROW(choose_token({1.0f, NAN}, Choice{}, rng), scaleguard::run::RunError);
}
