// The checkpoint cadence (scaleguard/ckpt_cadence.h) on a simulated clock: which steps commit
// a checkpoint for given step times, save costs and MTBF, sync and async. run() below walks
// the steps the way Checkpointing::after_step (runner/src/checkpoint/checkpointing.cpp) does: the step's
// time to the SaveCostMeter, poll the save in flight, ask the clock, save (sync: the training
// thread waits for the whole save; async: it pays a hand-over stall, and every step that runs
// beside the write takes `contention` longer). The expected steps are worked out by hand in
// the comments.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "scaleguard/ckpt_cadence.h"
#include "scaleguard/plan.h"

namespace ck = scaleguard::ckpt;

namespace {

struct Sim {
  ck::IntervalSpec spec{ck::IntervalSpec::Kind::automatic, 0, 0};
  int steps = 20;
  double step_s = 1;        // a step's time with no save in flight
  bool async = false;
  double save_s = 10;       // sync: the save; async: the background write, hand-over to commit
  double stall_s = 0;       // async: the hand-over
  double contention_s = 0;  // async: extra time of each step that runs beside the write
  double mtbf_h = 1;        // the job's MTBF
};

struct Outcome {
  std::vector<int64_t> commits;        // the steps whose checkpoint committed
  std::vector<ck::IntervalChoice> choices;  // after each commit (auto)
  std::vector<ck::SaveCost> costs;
  std::vector<double> starts;          // when each save started
};

Outcome run(const Sim& s) {
  Outcome o;
  double t = 0;
  ck::IntervalClock clock(s.spec, s.mtbf_h, t);
  ck::SaveCostMeter meter;
  bool in_flight = false;
  int64_t flight_step = 0;
  double write_end = 0;
  auto commit = [&](double cost) {
    clock.committed(t, cost);
    o.commits.push_back(flight_step);
    o.choices.push_back(clock.choice());
    in_flight = false;
  };
  for (int64_t step = 1; step <= s.steps; ++step) {
    const double took = s.step_s + (in_flight ? s.contention_s : 0);
    t += took;
    if (step > 1) meter.step(took, in_flight);  // the runner times a step from the previous one's end
    if (in_flight && t >= write_end) {
      o.costs.push_back(meter.take());
      commit(o.costs.back().total());
    }
    const bool last = step == s.steps;
    if (!clock.due(step, t) && !last) continue;
    if (in_flight) {  // finish(): the training thread waits for the write
      meter.stall(write_end - t);
      t = write_end;
      o.costs.push_back(meter.take());
      commit(o.costs.back().total());
    }
    o.starts.push_back(t);
    clock.started(t);
    flight_step = step;
    if (!s.async || last) {  // the last save is synchronous
      t += s.save_s;
      o.costs.push_back(ck::SaveCost{s.save_s, 0, 0, false});
      commit(s.save_s);
      continue;
    }
    t += s.stall_s;
    meter.stall(s.stall_s);
    write_end = t + s.save_s;
    in_flight = true;
  }
  return o;
}

using Steps = std::vector<int64_t>;

}  // namespace

// The defaults of a short run of the small model: steps of 50 ms, a save of 5 ms, a node MTBF
// of 6300 h (the catalog's): Daly's interval is sqrt(2 * 0.005 * 22.68e6) = 476 s, so a
// 20-step run saves at step 1 (to measure) and at the end. Main before this change committed
// every step on the async path (the measured cost never reached the clock, interval 0).
TEST(Cadence, DefaultsCommitTwiceInAShortRunSyncAndAsync) {
  Sim sync;
  sync.step_s = 0.05;
  sync.save_s = 0.005;
  sync.mtbf_h = 6300;
  EXPECT_EQ(run(sync).commits, (Steps{1, 20}));
  Sim async = sync;
  async.async = true;
  async.save_s = 0.02;
  async.stall_s = 0.001;
  async.contention_s = 0.002;
  const Outcome o = run(async);
  EXPECT_EQ(o.commits, (Steps{1, 20}));
  EXPECT_GT(o.choices.front().interval, 100);  // Daly(1 ms, 6300 h) = 213 s
}

// Sync, steps of 1 s, a 10 s save, job MTBF 1 h: Daly(10 s, 3600 s) = 268.33 * (1 + 0.012423
// + 0.000154) - 10 = 261.70 s of training between saves, 271.70 s start to start. Save 1 at
// step 1 (t = 1, ends at 11); step k ends at 11 + (k - 1) >= 1 + 271.70 first at k = 263; its
// save ends at 283, and so on every 262 steps: 1, 263, 525, 787, and the end.
TEST(Cadence, SyncDalyFromTheSaveTime) {
  Sim s;
  s.steps = 1000;
  const Outcome o = run(s);
  EXPECT_EQ(o.commits, (Steps{1, 263, 525, 787, 1000}));
  EXPECT_NEAR(o.choices.front().daly, 261.703, 1e-3);
  EXPECT_NEAR(o.choices.front().interval, 271.703, 1e-3);
  EXPECT_FALSE(o.choices.front().floored);
  EXPECT_DOUBLE_EQ(o.choices.front().daly, scaleguard::daly_interval(10, 3600));  // the planner's formula
}

