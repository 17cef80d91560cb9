// What budgets add to one submission inside slurmctld, with 1,000 budgets and 10,000 pending
// jobs: decide() alone (the baseline) against decide() + the account lookup + budget
// admission (judge, record, and the record taken back so the loop does not grow it), with
// the Gate holding a ledger that counted 10,000 pending jobs and 10,000 jobs accepted since.
//   bench_budget --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// With --write-fixture DIR it writes DIR/policy.ini (configs/policy.ini + 1,000 budgets; kept
// when it exists) and DIR/budget-ledger.json (counted now) for bench/slurm/submit_throughput.sh.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "scaleguard/budget.h"
#include "scaleguard/budget_admit.h"
#include "scaleguard/budget_ledger.h"
#include "scaleguard/decide.h"
#include "scaleguard/policy.h"

using namespace scaleguard;
namespace bg = scaleguard::budget;

namespace {

constexpr int kBudgets = 1000;
constexpr int kPending = 10000;

std::string fixture_dir;   // --write-fixture DIR, else a fresh directory under /tmp

// configs/policy.ini (catalog made absolute) + 1,000 budgets: 500 accounts, 400 users, 100
// users within accounts; limits large enough that every job is accepted, as in a busy month.
std::string write_policy(const std::string& dir) {
  std::ifstream in(std::string(SCALEGUARD_SOURCE_DIR) + "/configs/policy.ini");
  std::stringstream text;
  text << in.rdbuf();
  std::string policy = text.str();
  const std::string key = "catalog = catalog.ini";
  if (auto at = policy.find(key); at != std::string::npos)
    policy.replace(at, key.size(), "catalog = " + std::string(SCALEGUARD_SOURCE_DIR) + "/configs/catalog.ini");
  policy += "\n[budgets]\nledger = " + dir + "/budget-ledger.json\nledger_max_age = 1d\n";
  for (int i = 0; i < kBudgets; ++i) {
    policy += "\n[budget b" + std::to_string(i) + "]\n";
    if (i < 500) policy += "account = acct" + std::to_string(i) + "\n";
    else if (i < 900) policy += "user = user" + std::to_string(i - 500) + "\n";
    else policy += "account = acct" + std::to_string(i - 900) + "\nuser = user" + std::to_string(i - 900) + "\n";
    policy += i % 2 ? "dollars = 1e9\n" : "gpu_hours = 1e8\n";
    policy += i % 3 ? "period = month\n" : "period = quarter\n";
  }
  const std::string path = dir + "/policy.ini";
  if (std::ifstream(path).good()) return path;   // an existing fixture stays as it is (slurmctld reads it)
  std::ofstream(path) << policy;
  return path;
}

struct Setup {
  std::shared_ptr<const Policy> policy;
  std::shared_ptr<const bg::Budgets> budgets;
  std::shared_ptr<bg::Ledger> ledger = std::make_shared<bg::Ledger>();
};

Setup& setup() {
  static Setup s = [] {
    Setup s;
    if (fixture_dir.empty()) {
      char tmpl[] = "/tmp/scaleguard-bench-budget-XXXXXX";
      if (!mkdtemp(tmpl)) std::perror("mkdtemp"), std::exit(1);
      fixture_dir = tmpl;
    }
    const std::string path = write_policy(fixture_dir);
    auto p = load_policy(path);
    if (!p) std::fprintf(stderr, "%s\n", p.error().str().c_str()), std::exit(1);
    s.policy = p.value();
    auto b = bg::load_budgets(path, *s.policy);
    if (!b) std::fprintf(stderr, "%s\n", b.error().str().c_str()), std::exit(1);
    s.budgets = b.value();
    // The ledger of 10,000 pending jobs of 2 GPU-hours, spread over the accounts and users.
    s.ledger->snapshot = std::time(nullptr);
    s.ledger->snapshot_ms = s.ledger->snapshot * 1000;
    s.ledger->written = s.ledger->snapshot;
    std::vector<bg::QueuedJob> queue;
    for (int j = 0; j < kPending; ++j) {
      bg::QueuedJob q;
      q.job_id = std::to_string(j), q.account = "acct" + std::to_string(j % 500), q.user = "user" + std::to_string(j % 400);
      q.partition = "gpu-od", q.gpu_hours = q.whole_gpu_hours = 2, q.record = "sg-bench-" + q.job_id;
      queue.push_back(std::move(q));
    }
    bg::count_budgets(*s.budgets, *s.policy, {}, queue, s.ledger->snapshot, s.ledger.get());
    // bench/slurm submits as root: its jobs count against acct0's budgets.
    s.ledger->default_account["root"] = "acct0";
    s.ledger->accounts["root"] = {"acct0"};
    for (int u = 0; u < 400; ++u) {
      s.ledger->default_account["user" + std::to_string(u)] = "acct" + std::to_string(u);
      s.ledger->accounts["user" + std::to_string(u)] = {"acct" + std::to_string(u)};
    }
    return s;
  }();
  return s;
}

// The request bench/slurm submits: 1 GPU for 2 hours, no intent.
JobRequest request() {
  JobRequest j;
  j.gpus_total = 1;
  j.time_limit_min = 120;
  return j;
}

void BM_Decide(benchmark::State& state) {
  const JobRequest j = request();
  for (auto _ : state) benchmark::DoNotOptimize(decide(j, *setup().policy));
}
BENCHMARK(BM_Decide);

void BM_DecideAndBudgets(benchmark::State& state) {
  Setup& s = setup();
  bg::Gate gate(s.ledger->snapshot - 1);
  gate.set_budgets(s.budgets, s.policy);
  gate.set_ledger(s.ledger, "");
  const std::int64_t now = s.ledger->snapshot + 1;
  // 10,000 jobs accepted since the snapshot, in the Gate's own record.
  for (int j = 0; j < kPending; ++j) {
    bg::Charge c{"acct" + std::to_string(j % 500), "user" + std::to_string(j % 400), "gpu-od", 2, 1, 120, 1};
    gate.judge(c, now * 1000, true);
  }
  const JobRequest j = request();
  int n = 0;
  for (auto _ : state) {
    const Decision d = decide(j, *s.policy);
    const std::string user = "user" + std::to_string(n++ % 400);
    bg::Charge c{gate.account_of(user, ""), user, "gpu-od", d.granted_gpu_hours, d.envelope.gpus,
                 d.envelope.time_limit_min, 1};
    const bg::Verdict v = gate.judge(c, now * 1000, true);
    if (v.outcome == bg::Outcome::reject) state.SkipWithError("a budget refused: the fixture's limits are too small");
    gate.retract(v.ticket);
    benchmark::DoNotOptimize(v);
  }
}
BENCHMARK(BM_DecideAndBudgets);

class MedianReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& r : runs)
      if ((r.run_type == Run::RT_Aggregate && r.aggregate_name == "median") ||
          (r.run_type == Run::RT_Iteration && !cpu_.count(r.run_name.function_name)))
        cpu_[r.run_name.function_name] = r.GetAdjustedCPUTime();   // ns (the default unit)
  }
  void print() const {
    if (!cpu_.count("BM_Decide") || !cpu_.count("BM_DecideAndBudgets")) return;
    const double base = cpu_.at("BM_Decide"), both = cpu_.at("BM_DecideAndBudgets");
    std::printf("\n%d budgets, %d pending jobs in the ledger and %d accepted since its snapshot\n", kBudgets, kPending,
                kPending);
    std::printf("decide()                    %8.2f us (median cpu)\n", base / 1e3);
    std::printf("decide() + budget admission %8.2f us (target <= 20 us); budgets add %.2f us\n", both / 1e3,
                (both - base) / 1e3);
  }

 private:
  std::map<std::string, double> cpu_;
};

// bench/slurm's fixture: the policy and a fresh ledger (the plugin refuses one counted before
// slurmctld started, so write it after the cluster is up).
int write_fixture(const std::string& dir) {
  fixture_dir = dir;
  Setup& s = setup();
  s.ledger->snapshot = s.ledger->written = std::time(nullptr);
  s.ledger->snapshot_ms = s.ledger->snapshot * 1000;
  std::ofstream(dir + "/budget-ledger.json") << bg::format_ledger(*s.ledger);
  std::printf("%s/policy.ini (%d budgets), %s/budget-ledger.json (%d pending jobs)\n", dir.c_str(), kBudgets,
              dir.c_str(), kPending);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && !std::strcmp(argv[1], "--write-fixture")) return write_fixture(argv[2]);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  setup();
  MedianReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print();
  benchmark::Shutdown();
  return 0;
}
