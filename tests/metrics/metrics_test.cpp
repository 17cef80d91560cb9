// metrics/: the exposition text, what job_submit counts per decision, the atomic textfile
// writer, and the whole set of families through `promtool check metrics` (Prometheus' own
// linter: names, units, _total, HELP/TYPE, duplicate series).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "metrics_sample.h"
#include "scaleguard/metrics.h"
#include "scaleguard/metrics_budgets.h"
#include "scaleguard/metrics_decisions.h"

using namespace scaleguard;
using namespace scaleguard::metrics;

namespace {

std::string temp_dir() {
  char tmpl[] = "/tmp/sg-metrics-test-XXXXXX";
  if (!mkdtemp(tmpl)) std::abort();
  chmod(tmpl, 0755);
  return tmpl;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool has_line(const std::string& text, const std::string& line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

}  // namespace

TEST(Metrics, LabelValuesAreEscapedAndValuesReadable) {
  Text t;
  t.family("scaleguard_x", "gauge", "help with \\ and\nnewline");
  t.sample("scaleguard_x", {{"a", "q\"uote\\back\nline"}}, 0.25);
  t.sample("scaleguard_x", {{"a", "inf"}}, 1.0 / 0.0);
  EXPECT_TRUE(has_line(t.str(), "# HELP scaleguard_x help with \\\\ and\\nnewline")) << t.str();
  EXPECT_TRUE(has_line(t.str(), "scaleguard_x{a=\"q\\\"uote\\\\back\\nline\"} 0.25")) << t.str();
  EXPECT_TRUE(has_line(t.str(), "scaleguard_x{a=\"inf\"} +Inf")) << t.str();
  EXPECT_EQ(format_value(3600), "3600");
  EXPECT_EQ(format_value(1e-5), "1e-05");
}

TEST(Metrics, DecisionsRulesAndAvoidedGpuSeconds) {
  DecisionMetrics m;
  Decision refused;
  refused.action = Action::reject;
  refused.governed = true;
  refused.envelope.gpus = 8, refused.envelope.time_limit_min = 60;   // 8 GPU-hours judged
  refused.rules.push_back({"distributed_min_gpu_hours", Action::reject, "..."});
  refused.rules.push_back({"input", Action::warn, "..."});
  Decision cut = refused;
  cut.action = Action::rewrite;
  cut.rules = {{"max_gpus", Action::rewrite, "..."}};
  cut.granted_gpu_hours = 2;   // asked 8, granted 2
  m.count(refused, "gpu-od", Event::submit);
  m.count(refused, "gpu-od", Event::submit);
  m.count(cut, "gpu-spot", Event::update);
  Text t;
  m.render(t);
  const std::string& s = t.str();
  EXPECT_TRUE(has_line(s, "scaleguard_decisions_total{partition=\"gpu-od\",event=\"submit\",outcome=\"reject\",mode=\"enforce\"} 2")) << s;
  EXPECT_TRUE(has_line(s, "scaleguard_avoided_gpu_seconds_total{partition=\"gpu-od\",event=\"submit\",outcome=\"reject\",mode=\"enforce\"} 57600")) << s;
  EXPECT_TRUE(has_line(s, "scaleguard_granted_gpu_seconds_total{partition=\"gpu-spot\",event=\"update\",outcome=\"rewrite\",mode=\"enforce\"} 7200")) << s;
  EXPECT_TRUE(has_line(s, "scaleguard_avoided_gpu_seconds_total{partition=\"gpu-spot\",event=\"update\",outcome=\"rewrite\",mode=\"enforce\"} 21600")) << s;
  EXPECT_TRUE(has_line(s, "scaleguard_rule_hits_total{partition=\"gpu-od\",rule=\"distributed_min_gpu_hours\",event=\"submit\",outcome=\"reject\",mode=\"enforce\"} 2")) << s;
  EXPECT_TRUE(has_line(s, "scaleguard_rule_hits_total{partition=\"gpu-od\",rule=\"input\",event=\"submit\",outcome=\"warn\",mode=\"enforce\"} 2")) << s;
}

TEST(Metrics, LatencyHistogramIsCumulative) {
  DecisionMetrics m;
  m.observe_ns(Event::submit, 3000);      // <= 5 us
  m.observe_ns(Event::submit, 40000);     // <= 50 us
  m.observe_ns(Event::submit, 5000000000ull);   // +Inf only
  Text t;
  m.render(t);
  const std::string& s = t.str();
  EXPECT_TRUE(has_line(s, "scaleguard_decision_duration_seconds_bucket{event=\"submit\",le=\"5e-06\"} 1")) << s;
  EXPECT_TRUE(has_line(s, "scaleguard_decision_duration_seconds_bucket{event=\"submit\",le=\"5e-05\"} 2")) << s;
  EXPECT_TRUE(has_line(s, "scaleguard_decision_duration_seconds_bucket{event=\"submit\",le=\"1\"} 2")) << s;
  EXPECT_TRUE(has_line(s, "scaleguard_decision_duration_seconds_bucket{event=\"submit\",le=\"+Inf\"} 3")) << s;
  EXPECT_TRUE(has_line(s, "scaleguard_decision_duration_seconds_count{event=\"submit\"} 3")) << s;
  EXPECT_TRUE(has_line(s, "scaleguard_decision_duration_seconds_sum{event=\"submit\"} 5.000043")) << s;
}

// The latency clock after calibration (the TSC where Linux keeps time with it) agrees with
// CLOCK_MONOTONIC: a scale or base off by a factor would file every decision in a wrong bucket.
TEST(Metrics, CalibratedClockFollowsClockMonotonic) {
  auto mono = [] {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000.0 + ts.tv_nsec;
  };
  calibrate_clock();
  const double m0 = mono(), c0 = static_cast<double>(monotonic_ns());
  const timespec pause{0, 100000000};   // 100 ms
  nanosleep(&pause, nullptr);
  const double m1 = mono(), c1 = static_cast<double>(monotonic_ns());
  EXPECT_NEAR(c0, m0, 2e6);                       // the same time base (within 2 ms)
  EXPECT_NEAR((c1 - c0) / (m1 - m0), 1.0, 0.02);  // the same rate
}

// slurmctld judges in several threads while the metrics thread renders: the spin lock must lose
// no count (4 threads x 20,000 decisions and observations, a render running alongside).
TEST(Metrics, ConcurrentCountingSumsExactly) {
  DecisionMetrics m;
  Decision d;
  d.action = Action::reject;
  d.envelope.gpus = 1, d.envelope.time_limit_min = 60;   // 3600 GPU-seconds each
  d.rules.push_back({"distributed_min_gpu_hours", Action::reject, ""});
  constexpr int kThreads = 4, kEach = 20000;
  std::atomic<bool> done{false};
  std::thread renderer([&] {
    while (!done.load()) {
      Text t;
      m.render(t);
    }
  });
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&m, &d, i] {
      const std::string partition = i % 2 ? "gpu-od" : "gpu-spot";
      for (int k = 0; k < kEach; ++k) {
        m.count(d, partition, Event::submit);
        m.observe_ns(Event::submit, 700);
      }
    });
  for (auto& t : threads) t.join();
  done = true;
  renderer.join();
  Text t;
  m.render(t);
  const std::string& s = t.str();
  const std::string half = std::to_string(kThreads / 2 * kEach);
  for (const char* p : {"gpu-od", "gpu-spot"}) {
    const std::string l = std::string("{partition=\"") + p + "\",";
    EXPECT_TRUE(has_line(s, "scaleguard_decisions_total" + l + "event=\"submit\",outcome=\"reject\",mode=\"enforce\"} " + half)) << s;
    EXPECT_TRUE(has_line(s, "scaleguard_asked_gpu_seconds_total" + l + "event=\"submit\",outcome=\"reject\",mode=\"enforce\"} 1.44e+08"))
        << s;
    EXPECT_TRUE(has_line(s, "scaleguard_rule_hits_total" + l +
                                "rule=\"distributed_min_gpu_hours\",event=\"submit\",outcome=\"reject\",mode=\"enforce\"} " + half))
        << s;
  }
  EXPECT_TRUE(has_line(s, "scaleguard_decision_duration_seconds_count{event=\"submit\"} " + std::to_string(kThreads * kEach))) << s;
  EXPECT_TRUE(has_line(s, "scaleguard_decision_duration_seconds_bucket{event=\"submit\",le=\"5e-06\"} " + std::to_string(kThreads * kEach))) << s;
}