// Async, steps of 1 s, a 30 s write, a 0.5 s hand-over stall, 0.25 s more per step beside the
// write, job MTBF 1 h. Save 1 at step 1 (t = 1.5 after the stall, write ends at 31.5); steps
// 2..25 take 1.25 s, the poll after step 25 (t = 31.5) commits it. No step ran without a save
// yet, so the baseline is the fastest overlapped step: contention 0, cost 0.5 s, Daly(0.5 s,
// 1 h) = 59.67 s, 60.17 s start to start: step k ends at 31.5 + (k - 25) >= 61.17 first at
// k = 55. Save 2 overlaps 24 steps again, now against the 1 s baseline of steps 26..55:
// contention 24 x 0.25 = 6 s, cost 6.5 s, Daly(6.5 s, 1 h) = 212.0 s, 218.5 s start to start
// (from t = 61.5): step k ends at 92 + (k - 79) >= 280.0 first at k = 268.
TEST(Cadence, AsyncDalyFromStallPlusContention) {
  Sim s;
  s.steps = 300;
  s.async = true;
  s.save_s = 30;
  s.stall_s = 0.5;
  s.contention_s = 0.25;
  const Outcome o = run(s);
  EXPECT_EQ(o.commits, (Steps{1, 55, 268, 300}));
  ASSERT_GE(o.costs.size(), 2u);
  EXPECT_DOUBLE_EQ(o.costs[0].stall, 0.5);
  EXPECT_DOUBLE_EQ(o.costs[0].contention, 0);
  EXPECT_EQ(o.costs[0].overlapped_steps, 24);
  EXPECT_DOUBLE_EQ(o.costs[1].stall, 0.5);
  EXPECT_NEAR(o.costs[1].contention, 6, 1e-9);
  EXPECT_NEAR(o.choices[1].daly, scaleguard::daly_interval(6.5, 3600), 1e-9);
  EXPECT_NEAR(o.choices[1].interval, o.choices[1].daly + 6.5, 1e-9);
}

// A cost that is high against the MTBF: Daly's interval is shorter than one save takes (a
// 30 s write, job MTBF 36 s: Daly(0.125 s, 36 s) = 2.9 s). Saves then follow each other but
// never overlap and never stall the training thread: each starts at the step whose poll saw
// the previous one commit, and the interval is the save's start to commit (30.125 s).
TEST(Cadence, NeverMoreOftenThanOneSaveTakes) {
  Sim s;
  s.steps = 200;
  s.async = true;
  s.save_s = 30;
  s.stall_s = 0.125;
  s.mtbf_h = 0.01;
  const Outcome o = run(s);
  ASSERT_GE(o.choices.size(), 3u);
  EXPECT_TRUE(o.choices.front().floored);
  EXPECT_NEAR(o.choices.front().interval, 30.125, 1e-9);  // the stall + the write
  for (size_t i = 1; i + 1 < o.starts.size(); ++i) EXPECT_GE(o.starts[i] - o.starts[i - 1], 30.125 - 1e-9);
  // No save waits for another (only the end of the run waits for the last one in flight).
  for (size_t i = 0; i + 2 < o.costs.size(); ++i) EXPECT_EQ(o.costs[i].stall, 0.125);
  // 1, then every 30 steps (the write covers 30 steps); the last one at the end.
  EXPECT_EQ(o.commits, (Steps{1, 31, 61, 91, 121, 151, 181, 200}));
}

// The MTBF moves the interval as Daly says: a quarter of the MTBF, about half the saves.
TEST(Cadence, ShorterMtbfSavesMoreOften) {
  Sim s;
  s.steps = 5000;
  s.mtbf_h = 4;
  const size_t at4 = run(s).commits.size();
  s.mtbf_h = 1;
  const size_t at1 = run(s).commits.size();
  EXPECT_EQ(at4, 11u);  // Daly(10 s, 4 h) = 530.0 s: every 531 steps
  EXPECT_EQ(at1, 21u);  // every 262 steps
}

