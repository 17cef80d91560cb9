// The learning-rate schedules (runner/src/train/lr_schedule.cpp, pure) against their closed forms,
// written out here independently: one ctest entry per TEST (runner.lr_schedule.*).
#include <gtest/gtest.h>

#include <cmath>

#include "train/lr_schedule.h"

using scaleguard::run::Config;
using scaleguard::run::lr_at;
using scaleguard::run::lr_schedule;

namespace {

Config base(const char* kind) {
  Config c;
  c.lr_schedule = kind;
  c.lr = 6e-4;
  c.min_lr_ratio = 0.1;
  c.warmup = 10;
  c.steps = 100;
  return c;
}

constexpr double kLr = 6e-4, kMin = kLr * 0.1;  // the floor: lr x min-lr-ratio

// The warm-up is the same for every kind: lr (s + 1) / W.
void expect_warmup(const Config& c) {
  for (int s : {0, 1, 4, 9}) EXPECT_DOUBLE_EQ(lr_at(c, s), kLr * (s + 1) / 10.0) << c.lr_schedule << " step " << s;
}

TEST(LrSchedule, Constant) {
  Config c = base("constant");
  expect_warmup(c);
  for (int s : {10, 50, 99, 100, 5000}) EXPECT_DOUBLE_EQ(lr_at(c, s), kLr) << s;
}

TEST(LrSchedule, Linear) {
  Config c = base("linear");
  expect_warmup(c);
  // p = (s - 10) / 89: 1.0 at the last step 99.
  for (int s : {10, 30, 54, 99}) EXPECT_DOUBLE_EQ(lr_at(c, s), kMin + (kLr - kMin) * (1 - (s - 10) / 89.0)) << s;
  EXPECT_DOUBLE_EQ(lr_at(c, 10), kLr);
  EXPECT_EQ(lr_at(c, 99), kMin);
  EXPECT_EQ(lr_at(c, 250), kMin);  // past the horizon: the floor  // past the horizon: the floor
}

TEST(LrSchedule, CosineIsTodaysDefault) {
  Config c;  // nothing given: cosine to lr x min-lr-ratio at --steps, warm-up --warmup
  EXPECT_EQ(c.lr_schedule, "cosine");
  const double lr = c.lr, mn = c.lr * c.min_lr_ratio;
  const int64_t W = c.warmup, S = c.steps;
  for (int64_t s : {W, W + 7, S / 2, S - 2, S - 1}) {
    const double p = static_cast<double>(s - W) / static_cast<double>(S - W - 1);
    EXPECT_DOUBLE_EQ(lr_at(c, s), mn + 0.5 * (lr - mn) * (1 + std::cos(M_PI * p))) << s;
  }
  EXPECT_DOUBLE_EQ(lr_at(c, W), lr);
}

TEST(LrSchedule, Cosine) {
  Config c = base("cosine");
  expect_warmup(c);
  for (int s : {10, 20, 54, 77, 99}) {
    const double p = (s - 10) / 89.0;
    EXPECT_DOUBLE_EQ(lr_at(c, s), kMin + 0.5 * (kLr - kMin) * (1 + std::cos(M_PI * p))) << s;
  }
  EXPECT_EQ(lr_at(c, 99), kMin);
  EXPECT_EQ(lr_at(c, 101), kMin);
  c.steps = 101;  // p = 45/90 at step 55: halfway
  EXPECT_DOUBLE_EQ(lr_at(c, 55), 0.5 * (kLr + kMin));
}

TEST(LrSchedule, Wsd) {
  Config c = base("wsd");
  c.lr_wsd_decay_fraction = 0.2;  // D = 20: steps 80..99 decay, 10..79 stable
  expect_warmup(c);
  EXPECT_EQ(lr_schedule(c).decay, 20);
  for (int s : {10, 40, 79}) EXPECT_DOUBLE_EQ(lr_at(c, s), kLr) << s;
  for (int s : {80, 85, 90, 99}) EXPECT_DOUBLE_EQ(lr_at(c, s), kMin + (kLr - kMin) * (1 - (s - 80 + 1) / 20.0)) << s;
  EXPECT_EQ(lr_at(c, 99), kMin);
  EXPECT_EQ(lr_at(c, 1000), kMin);
}

TEST(LrSchedule, HorizonIndependentOfSteps) {
  // --lr-decay-steps 100: the same rates whether the run is 40, 100 or 300 steps long.
  for (const char* kind : {"linear", "cosine", "wsd"}) {
    Config ref = base(kind);
    for (int64_t steps : {40, 300}) {
      Config c = base(kind);
      c.steps = steps;
      c.lr_decay_steps = 100;
      for (int s = 0; s < 300; s += 7) EXPECT_EQ(lr_at(c, s), lr_at(ref, s)) << kind << " steps " << steps << " step " << s;
    }
  }
}

TEST(LrSchedule, HorizonInTokens) {
  // 32 x 64 = 2048 tokens per step: 204800 tokens = 100 steps; 204801 rounds up to 101.
  Config c = base("cosine");
  c.steps = 7;
  c.global_batch = 32;
  c.seq_len = 64;
  c.lr_decay_tokens = "204800";
  EXPECT_EQ(lr_schedule(c).horizon, 100);
  for (int s : {0, 10, 33, 99}) EXPECT_EQ(lr_at(c, s), lr_at(base("cosine"), s)) << s;
  c.lr_decay_tokens = "204801";
  EXPECT_EQ(lr_schedule(c).horizon, 101);
  c.lr_decay_tokens = "1.6M";  // a count as --eval-tokens takes it: 781.25 -> 782 steps
  EXPECT_EQ(lr_schedule(c).horizon, 782);
}

TEST(LrSchedule, Degenerate) {
  Config c = base("cosine");
  c.warmup = 0;
  c.steps = 1;  // one step: the floor at once, as before
  EXPECT_DOUBLE_EQ(lr_at(c, 0), kMin);
  c.lr_schedule = "wsd";
  c.steps = 3;
  c.lr_wsd_decay_fraction = 0.01;  // rounds to 0 steps: at least the last one decays
  EXPECT_EQ(lr_schedule(c).decay, 1);
  EXPECT_DOUBLE_EQ(lr_at(c, 1), kLr);
  EXPECT_DOUBLE_EQ(lr_at(c, 2), kMin);
  c.warmup = 10;  // warm-up longer than the horizon: warm-up, then the floor
  EXPECT_DOUBLE_EQ(lr_at(c, 9), kLr);
  EXPECT_DOUBLE_EQ(lr_at(c, 10), kMin);
}

}  // namespace