TEST(Metrics, LabelSetsAreBounded) {
  DecisionMetrics m;
  Decision d;
  d.rules.push_back({"r", Action::accept, ""});
  for (std::size_t i = 0; i < DecisionMetrics::kMaxSeries * 2; ++i) m.count(d, "p" + std::to_string(i), Event::submit);
  Text t;
  m.render(t);
  std::size_t series = 0, at = 0;
  while ((at = t.str().find("\nscaleguard_decisions_total{", at + 1)) != std::string::npos) ++series;
  EXPECT_LE(series, DecisionMetrics::kMaxSeries);
  EXPECT_NE(t.str().find("scaleguard_decisions_total{partition=\"overflow\",event=\"submit\",outcome=\"accept\",mode=\"enforce\"}"),
            std::string::npos);
}

TEST(Metrics, PartitionLabelsComeFromThePolicy) {
  auto policy = load_policy(std::string(SCALEGUARD_SOURCE_DIR) + "/configs/policy.ini");
  ASSERT_TRUE(policy) << policy.error().str();
  Decision d;
  EXPECT_EQ(partition_label(**policy, "gpu-spot", d), "gpu-spot");
  EXPECT_EQ(partition_label(**policy, "", d), (*policy)->default_partition()->name);
  EXPECT_EQ(partition_label(**policy, "nope,gpu-spot", d), "gpu-spot");
  EXPECT_EQ(partition_label(**policy, "made-up-by-a-user", d), "other");
  d.rewrite.partition = "gpu-h100";
  EXPECT_EQ(partition_label(**policy, "gpu-od", d), "gpu-h100");
}

