// The hang watchdog's learned limits and the straggler tracker (runner/src/health/limits.cpp and
// straggler.cpp, pure C++): one ctest entry per TEST (runner.health.*). No clocks: every time is
// given.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "health/limits.h"
#include "health/straggler.h"

using namespace scaleguard::run;

namespace {

LimitSettings settings() {
  LimitSettings s;
  s.startup_s = 300;
  s.step_floor_s = 10;
  s.ckpt_floor_s = 60;
  s.eval_floor_s = 30;
  s.k = 5;
  s.window = 100;
  s.min_samples = 5;
  return s;
}

}  // namespace

TEST(Limits, StartupLimitUntilEnoughSteps) {
  SectionLimits l(settings());
  EXPECT_EQ(l.limit(Section::kStartup), 300);
  EXPECT_EQ(l.limit(Section::kStep), 300);
  for (int i = 0; i < 4; ++i) l.record(Section::kStep, 1.0);
  EXPECT_EQ(l.limit(Section::kStep), 300);  // 4 of 5 steps known
  l.record(Section::kStep, 1.0);
  EXPECT_EQ(l.limit(Section::kStep), 10);   // max(floor 10, 5 x 1)
}

TEST(Limits, LearnedFromTheP99) {
  SectionLimits l(settings());
  // 100 steps: 98 of 2 s, then 4 s and 8 s. Nearest-rank p99 of 100 samples is the 99th: 4 s.
  for (int i = 0; i < 98; ++i) l.record(Section::kStep, 2.0);
  l.record(Section::kStep, 4.0);
  l.record(Section::kStep, 8.0);
  EXPECT_DOUBLE_EQ(l.p99(Section::kStep), 4.0);
  EXPECT_DOUBLE_EQ(l.limit(Section::kStep), 20.0);
  EXPECT_NE(l.explain(Section::kStep).find("5 x p99 4 s"), std::string::npos) << l.explain(Section::kStep);
}

TEST(Limits, WindowForgetsOldTimes) {
  SectionLimits l(settings());
  for (int i = 0; i < 100; ++i) l.record(Section::kStep, 30.0);  // a slow phase
  EXPECT_DOUBLE_EQ(l.limit(Section::kStep), 150.0);
  for (int i = 0; i < 100; ++i) l.record(Section::kStep, 0.5);   // then fast: the old ones drop out
  EXPECT_DOUBLE_EQ(l.limit(Section::kStep), 10.0);
  EXPECT_EQ(l.samples(Section::kStep), 100u);
}

TEST(Limits, SectionsHaveTheirOwnFloorsAndTimes) {
  SectionLimits l(settings());
  EXPECT_EQ(l.limit(Section::kCheckpoint), 60);  // no save yet: the floor
  EXPECT_EQ(l.limit(Section::kEval), 30);
  EXPECT_EQ(l.limit(Section::kFinish), 300);
  l.record(Section::kCheckpoint, 40.0);          // one slow save: 5 x 40
  EXPECT_DOUBLE_EQ(l.limit(Section::kCheckpoint), 200.0);
  for (int i = 0; i < 10; ++i) l.record(Section::kStep, 0.1);
  EXPECT_DOUBLE_EQ(l.limit(Section::kStep), 10.0);  // the saves do not leak into the steps
  EXPECT_STREQ(section_name(Section::kCheckpoint), "checkpoint");
}

TEST(Straggler, NamedAfterConsecutiveWindowsOnly) {
  StragglerSettings s;
  s.every = 10;
  s.threshold = 0.2;
  s.windows = 3;
  StragglerTracker t(s);
  const std::vector<std::string> nodes{"a", "a", "b", "b", "c", "c"};
  const std::vector<double> even{1, 1, 1, 1, 1, 1};
  const std::vector<double> c_slow{1, 1, 1, 1, 2, 2};   // c at half speed: 2x
  const std::vector<double> c_edge{1, 1, 1, 1, 1.2, 1.2};  // exactly 20 %: not over
  auto verdict = [](const std::vector<NodeVerdict>& v, const std::string& n) {
    for (const auto& x : v)
      if (x.node == n) return x;
    return NodeVerdict{};
  };
  EXPECT_EQ(verdict(t.observe(c_slow, nodes), "c").streak, 1);
  EXPECT_EQ(verdict(t.observe(c_slow, nodes), "c").streak, 2);
  EXPECT_EQ(verdict(t.observe(even, nodes), "c").streak, 0);   // a fast window resets the count
  EXPECT_EQ(verdict(t.observe(c_edge, nodes), "c").streak, 0);
  t.observe(c_slow, nodes);
  t.observe(c_slow, nodes);
  NodeVerdict v = verdict(t.observe(c_slow, nodes), "c");
  EXPECT_TRUE(v.named);
  EXPECT_EQ(v.streak, 3);
  EXPECT_DOUBLE_EQ(v.ratio, 2.0);
  EXPECT_FALSE(verdict(t.observe(c_slow, nodes), "c").named);  // named once
  EXPECT_EQ(t.named(), std::vector<std::string>{"c"});
  EXPECT_EQ(verdict(t.observe(c_slow, nodes), "a").streak, 0);  // the others are not slow
}

TEST(Straggler, TwoNodesAndMeansPerNode) {
  StragglerSettings s;
  s.windows = 1;
  StragglerTracker t(s);
  // Node x has one slow rank of two: its mean is 1.5x node y's.
  auto v = t.observe({1, 2, 1, 1}, {"x", "x", "y", "y"});
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].node, "x");
  EXPECT_DOUBLE_EQ(v[0].ratio, 1.5);
  EXPECT_TRUE(v[0].named);
  EXPECT_FALSE(v[1].named);
  EXPECT_TRUE(t.observe({1, 1}, {"only", "only"}).empty());  // one node: nothing to compare
}