// A fixed number of steps is obeyed to the step, sync and async, even when the write takes
// longer than the interval (the save at step 10 waits for step 5's to commit).
TEST(Cadence, FixedStepsObeyedToTheStep) {
  for (bool async : {false, true}) {
    Sim s;
    s.spec = ck::parse_interval("5").value();
    s.async = async;
    s.save_s = 30;
    s.stall_s = 0.1;
    EXPECT_EQ(run(s).commits, (Steps{5, 10, 15, 20})) << (async ? "async" : "sync");
  }
}

// A fixed time: from one save's start to the next one's. Sync, steps of 1 s, saves of 10 s,
// every 2 minutes: step 120 (t = 120), then t = 130 + (k - 120) >= 240 at k = 230, ...
TEST(Cadence, FixedMinutesFromStartToStart) {
  Sim s;
  s.spec = ck::parse_interval("2min").value();
  s.steps = 500;
  EXPECT_EQ(run(s).commits, (Steps{120, 230, 340, 450, 500}));
}

TEST(Cadence, AutoIsDueFirstAndNeverWhileASaveIsInFlight) {
  ck::IntervalClock c({ck::IntervalSpec::Kind::automatic, 0, 0}, 24, 0);
  EXPECT_TRUE(c.due(1, 0));
  EXPECT_EQ(c.interval_seconds(), 0);
  c.started(0);
  EXPECT_FALSE(c.due(2, 1e9));  // the first save has not committed yet
  c.committed(100, 60);         // 60 s cost, 100 s start to commit
  EXPECT_NEAR(c.interval_seconds(), scaleguard::daly_interval(60, 86400) + 60, 1e-9);
  EXPECT_FALSE(c.due(3, 3000));
  EXPECT_TRUE(c.due(4, 3241));
  // The sync form the fault tool uses: a 60 s save that ended at 100 started at 40.
  ck::IntervalClock s({ck::IntervalSpec::Kind::automatic, 0, 0}, 24, 0);
  s.saved(100, 60);
  EXPECT_FALSE(s.due(2, 100 + 3000));
  EXPECT_TRUE(s.due(3, 100 + 3181));
}

TEST(Cadence, ContentionAgainstTheMedianOfStepsWithoutASave) {
  ck::SaveCostMeter m;
  for (double s : {1.0, 1.2, 0.9, 5.0, 1.1}) m.step(s, false);  // median 1.1 (the 5 s outlier ignored)
  EXPECT_DOUBLE_EQ(m.baseline_step(), 1.1);
  m.stall(0.3);
  for (double s : {1.5, 1.0, 1.3}) m.step(s, true);
  const ck::SaveCost c = m.take();
  EXPECT_NEAR(c.contention, 0.4 + 0 + 0.2, 1e-12);
  EXPECT_DOUBLE_EQ(c.stall, 0.3);
  EXPECT_EQ(c.overlapped_steps, 3);
  EXPECT_NEAR(c.total(), 0.9, 1e-12);
  EXPECT_EQ(m.take().total(), 0);  // the next save starts from nothing
}

// The log line says the interval chosen and why.
TEST(Cadence, ExplainsTheInterval) {
  ck::IntervalClock c({ck::IntervalSpec::Kind::automatic, 0, 0}, 6300, 0);
  c.started(0);
  c.committed(0.02, 0.001);
  const std::string line = c.explain(ck::SaveCost{0.0008, 0.0002, 3, true}, 0.05);
  EXPECT_NE(line.find("interval auto: next save 213 s after this one started (~4259 steps of 50 ms)"),
            std::string::npos) << line;
  EXPECT_NE(line.find("Daly(cost 1 ms, job MTBF 6300 h) = 213 s of training + the cost"), std::string::npos) << line;
  EXPECT_NE(line.find("cost = stall 0.8 ms + I/O contention 0.2 ms over 3 steps (async)"), std::string::npos) << line;
  ck::IntervalClock f({ck::IntervalSpec::Kind::automatic, 0, 0}, 0.01, 0);
  f.started(0);
  f.committed(30, 0.125);
  const std::string floored = f.explain(ck::SaveCost{0.125, 0, 10, true}, 1);
  EXPECT_NE(floored.find("next save 30 s after this one started (~30 steps of 1 s): one save takes 30 s from start "
                         "to commit, more than Daly(cost 125 ms, job MTBF 0.01 h) = 2.917 s + cost, and saves never "
                         "overlap"),
            std::string::npos) << floored;
  ck::IntervalClock s({ck::IntervalSpec::Kind::automatic, 0, 0}, 1, 0);
  s.saved(10, 10);
  const std::string sync = s.explain(ck::SaveCost{10, 0, 0, false}, 0);
  EXPECT_NE(sync.find("next save 271.7 s after this one started: Daly(cost 10 s, job MTBF 1 h) = 261.7 s of training "
                      "+ the cost; cost = the save (sync)"),
            std::string::npos) << sync;
}