TEST(Metrics, TextfileIsReplacedWholeAndNoLinkFollowed) {
  const std::string dir = temp_dir();
  const std::string path = dir + "/scaleguard.prom";
  ASSERT_EQ(write_textfile(path, "a 1\n"), "");
  EXPECT_EQ(slurp(path), "a 1\n");
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  // A link planted where the file goes is replaced, its target never written.
  std::ofstream(dir + "/victim") << "keep\n";
  unlink(path.c_str());
  ASSERT_EQ(symlink((dir + "/victim").c_str(), path.c_str()), 0);
  ASSERT_EQ(write_textfile(path, "b 2\n"), "");
  EXPECT_EQ(slurp(dir + "/victim"), "keep\n");
  ASSERT_EQ(lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(slurp(path), "b 2\n");
  // Nothing left behind but the two files.
  EXPECT_EQ(system(("test $(ls -A " + dir + " | wc -l) -eq 2").c_str()), 0);
  // A directory anyone may write is refused.
  chmod(dir.c_str(), 01777);
  EXPECT_NE(write_textfile(path, "c 3\n").find("may be written by anyone"), std::string::npos);
  EXPECT_EQ(slurp(path), "b 2\n");
  EXPECT_NE(check_textfile_path("relative.prom"), "");
  EXPECT_NE(check_textfile_path("/var/lib/x/../y.prom"), "");
  EXPECT_NE(check_textfile_path("/var/lib/x/scaleguard.txt"), "");
  EXPECT_EQ(check_textfile_path("/var/lib/prometheus/node-exporter/scaleguard.prom"), "");
  system(("rm -rf " + dir).c_str());
}

TEST(Metrics, SyncCountersCarryOnFromThePreviousFile) {
  SyncRun first;
  first.started = 1000, first.ok = false, first.runs_total = 1, first.failures_total = 1;
  const std::string previous = render_sync(first);
  EXPECT_EQ(read_sample(previous, "scaleguard_budget_sync_failures_total", 0), 1);
  EXPECT_EQ(read_sample(previous, "scaleguard_budget_sync_runs_total", 0), 1);
  EXPECT_EQ(read_sample(previous, "scaleguard_budget_sync_last_success_timestamp_seconds", -1), 0);
  EXPECT_EQ(read_sample("garbage\nscaleguard_budget_sync_runs_total x\n", "scaleguard_budget_sync_runs_total", 7), 7);
  EXPECT_EQ(read_sample("", "scaleguard_budget_sync_runs_total", 7), 7);
}

TEST(Metrics, BudgetsInBaseUnits) {
  std::vector<BudgetGauge> b(1);
  b[0].name = "ml", b[0].account = "ml", b[0].period = "day", b[0].limit = 10, b[0].used = 2.5, b[0].checked = true;
  Text t;
  render_budgets(t, b, LedgerGauge{100, true, 1, 0}, 160);
  EXPECT_TRUE(has_line(t.str(), "scaleguard_budget_left_gpu_seconds{budget=\"ml\",account=\"ml\",user=\"\",period=\"day\",mode=\"enforce\"} 27000")) << t.str();
  EXPECT_TRUE(has_line(t.str(), "scaleguard_budget_ledger_age_seconds 60")) << t.str();
  Text none;
  render_budgets(none, {}, LedgerGauge{}, 160);
  EXPECT_EQ(none.str(), "");
}

// Every family the code writes, as one file, through Prometheus' own linter.
TEST(Metrics, PromtoolFindsNothingToLint) {
  if (system("command -v promtool >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "promtool not installed (Debian package prometheus; scripts/install-deps.sh)";
  const std::string dir = temp_dir();
  ASSERT_EQ(write_textfile(dir + "/all.prom", sample_exposition()), "");
  const std::string cmd = "promtool check metrics < " + dir + "/all.prom > " + dir + "/out 2>&1";
  const int rc = system(cmd.c_str());
  EXPECT_EQ(rc, 0) << slurp(dir + "/out") << "\n" << sample_exposition();
  EXPECT_EQ(slurp(dir + "/out"), "");
  system(("rm -rf " + dir).c_str());
}

// The linter must be able to fail: a counter without _total and a duplicate series.
TEST(Metrics, PromtoolCatchesABadName) {
  if (system("command -v promtool >/dev/null 2>&1") != 0) GTEST_SKIP() << "promtool not installed";
  const std::string dir = temp_dir();
  Text t;
  t.family("scaleguard_decisions", "counter", "no _total");
  t.sample("scaleguard_decisions", {}, 1);
  ASSERT_EQ(write_textfile(dir + "/bad.prom", t.str()), "");
  EXPECT_EQ(system(("promtool check metrics < " + dir + "/bad.prom > " + dir + "/out 2>&1 || exit 3; "
                    "test -s " + dir + "/out && exit 3").c_str()) >> 8, 3);
  system(("rm -rf " + dir).c_str());
}
