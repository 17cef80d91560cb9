// Budgets (budget/): the policy sections, periods, prices, the ledger file, counting from
// squeue/sacct text, and admission (left = budget - used - committed - liens - recent).
#include <gtest/gtest.h>

#include "scaleguard/budget.h"
#include "scaleguard/budget_admit.h"
#include "scaleguard/budget_ledger.h"
#include "scaleguard/report.h"
#include "test_support.h"

namespace scaleguard::budget {
namespace {

using test::TempFile;

std::int64_t at(const char* text) {
  auto t = parse_instant(text);
  EXPECT_TRUE(t.ok()) << text;
  return t.ok() ? *t : 0;
}

const std::string kSettings = "[budgets]\nledger = /var/lib/scaleguard/budget-ledger.json\nledger_max_age = 15m\n";

struct Loaded {
  std::shared_ptr<const Policy> policy;
  std::shared_ptr<const Budgets> budgets;
  Error error;
};

Loaded load(const std::string& budget_text) {
  TempFile f(test::policy_text() + budget_text, "policy.ini");
  Loaded out;
  auto p = load_policy(f.path());
  if (!p) {
    out.error = p.error();
    return out;
  }
  out.policy = p.value();
  auto b = load_budgets(f.path(), *out.policy);
  if (b) out.budgets = b.value();
  else out.error = b.error();
  return out;
}

// --- policy -----------------------------------------------------------------------------

TEST(BudgetPolicy, ReadsEveryKey) {
  auto l = load(kSettings + "on_stale_ledger = open\n"
                "[budget ml-month]\naccount = ML\ngpu_hours = 5000\nperiod = month\nstart = 2026-01-15\n"
                "carry_over = 0.1\ngrace = 0.05\nactions = 80% warn, 95% move spot, 100% reject\n"
                "partitions = od, spot\n"
                "[budget alice-q]\nuser = alice\ndollars = 40000\nperiod = quarter\nmode = shadow\n"
                "[budget bob-ml]\naccount = ml\nuser = bob\ngpu_hours = 10\nperiod = 2026-12-01..2026-12-31\n");
  ASSERT_TRUE(l.budgets) << l.error.str();
  const auto& list = l.budgets->list;
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].account, "ml");   // slurmctld lowercases accounts
  EXPECT_EQ(list[0].unit, Unit::gpu_hours);
  EXPECT_EQ(list[0].limit, 5000);
  EXPECT_EQ(list[0].period.cycle, Cycle::month);
  EXPECT_EQ(list[0].period.anchor, at("2026-01-15"));
  EXPECT_DOUBLE_EQ(list[0].carry_over, 0.1);
  ASSERT_EQ(list[0].thresholds.size(), 3u);
  EXPECT_EQ(list[0].thresholds[1].act, Act::move);
  EXPECT_EQ(list[0].thresholds[1].partition, "spot");
  EXPECT_EQ(list[1].unit, Unit::usd);
  EXPECT_TRUE(list[1].shadow);
  EXPECT_EQ(list[2].period.cycle, Cycle::range);
  EXPECT_EQ(list[2].period.range_end, at("2027-01-01"));   // a bare end date includes its day
  EXPECT_TRUE(l.budgets->settings.fail_open);
  EXPECT_EQ(l.budgets->settings.max_age_s, 900);
  EXPECT_EQ(l.budgets->applying("ml", "bob"), (std::vector<int>{0, 2}));
  EXPECT_EQ(l.budgets->applying("cv", "alice"), (std::vector<int>{1}));
  EXPECT_TRUE(l.budgets->applying("cv", "bob").empty());
  const std::string text = describe(*l.budgets, at("2026-12-20"));
  EXPECT_NE(text.find("budget ml-month: account ml, 5000.00 GPU-hours per month (now 2026-12-15T00:00:00Z .. "
                      "2027-01-15T00:00:00Z), carry-over up to 10%, grace 5%: 80% warn, 95% move spot, 100% reject; "
                      "partitions od, spot"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("budget alice-q: user alice, $40,000.00 per quarter (now 2026-10-01T00:00:00Z"), std::string::npos) << text;
  EXPECT_NE(text.find("mode shadow"), std::string::npos);
  EXPECT_NE(text.find("accepts jobs unchecked (on_stale_ledger = open)"), std::string::npos);
}

TEST(BudgetPolicy, MistakesNameFileLineAndKey) {
  struct Case {
    std::string text, message;
  } cases[] = {
      {"[budget a]\naccount = ml\ngpu_hours = 10\ngpu_hour = 3\n", "unknown key 'gpu_hour'"},
      {"[budget a]\naccount = ml\ngpu_hours = 10\ndollars = 3\n", "both gpu_hours and dollars"},
      {"[budget a]\naccount = ml\n", "no limit"},
      {"[budget a]\ngpu_hours = 10\n", "needs an account, a user or both"},
      {"[budget a]\naccount = ml\ngpu_hours = 10\nperiod = fortnight\n", "unknown period 'fortnight'"},
      {"[budget a]\naccount = ml\ngpu_hours = 10\nactions = 80 warn\n", "malformed action"},
      {"[budget a]\naccount = ml\ngpu_hours = 10\nactions = 90% move lowprio\n", "move to partition 'lowprio'"},
      {"[budget a]\naccount = ml\ngpu_hours = 10\npartitions = od, gpu-x\n", "partition 'gpu-x' is not in the policy"},
      {"[budget a]\naccount = ml\ngpu_hours = 10\nperiod = 2026-12-31..2026-12-01\n", "ends before it starts"},
      {"[budget a]\naccount = ml\ngpu_hours = 10\nperiod = 2026-12-01..2026-12-31\nstart = 2026-12-01\n",
       "a date range has no start key"},
      {"[budget a]\naccount = ml\ngpu_hours = 10\nstart = 2026-13-01\n", "is not a time"},
      {"[budget a/b]\naccount = ml\ngpu_hours = 10\n", "not a plain name"},
      {"[budget a]\naccount = ml\ngpu_hours = 10\n[budget a]\nuser = x\ngpu_hours = 1\n", "appears twice"},
  };
  for (const auto& c : cases) {
    auto l = load(kSettings + c.text);
    EXPECT_FALSE(l.budgets) << c.text;
    EXPECT_NE(l.error.str().find(c.message), std::string::npos) << c.text << " -> " << l.error.str();
    EXPECT_NE(l.error.str().find("policy.ini:"), std::string::npos) << l.error.str();
  }
  auto no_ledger = load("[budget a]\naccount = ml\ngpu_hours = 10\n");
  EXPECT_NE(no_ledger.error.str().find("budgets without a ledger"), std::string::npos) << no_ledger.error.str();
  auto relative = load("[budgets]\nledger = ledger.json\n");
  EXPECT_NE(relative.error.str().find("absolute path"), std::string::npos);
  auto stale = load("[budgets]\nledger = /l\non_stale_ledger = maybe\n");
  EXPECT_NE(stale.error.str().find("unknown on_stale_ledger"), std::string::npos);
}

TEST(BudgetPolicy, LoadPolicyAcceptsBudgetSectionsAndStillRefusesUnknownOnes) {
  TempFile f(test::policy_text() + "[budgetz x]\n", "policy.ini");
  auto p = load_policy(f.path());
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().str().find("unknown section kind 'budgetz'"), std::string::npos);
  EXPECT_NE(p.error().str().find("[budget NAME]"), std::string::npos);
}

// --- periods ----------------------------------------------------------------------------

TEST(BudgetPeriod, MonthsKeepTheAnchorsDayAndClampToShortMonths) {
  Period p;
  p.cycle = Cycle::month;
  p.anchor = at("2026-01-31T06:00:00");
  auto w = window_at(p, at("2026-02-20"));
  EXPECT_EQ(format_instant(w.start), "2026-01-31T06:00:00Z");
  EXPECT_EQ(format_instant(w.end), "2026-02-28T06:00:00Z");
  w = window_at(p, at("2026-03-01"));
  EXPECT_EQ(format_instant(w.start), "2026-02-28T06:00:00Z");
  EXPECT_EQ(format_instant(w.end), "2026-03-31T06:00:00Z");
  // Before the anchor, periods continue backwards.
  w = window_at(p, at("2025-12-31T05:00:00"));
  EXPECT_EQ(format_instant(w.start), "2025-11-30T06:00:00Z");
  EXPECT_EQ(format_instant(next_window(p, w).start), "2025-12-31T06:00:00Z");
  EXPECT_EQ(format_instant(previous_window(p, w).start), "2025-10-31T06:00:00Z");
}

TEST(BudgetPeriod, QuartersWeeksDaysAndOffsets) {
  Period q;
  q.cycle = Cycle::quarter;
  auto w = window_at(q, at("2026-08-15"));
  EXPECT_EQ(format_instant(w.start), "2026-07-01T00:00:00Z");
  EXPECT_EQ(format_instant(w.end), "2026-10-01T00:00:00Z");
  Period week;
  week.cycle = Cycle::week;
  week.anchor = 4 * 86400;   // the default: Mondays
  w = window_at(week, at("2026-12-05"));   // a Saturday
  EXPECT_EQ(format_instant(w.start), "2026-11-30T00:00:00Z");
  Period local;
  local.cycle = Cycle::month;
  ASSERT_TRUE(parse_instant("2026-01-01T00:00+01:00", &local.utc_offset_s));
  local.anchor = at("2026-01-01T00:00+01:00");
  w = window_at(local, at("2026-06-15"));
  EXPECT_EQ(format_instant(w.start, local.utc_offset_s), "2026-06-01T00:00:00+01:00");
  EXPECT_EQ(format_instant(w.start), "2026-05-31T23:00:00Z");
  Period day;
  day.cycle = Cycle::day;
  day.anchor = at("2026-12-05T09:30:10");
  EXPECT_EQ(window_at(day, at("2026-12-05T09:30:09")).end, day.anchor);
  EXPECT_EQ(window_at(day, day.anchor).start, day.anchor);
  Period range;
  range.cycle = Cycle::range;
  range.anchor = at("2026-12-01");
  range.range_end = at("2026-12-10");
  EXPECT_FALSE(in_force(range, at("2026-11-30")));
  EXPECT_TRUE(in_force(range, at("2026-12-09T23:59:59")));
  EXPECT_FALSE(in_force(range, range.range_end));
  EXPECT_FALSE(parse_instant("2026-02-29").ok());   // not a leap year
  EXPECT_FALSE(parse_instant("2026-12-01T25:00").ok());
  EXPECT_FALSE(parse_instant("2026-12-01 junk").ok());
}

// --- prices -----------------------------------------------------------------------------

TEST(BudgetPrice, SpotPartitionsArePricedAsSpot) {
  auto l = load(kSettings + "[budget d]\naccount = ml\ndollars = 100\n[budget g]\naccount = ml\ngpu_hours = 10\npartitions = od\n");
  ASSERT_TRUE(l.budgets) << l.error.str();
  EXPECT_NEAR(usd_per_gpu_hour(*l.policy, "od"), 32.77 / 8, 1e-9);
  EXPECT_NEAR(usd_per_gpu_hour(*l.policy, "spot"), 9.83 / 8, 1e-9);
  EXPECT_NEAR(usd_per_gpu_hour(*l.policy, "spot,od"), 32.77 / 8, 1e-9);   // the dearest of a list
  EXPECT_NEAR(usd_per_gpu_hour(*l.policy, ""), 32.77 / 8, 1e-9);          // the default partition
  EXPECT_LT(usd_per_gpu_hour(*l.policy, "debug"), 0);
  const Budget& d = l.budgets->list[0];
  EXPECT_NEAR(amount(d, *l.policy, 8, "spot"), 9.83, 1e-9);
  EXPECT_NEAR(amount(d, *l.policy, 8, "od"), 32.77, 1e-9);
  const Budget& g = l.budgets->list[1];
  EXPECT_EQ(amount(g, *l.policy, 8, "spot"), 0);   // not a counted partition
  EXPECT_EQ(amount(g, *l.policy, 8, "spot,od"), 8);
}

// --- ledger -----------------------------------------------------------------------------

TEST(BudgetLedger, RoundTripsAndRefusesMalformedFiles) {
  Ledger l;
  l.snapshot = 1764928000;
  l.written = 1764928003;
  l.entries["a"] = LedgerEntry{"id", {100, 200}, 1.5, 2.25, 3, 0.5, 1, 2, 0.1, ""};
  l.default_account["alice"] = "ml";
  l.accounts["alice"] = {"ml", "cv"};
  l.notes.push_back("squeue: skipped 1 job line(s)");
  auto back = parse_ledger(format_ledger(l));
  ASSERT_TRUE(back) << back.error().str();
  EXPECT_EQ(back->snapshot, l.snapshot);
  const auto& e = back->entries.at("a");
  EXPECT_EQ(e.window.end, 200);
  EXPECT_EQ(e.committed, 2.25);
  EXPECT_EQ(e.pending, 2);
  EXPECT_EQ(back->accounts.at("alice").size(), 2u);
  EXPECT_EQ(back->notes.size(), 1u);
  for (const char* bad : {"", "[]", "{\"format\":2}", "{\"format\":1,\"budgets\":{}}",
                          "{\"format\":1,\"snapshot\":5,\"budgets\":{\"a\":{\"identity\":\"x\"}}}",
                          "{\"format\":1,\"snapshot\":5,\"budgets\":{},\"default_account\":{\"u\":\"a\\nb\"}}",
                          "{\"format\":1,\"snapshot\":-5,\"budgets\":{}}"})
    EXPECT_FALSE(parse_ledger(bad)) << bad;
}

// --- counting from squeue and sacct ----------------------------------------------------

std::string squeue_line(std::vector<std::string> f) {
  std::string s;
  for (auto& x : f) s += x + '\x1f';
  return s + "\n";
}

TEST(BudgetCount, SqueueLinesBecomeEnvelopesAndRemainingTime) {
  auto l = load(kSettings);
  ASSERT_TRUE(l.policy) << l.error.str();
  std::string text =
      // a pending array element on a node range: 2 nodes x 4 GPUs (gpus per node) x 30 min
      squeue_line({"1_0", "alice", "ml", "od", "PENDING", "30:00", "0:00", "1", "2", "1", "0", "*:*:*", "OK",
                   "cpu=1,gres/gpu=4", "N/A", "gres:gpu:4", "N/A", "N/A", ""}) +
      // a het component: 2 GPUs for 1 h
      squeue_line({"4+1", "alice", "ml", "od", "PENDING", "1:00:00", "0:00", "1", "1", "1", "0", "*:*:*", "OK",
                   "gres/gpu=2", "gres/gpu:2", "N/A", "N/A", "N/A", ""}) +
      // running: 8 GPUs, 1 h limit, 15 min used -> 6 GPU-hours left
      squeue_line({"3", "bob", "ml", "spot", "RUNNING", "1:00:00", "15:00", "1", "1", "1", "0", "*:*:*", "OK",
                   "cpu=1,gres/gpu=8", "gres:gpu:8", "N/A", "N/A", "N/A", ""}) +
      // --exclusive on one node: every GPU of it
      squeue_line({"6", "bob", "ml", "od", "PENDING", "1-00:00:00", "0:00", "1", "1", "1", "0", "*:*:*", "NO",
                   "cpu=1", "N/A", "N/A", "N/A", "N/A", ""}) +
      // not governed, finished, malformed
      squeue_line({"7", "bob", "ml", "debug", "PENDING", "10:00", "0:00", "1", "1", "1", "0", "*:*:*", "OK", "",
                   "gres:gpu:1", "N/A", "N/A", "N/A", ""}) +
      squeue_line({"8", "bob", "ml", "od", "COMPLETING", "10:00", "0:00", "1", "1", "1", "0", "*:*:*", "OK", "",
                   "gres:gpu:1", "N/A", "N/A", "N/A", ""}) +
      "9\x1f" "bob\x1f" "ml\n";
  auto q = parse_squeue(text, *l.policy);
  ASSERT_EQ(q.size(), 5u);
  EXPECT_EQ(q[0].job_id, "1_0");
  EXPECT_DOUBLE_EQ(q[0].gpu_hours, 2 * 4 * 0.5);
  EXPECT_DOUBLE_EQ(q[1].gpu_hours, 2);
  EXPECT_TRUE(q[2].running);
  EXPECT_DOUBLE_EQ(q[2].gpu_hours, 6);
  EXPECT_DOUBLE_EQ(q[3].gpu_hours, 8 * 24);
  // The cut line is kept, unreadable, with the names it has: its budgets become unusable.
  EXPECT_EQ(q[4].user, "bob");
  EXPECT_EQ(q[4].account, "ml");
  EXPECT_NE(q[4].unreadable.find("has 3 fields"), std::string::npos) << q[4].unreadable;
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(q[i].unreadable.empty()) << i;
  const auto args = squeue_arguments();
  EXPECT_EQ(args[1], "-r");
}

// Found by fuzz_budget (UBSan, signed overflow): a day field of 20 digits, a negative day, an
// empty limit and a typed GPU sum past int are unreadable or bounded, never undefined.
TEST(BudgetCount, HostileDurationsAndGpuCountsAreUnreadableOrBounded) {
  auto l = load(kSettings);
  ASSERT_TRUE(l.policy) << l.error.str();
  const auto running = [](const std::string& limit, const std::string& tres) {
    return squeue_line({"3", "bob", "ml", "od", "RUNNING", limit, "15:00", "1", "1", "1", "0", "*:*:*", "OK", tres,
                        "gres:gpu:8", "N/A", "N/A", "N/A", ""});
  };
  const std::string text = running("99999999999999999999-00:00:00", "gres/gpu=8") +
                           running("-5-00:00:00", "gres/gpu=8") + running("1-", "gres/gpu=8") +
                           running("1-00:00:00:00", "gres/gpu=8") +
                           running("1:00:00", "gres/gpu:a=2147483647,gres/gpu:b=2147483647") +
                           running("1:00:00", "gres/gpu=8");
  auto q = parse_squeue(text, *l.policy);
  ASSERT_EQ(q.size(), 6u);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(q[i].unreadable.empty()) << i;
  EXPECT_TRUE(q[5].unreadable.empty());
  EXPECT_DOUBLE_EQ(q[5].gpu_hours, 6);
}

// Issue 36 class 1: `sbatch -n 4 --ntasks-per-gpu=2` names no GPU; slurmctld derives
// gres/gpu=2 and keeps it in its GRES list, which squeue prints only as the pending job's
// requested TRES (tres-alloc). The line as Slurm 22.05 printed it on the dev cluster.
TEST(BudgetCount, GpusSlurmDerivedFromNtasksPerGpuAreCharged) {
  auto l = load(kSettings);
  ASSERT_TRUE(l.policy) << l.error.str();
  const std::string text =
      squeue_line({"1", "sguser", "ml", "od", "PENDING", "30:00", "0:00", "1", "1", "4", "0", "*:*:*", "OK",
                   "cpu=4,mem=1M,node=1,billing=4,gres/gpu=2", "N/A", "N/A", "N/A", "N/A", ""}) +
      // -N 2 --ntasks-per-gpu=1, running: its allocation says 2
      squeue_line({"2", "sguser", "ml", "od", "RUNNING", "30:00", "0:00", "2", "2", "2", "0", "*:*:*", "OK",
                   "cpu=2,node=2,billing=2,gres/gpu=2", "N/A", "N/A", "N/A", "N/A", ""}) +
      // A named request is judged by its envelope, never below what Slurm holds.
      squeue_line({"3", "sguser", "ml", "od", "PENDING", "1:00:00", "0:00", "1", "1", "1", "0", "*:*:*", "OK",
                   "cpu=1,node=1,gres/gpu=3", "N/A", "gres:gpu:2", "N/A", "N/A", ""});
  auto q = parse_squeue(text, *l.policy);
  ASSERT_EQ(q.size(), 3u);
  EXPECT_DOUBLE_EQ(q[0].gpu_hours, 2 * 0.5);
  EXPECT_DOUBLE_EQ(q[1].gpu_hours, 2 * 0.5);
  EXPECT_DOUBLE_EQ(q[2].gpu_hours, 3);
}

// Issue 36 class 8: Slurm's field syntax read whole: a partition list past 256 bytes (an
// ungoverned partition named 60 times, then a governed one) and SSSD's user@domain.
TEST(BudgetCount, LongPartitionListsAndUserAtDomainAreRead) {
  auto l = load(kSettings + "[budget a]\nuser = alice@corp.example\ngpu_hours = 100\n");
  ASSERT_TRUE(l.budgets) << l.error.str();
  std::string parts;
  for (int i = 0; i < 60; ++i) parts += "debug,";
  parts += "od";
  ASSERT_GT(parts.size(), 256u);
  const std::string text =
      squeue_line({"5", "alice@corp.example", "ml", parts, "PENDING", "1:00:00", "0:00", "1", "1", "1", "0", "*:*:*",
                   "OK", "cpu=1,gres/gpu=4", "gres:gpu:4", "N/A", "N/A", "N/A", ""});
  auto q = parse_squeue(text, *l.policy);
  ASSERT_EQ(q.size(), 1u);
  EXPECT_TRUE(q[0].unreadable.empty()) << q[0].unreadable;
  EXPECT_EQ(q[0].user, "alice@corp.example");
  EXPECT_DOUBLE_EQ(q[0].gpu_hours, 4);
  Ledger ledger;
  count_budgets(*l.budgets, *l.policy, {}, q, at("2026-12-05T12:00:00"), &ledger);
  EXPECT_DOUBLE_EQ(ledger.entries.at("a").liens, 4);
}

// Issue 36 class 9: shard and mps count as the policy says (shard:1, mps:100 by default)
// once they run, as at submission.
TEST(BudgetCount, SharedGpusCountOnceTheyRun) {
  auto l = load(kSettings);
  ASSERT_TRUE(l.policy) << l.error.str();
  const auto running = [](const std::string& tres, const std::string& per_node) {
    return squeue_line({"3", "bob", "ml", "od", "RUNNING", "1:00:00", "0:00", "1", "1", "1", "0", "*:*:*", "OK", tres,
                        "N/A", per_node, "N/A", "N/A", ""});
  };
  auto q = parse_squeue(running("cpu=1,mem=1M,node=1,billing=1,gres/shard=2", "gres:shard:2") +
                            running("cpu=1,gres/mps=150,gres/mps:a100=150", "gres:mps:150") +
                            // shard not tracked by accounting: the request's envelope
                            running("cpu=1,mem=1M,node=1,billing=1", "gres:shard:3"),
                        *l.policy);
  ASSERT_EQ(q.size(), 3u);
  EXPECT_DOUBLE_EQ(q[0].gpu_hours, 2);
  EXPECT_DOUBLE_EQ(q[1].gpu_hours, 2);   // 150% of a GPU rounds up, as at submission
  EXPECT_DOUBLE_EQ(q[2].gpu_hours, 3);
  auto g = parse_held_gpus("cpu=8,gres/gpu=4,gres/gpu:a100=4,gres/shard=2", l.policy->shared_gres);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(*g, 6);
  EXPECT_EQ(*parse_held_gpus("gres/gpu:a100=2,gres/gpu:h100=1,mem=1G", l.policy->shared_gres), 3);
  EXPECT_EQ(*parse_held_gpus("gres/shard=2", SharedGpuGres{}), 0);   // shared_gpu_gres = off
}

// A record the sync cannot read marks only the budgets it could be charged to; the mark
// survives the ledger file.
TEST(BudgetCount, UnreadableRecordsMarkOnlyTheBudgetsTheyCouldTouch) {
  auto l = load(kSettings + "[budget ml]\naccount = ml\ngpu_hours = 100\n[budget cv]\naccount = cv\ngpu_hours = 100\n"
                "[budget bob]\nuser = bob\ngpu_hours = 100\n[budget spot]\naccount = ml\ngpu_hours = 5\npartitions = spot\n");
  ASSERT_TRUE(l.budgets) << l.error.str();
  UsageCounter counter(*l.budgets, *l.policy, at("2026-12-05T12:00:00"));
  counter.unreadable("ml", "alice", "od", "sacct: job 7: AllocTRES: bad");
  Ledger ledger;
  ledger.snapshot = at("2026-12-05T12:00:00");
  counter.finish(&ledger);
  EXPECT_EQ(ledger.entries.at("ml").unusable, "sacct: job 7: AllocTRES: bad");
  EXPECT_TRUE(ledger.entries.at("cv").unusable.empty());
  EXPECT_TRUE(ledger.entries.at("bob").unusable.empty());
  EXPECT_TRUE(ledger.entries.at("spot").unusable.empty());   // counts spot only
  auto back = parse_ledger(format_ledger(ledger));
  ASSERT_TRUE(back.ok()) << back.error().str();
  EXPECT_EQ(back->entries.at("ml").unusable, "sacct: job 7: AllocTRES: bad");
  EXPECT_TRUE(back->entries.at("cv").unusable.empty());
  // Nothing readable about it: every budget.
  UsageCounter blind(*l.budgets, *l.policy, at("2026-12-05T12:00:00"));
  blind.unreadable("", "", "", "squeue: job ?: has 2 fields");
  Ledger all;
  blind.finish(&all);
  for (const auto& [name, e] : all.entries) EXPECT_FALSE(e.unusable.empty()) << name;
}

TEST(BudgetCount, UsedIsClippedToThePeriodAndTheQueueIsSplitIntoCommitmentsAndLiens) {
  auto l = load(kSettings + "[budget g]\naccount = ml\ngpu_hours = 100\nperiod = day\nstart = 2026-12-05\n"
                "carry_over = 0.5\n[budget d]\nuser = bob\ndollars = 1000\nperiod = day\n");
  ASSERT_TRUE(l.budgets) << l.error.str();
  const std::int64_t snap = at("2026-12-05T12:00:00");
  std::vector<UsedRun> runs = {
      // 8 GPUs from 23:00 the day before to 01:00: 1 h in yesterday, 1 h today
      {"1", "ml", "alice", "od", 8, at("2026-12-04T23:00:00"), at("2026-12-05T01:00:00")},
      // still running since 11:00 on spot: 1 h so far
      {"2", "ml", "bob", "spot", 4, at("2026-12-05T11:00:00"), -1},
      // another account, and a partition the policy does not govern
      {"3", "cv", "carol", "od", 8, at("2026-12-05T02:00:00"), at("2026-12-05T03:00:00")},
      {"4", "ml", "alice", "debug", 8, at("2026-12-05T02:00:00"), at("2026-12-05T03:00:00")},
  };
  std::vector<QueuedJob> queue = {{"2", "ml", "bob", "spot", true, 4, ""}, {"5", "ml", "alice", "od", false, 16, ""}};
  Ledger ledger;
  count_budgets(*l.budgets, *l.policy, runs, queue, snap, &ledger);
  const auto& g = ledger.entries.at("g");
  EXPECT_DOUBLE_EQ(g.used, 8 + 4);
  EXPECT_DOUBLE_EQ(g.committed, 4);
  EXPECT_DOUBLE_EQ(g.liens, 16);
  EXPECT_EQ(g.running, 1);
  EXPECT_EQ(g.pending, 1);
  EXPECT_DOUBLE_EQ(g.carry_in, 50);   // 100 - 8 used yesterday, capped at 50%
  EXPECT_NEAR(g.burn_per_hour, 12.0 / 12, 1e-12);
  EXPECT_EQ(g.identity, l.budgets->list[0].identity());
  const auto& d = ledger.entries.at("d");
  EXPECT_NEAR(d.used, 4 * 9.83 / 8, 1e-9);   // bob's spot hour at the spot price
  EXPECT_NEAR(d.committed, 4 * 9.83 / 8, 1e-9);
  EXPECT_EQ(earliest_start(*l.budgets, snap), at("2026-12-04"));
}

// Issue 40: an account's budget counts its sub-accounts' runs and queue, as the associations
// nest (sacctmgr's account rows); a sibling's and the parent's own jobs stay apart below it.
TEST(BudgetCount, AnAccountsBudgetCountsItsSubAccountsJobs) {
  auto l = load(kSettings + "[budget inst]\naccount = inst\ngpu_hours = 100\nperiod = day\n"
                "[budget grp]\naccount = grp\ngpu_hours = 50\nperiod = day\n");
  ASSERT_TRUE(l.budgets) << l.error.str();
  Ledger ledger;
  // root > inst > grp > proj; root > other. User rows do not shape the tree.
  parse_account_tree("root||\ninst|root|\ngrp|inst|\nPROJ|grp|\nproj||alice\nother|root|\n", &ledger);
  EXPECT_EQ(ledger.account_parents.at("proj"), (std::vector<std::string>{"grp"}));
  EXPECT_TRUE(ledger.account_parents.at("root").empty());
  EXPECT_EQ(enclosing_accounts(&ledger.account_parents, "proj"), (std::vector<std::string>{"proj", "grp", "inst", "root"}));
  const std::int64_t snap = at("2026-12-05T12:00:00");
  std::vector<UsedRun> runs = {{"1", "proj", "alice", "od", 8, at("2026-12-05T01:00:00"), at("2026-12-05T02:00:00")},
                               {"2", "inst", "bob", "od", 2, at("2026-12-05T01:00:00"), at("2026-12-05T02:00:00")},
                               {"3", "other", "carol", "od", 4, at("2026-12-05T01:00:00"), at("2026-12-05T02:00:00")}};
  std::vector<QueuedJob> queue = {{"4", "grp", "alice", "od", false, 16, ""}};
  count_budgets(*l.budgets, *l.policy, runs, queue, snap, &ledger);
  EXPECT_DOUBLE_EQ(ledger.entries.at("inst").used, 8 + 2);
  EXPECT_DOUBLE_EQ(ledger.entries.at("inst").liens, 16);
  EXPECT_DOUBLE_EQ(ledger.entries.at("grp").used, 8);
  EXPECT_DOUBLE_EQ(ledger.entries.at("grp").liens, 16);
  // An unreadable record of a sub-account marks the budgets above it, not a sibling's.
  UsageCounter c(*l.budgets, *l.policy, snap, &ledger.account_parents);
  c.unreadable("proj", "", "", "sacct: job 9: bad");
  Ledger marked;
  c.finish(&marked);
  EXPECT_FALSE(marked.entries.at("inst").unusable.empty());
  EXPECT_FALSE(marked.entries.at("grp").unusable.empty());
  // A cycle (a malformed tree) ends.
  AccountTree loop = {{"a", {"b"}}, {"b", {"a"}}};
  EXPECT_EQ(enclosing_accounts(&loop, "a"), (std::vector<std::string>{"a", "b"}));
  // The tree survives the ledger file.
  auto back = parse_ledger(format_ledger(ledger));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->account_parents, ledger.account_parents);
}

// Issue 36 class 5: the sync reads sacct one line at a time and counts each run as it comes,
// so 1,000,000 records (a flood of trivial array jobs, GPU-less and ungoverned ones among
// them) are counted in memory that does not grow with them; an unreadable record marks its
// own budget only. The same records through the whole-text parser give the same numbers.
std::string sacct_record(long i) {
  const char D = report::kSacctDelimiter;
  const char* partition = i % 4 == 0 ? "debug" : "od";
  const char* tres = i % 4 == 1 ? "billing=1,cpu=1,mem=1M,node=1" : "billing=1,cpu=1,gres/gpu=1,mem=1M,node=1";
  std::string r = std::to_string(1000 + i) + "_" + std::to_string(i % 1000);
  for (const char* f : {"alice", "ml", partition, "COMPLETED", "2026-12-05T10:00:00", "2026-12-05T10:00:36", "36", tres,
                        tres, "1", "0:0", "gpu-st-p4d-1", ""})
    r += D + std::string(f);
  return r;
}

TEST(BudgetCount, AMillionSacctRecordsStreamIntoTheCountInBoundedMemory) {
  auto l = load(kSettings + "[budget ml]\naccount = ml\ngpu_hours = 1000000\nperiod = day\n"
                "[budget cv]\naccount = cv\ngpu_hours = 10\nperiod = day\n");
  ASSERT_TRUE(l.budgets) << l.error.str();
  const std::int64_t snap = at("2026-12-05T12:00:00");
  const auto count = [&](long n, bool stream) {
    UsageCounter counter(*l.budgets, *l.policy, snap);
    std::string header = report::kSacctFormat;
    for (char& c : header)
      if (c == ',') c = report::kSacctDelimiter;
    const std::string bad = "77" + std::string(1, report::kSacctDelimiter) + "carol" + report::kSacctDelimiter + "cv" +
                            report::kSacctDelimiter + "od" + report::kSacctDelimiter + "COMPLETED";
    if (stream) {
      report::SacctLines reader(l.policy->shared_gres);
      EXPECT_TRUE(reader.header(header).ok());
      for (long i = 0; i <= n; ++i) {
        report::Run partial;
        auto run = reader.record(i < n ? sacct_record(i) : bad, &partial);
        if (!run) counter.unreadable(partial.account, partial.user, partial.partition, run.error().message);
        else if (*run) counter.add(UsedRun{(*run)->job_id, (*run)->account, (*run)->user, (*run)->partition, (*run)->gpus,
                                           (*run)->start, (*run)->start + (*run)->elapsed_s});
      }
    } else {
      std::string text = header + "\n";
      for (long i = 0; i < n; ++i) text += sacct_record(i) + "\n";
      auto runs = report::parse_sacct(text, "t", nullptr, l.policy->shared_gres);
      EXPECT_TRUE(runs.ok());
      for (const auto& r : *runs)
        counter.add(UsedRun{r.job_id, r.account, r.user, r.partition, r.gpus, r.start, r.start + r.elapsed_s});
      counter.unreadable("cv", "carol", "od", "bad");
    }
    Ledger ledger;
    counter.finish(&ledger);
    return ledger;
  };
  const Ledger million = count(1000000, true);
  EXPECT_NEAR(million.entries.at("ml").used, 500000 * 0.01, 1e-6);
  EXPECT_TRUE(million.entries.at("ml").unusable.empty());
  EXPECT_FALSE(million.entries.at("cv").unusable.empty());
  const Ledger streamed = count(20000, true), whole = count(20000, false);
  EXPECT_NEAR(streamed.entries.at("ml").used, 10000 * 0.01, 1e-9);
  EXPECT_DOUBLE_EQ(streamed.entries.at("ml").used, whole.entries.at("ml").used);
}

// --- admission --------------------------------------------------------------------------

struct GateFixture {
  Loaded l;
  std::unique_ptr<Gate> gate;
  std::shared_ptr<Ledger> ledger = std::make_shared<Ledger>();
  std::int64_t now = at("2026-12-05T12:00:00");

  explicit GateFixture(const std::string& budgets) : l(load(kSettings + budgets)) {
    EXPECT_TRUE(l.budgets) << l.error.str();
    gate = std::make_unique<Gate>(now - 3600);
    gate->set_budgets(l.budgets, l.policy);
    ledger->snapshot = now - 60;
    ledger->default_account["alice"] = "ml";
    ledger->accounts["alice"] = {"ml"};
  }
  LedgerEntry& entry(const std::string& name, double used, double committed = 0, double liens = 0) {
    const Budget& b = l.budgets->list[l.budgets->find(name)];
    LedgerEntry& e = ledger->entries[name];
    e.identity = b.identity();
    e.window = window_at(b.period, ledger->snapshot);
    e.used = used, e.committed = committed, e.liens = liens;
    return e;
  }
  void publish() {
    ledger->snapshot_ms = ledger->snapshot * 1000;
    gate->set_ledger(ledger, "");
  }
  Verdict judge(double gpu_hours, const std::string& partition = "od", bool record = true, int gpus = 8, int minutes = 60) {
    Charge c{"ml", "alice", partition, gpu_hours, gpus, minutes, 1};
    return gate->judge(c, now * 1000, record);
  }
};

TEST(BudgetGate, AcceptsUntilTheNextJobWouldPassTheBudgetAndSaysWhatFits) {
  GateFixture g("[budget ml]\naccount = ml\ngpu_hours = 100\nperiod = month\n");
  g.entry("ml", 50, 10, 20);   // 80 of 100 held
  g.publish();
  auto v = g.judge(8);          // -> 88: warn (80%)
  EXPECT_EQ(v.outcome, Outcome::warn);
  EXPECT_NE(v.message().find("this job brings it to 88%"), std::string::npos) << v.message();
  EXPECT_NE(v.message().find("resets 2027-01-01T00:00:00Z"), std::string::npos) << v.message();
  v = g.judge(8);               // accepted before: 96
  EXPECT_EQ(v.outcome, Outcome::warn);
  v = g.judge(8);               // 104 > 100: refused, nothing recorded
  EXPECT_EQ(v.outcome, Outcome::reject);
  EXPECT_EQ(v.ticket, 0u);
  const std::string m = v.message();
  EXPECT_NE(m.find("this job (8 GPUs x 1:00:00, 8.00 GPU-hours) does not fit"), std::string::npos) << m;
  EXPECT_NE(m.find("used 50.00"), std::string::npos) << m;
  EXPECT_NE(m.find("committed 10.00 by 0 running job(s), 20.00 held by 0 pending job(s), 16.00 accepted since the last sync"),
            std::string::npos) << m;
  EXPECT_NE(m.find("leave 4.00 GPU-hours"), std::string::npos) << m;
  EXPECT_NE(m.find("Fits now: --time=0:30:00 with 8 GPUs, or --gpus=4 for 1:00:00"), std::string::npos) << m;
  EXPECT_EQ(g.judge(4).outcome, Outcome::warn);   // exactly 100%: fits
}

TEST(BudgetGate, ANewLedgerReplacesWhatItCountedButKeepsLaterAcceptances) {
  GateFixture g("[budget ml]\naccount = ml\ngpu_hours = 100\nactions = 100% reject\n");
  g.entry("ml", 0);
  g.publish();
  EXPECT_EQ(g.judge(60).outcome, Outcome::pass);
  EXPECT_EQ(g.judge(50).outcome, Outcome::reject);   // 60 accepted since the snapshot count
  // The next sync counted the 60 (as a pending lien) at a snapshot after the acceptance.
  g.ledger = std::make_shared<Ledger>(*g.ledger);
  g.ledger->snapshot = g.now + 1;
  g.entry("ml", 0, 0, 60);
  g.publish();
  EXPECT_EQ(g.judge(40, "od", true).outcome, Outcome::pass);   // 60 + 40: not counted twice
  // An acceptance after a ledger's snapshot stays until a later one counts it.
  g.ledger = std::make_shared<Ledger>(*g.ledger);
  g.ledger->snapshot = g.now;
  g.entry("ml", 0, 0, 60);
  g.ledger->snapshot_ms = g.now * 1000 - 1;
  g.gate->set_ledger(g.ledger, "");
  EXPECT_EQ(g.judge(1, "od", false).outcome, Outcome::reject);   // 60 + 40 + 1
}

TEST(BudgetGate, ThePeriodRollsOverWithoutASync) {
  GateFixture g("[budget ml]\naccount = ml\ngpu_hours = 10\nperiod = day\nstart = 2026-12-05T12:00:30\n");
  g.entry("ml", 9, 1, 0);   // window ends at 12:00:30
  g.publish();
  EXPECT_EQ(g.judge(2, "od", false).outcome, Outcome::reject);
  g.now += 60;                                  // past the boundary, same ledger
  auto v = g.judge(2, "od", false);
  EXPECT_EQ(v.outcome, Outcome::pass) << v.message();   // used restarts; the commitment stays
  EXPECT_EQ(g.judge(9.5, "od", false).outcome, Outcome::reject);   // 1 committed + 9.5 > 10
}

TEST(BudgetGate, StaleMissingOrOlderThanTheRestartLedgerFailsAsConfigured) {
  for (bool open : {false, true}) {
    GateFixture g(std::string(open ? "on_stale_ledger = open\n" : "") + "[budget ml]\naccount = ml\ngpu_hours = 10\n");
    auto v = g.judge(1);
    ASSERT_EQ(v.findings.size(), 1u);
    EXPECT_TRUE(v.findings[0].unchecked);
    EXPECT_EQ(v.outcome, open ? Outcome::pass : Outcome::reject);
    EXPECT_NE(v.findings[0].message.find(open ? "accepted unchecked (on_stale_ledger = open)"
                                              : "refused until it is fresh (on_stale_ledger = closed)"),
              std::string::npos) << v.findings[0].message;
    g.entry("ml", 0);
    g.publish();
    EXPECT_EQ(g.judge(1).outcome, Outcome::pass);
    g.now += 16 * 60;   // older than ledger_max_age (15m)
    v = g.judge(1);
    EXPECT_EQ(v.outcome, open ? Outcome::pass : Outcome::reject);
    EXPECT_NE(v.findings.at(0).message.find("the budget ledger is 17 min old"), std::string::npos) << v.findings[0].message;
    // A restart after the snapshot: the ledger cannot know what was accepted in between.
    Gate restarted(g.ledger->snapshot + 10);
    restarted.set_budgets(g.l.budgets, g.l.policy);
    restarted.set_ledger(g.ledger, "");
    EXPECT_NE(restarted.ledger_problem(g.ledger->snapshot + 20).find("predates slurmctld's start"), std::string::npos);
  }
}

TEST(BudgetGate, AChangedBudgetIsUncheckedUntilTheNextSync) {
  GateFixture g("[budget ml]\naccount = ml\ngpu_hours = 10\n");
  g.entry("ml", 0).identity = "something else";
  g.publish();
  auto v = g.judge(1);
  EXPECT_EQ(v.outcome, Outcome::reject);
  EXPECT_NE(v.message().find("has not counted budget ml"), std::string::npos) << v.message();
}

TEST(BudgetGate, ShadowBudgetsJudgeButNeverAct) {
  GateFixture g("[budget ml]\naccount = ml\ngpu_hours = 10\nmode = shadow\n");
  g.entry("ml", 9);
  g.publish();
  auto v = g.judge(5);
  EXPECT_EQ(v.outcome, Outcome::pass);
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.findings[0].outcome, Outcome::reject);
  EXPECT_TRUE(v.findings[0].shadow);
  EXPECT_EQ(v.message(), "");
  EXPECT_NE(v.ticket, 0u);   // the shadow numbers follow what was really accepted
}

TEST(BudgetGate, DollarBudgetsPriceSpotAsSpotAndSuggestIt) {
  GateFixture g("[budget d]\naccount = ml\ndollars = 100\nactions = 100% reject\n");
  g.entry("d", 60);
  g.publish();
  // 16 GPU-hours on demand = $65.54: does not fit $40; on spot $19.66 does.
  auto v = g.judge(16, "od", false, 16, 60);
  ASSERT_EQ(v.outcome, Outcome::reject);
  EXPECT_NE(v.message().find("$65.54"), std::string::npos) << v.message();
  EXPECT_NE(v.message().find("--partition=spot ($19.66 at spot prices)"), std::string::npos) << v.message();
  v = g.judge(16, "spot", true, 16, 60);
  EXPECT_EQ(v.outcome, Outcome::pass) << v.message();
}

TEST(BudgetGate, MoveSendsTheJobElsewhereAndGraceRaisesTheBar) {
  GateFixture g("[budget ml]\naccount = ml\ngpu_hours = 100\nactions = 90% move spot, 100% reject\ngrace = 0.1\n"
                "partitions = od\n");
  g.entry("ml", 85);
  g.publish();
  auto v = g.judge(10);   // 95: past 90% + 10% grace? no (100): pass
  EXPECT_EQ(v.outcome, Outcome::pass);
  v = g.judge(10, "od", false);   // 105 > 100: move (reject only past 110)
  EXPECT_EQ(v.outcome, Outcome::move);
  EXPECT_EQ(v.move_to, "spot");
  EXPECT_EQ(g.judge(10, "spot", true, 8, 60).outcome, Outcome::pass);   // spot is not counted
  EXPECT_EQ(g.judge(20, "od", false).outcome, Outcome::reject);         // 115 > 110
}

TEST(BudgetGate, RetractTakesBackAHetComponentAndAccountsResolveLikeSlurmctld) {
  GateFixture g("[budget ml]\naccount = ml\ngpu_hours = 10\nactions = 100% reject\n");
  g.entry("ml", 0);
  g.publish();
  auto first = g.judge(6);
  EXPECT_EQ(g.judge(6, "od", false).outcome, Outcome::reject);
  g.gate->retract(first.ticket);
  EXPECT_EQ(g.judge(6, "od", false).outcome, Outcome::pass);
  EXPECT_EQ(effective_account(*g.ledger, "alice", "ML"), "ml");
  EXPECT_EQ(effective_account(*g.ledger, "alice", "other"), "ml");   // not hers: her default
  EXPECT_EQ(effective_account(*g.ledger, "alice", ""), "ml");
  EXPECT_EQ(effective_account(*g.ledger, "newuser", "cv"), "cv");     // no association at all
  EXPECT_EQ(effective_account(*g.ledger, "newuser", ""), "");
  // An account the ledger cannot name could be ml's: refused while the mode is closed.
  Charge unknown{"", "newuser", "od", 1, 1, 60, 1};
  EXPECT_EQ(g.gate->judge(unknown, g.now * 1000, false).outcome, Outcome::reject);
}

TEST(BudgetGate, RangesCountOnlyInsideTheirDates) {
  GateFixture g("[budget r]\naccount = ml\ngpu_hours = 1\nperiod = 2026-12-06..2026-12-07\n");
  g.entry("r", 0);
  g.publish();
  // Not begun yet, but a job submitted (held) now may be released and run inside it (issue 36,
  // class 6): judged.
  EXPECT_EQ(g.judge(5).outcome, Outcome::reject);
  // After its end it counts nothing.
  g.now = at("2026-12-08T00:00:00");
  g.ledger->snapshot = g.now - 60;
  g.publish();
  EXPECT_TRUE(g.judge(5).findings.empty());
}

}  // namespace
}  // namespace scaleguard::budget

namespace scaleguard::budget {
namespace {

TEST(BudgetGate, LowerSyncRaiseIsChargedAgainstTheLedgersViewOfTheJob) {
  // Issue 36, class 2: the job's record only grows (60), the ledger counted it at 10 after the
  // user lowered it: raising it back costs 50, not 60 - 60 = 0.
  GateFixture g("[budget ml]\naccount = ml\ngpu_hours = 100\nactions = 100% reject\n");
  g.entry("ml", 45, 0, 60);
  g.ledger->job_gpu_hours["sg-1"] = 60;
  g.publish();
  Charge lower{"ml", "alice", "od", 10, 8, 75, 1};
  lower.update = true, lower.prior_account = "ml", lower.prior_partition = "od", lower.prior_gpu_hours = 60;
  lower.prior_record = "sg-1", lower.record = "sg-2";
  EXPECT_EQ(g.gate->judge(lower, g.now * 1000, true).outcome, Outcome::pass);
  // Raised before any sync: the 60 is still held, nothing more to charge.
  Charge raise{"ml", "alice", "od", 60, 8, 450, 1};
  raise.update = true, raise.prior_account = "ml", raise.prior_partition = "od", raise.prior_gpu_hours = 60;
  raise.prior_record = "sg-2", raise.record = "sg-3";
  EXPECT_EQ(g.gate->judge(raise, g.now * 1000, false).outcome, Outcome::pass);
  // The sync counts the lowered job: 45 + 10 held; the raise now adds 50: 105 > 100.
  g.now += 120;
  g.ledger = std::make_shared<Ledger>(*g.ledger);
  g.ledger->snapshot = g.now - 60;
  g.entry("ml", 45, 0, 10);
  g.ledger->job_gpu_hours = {{"sg-2", 10}};
  g.publish();
  const Verdict v = g.gate->judge(raise, g.now * 1000, true);
  EXPECT_EQ(v.outcome, Outcome::reject) << v.message();
  EXPECT_NE(v.message().find("50.00 GPU-hours more"), std::string::npos) << v.message();
  // A job the ledger does not know is charged against its record (the old rule).
  raise.prior_record = "sg-unknown";
  EXPECT_EQ(g.gate->judge(raise, g.now * 1000, false).outcome, Outcome::pass);
}

}  // namespace
}  // namespace scaleguard::budget

namespace scaleguard::budget {
namespace {

TEST(BudgetGate, ABudgetTheSyncCouldNotCountFailsAsConfiguredAndOnlyThatOne) {
  // Issue 36, class 8: a line the sync could not read marks the budgets it could touch.
  GateFixture g("[budget ml]\naccount = ml\ngpu_hours = 100\n[budget al]\nuser = alice\ngpu_hours = 100\n");
  g.entry("ml", 0).unusable = "squeue line 7: unreadable job request";
  g.entry("al", 0);
  g.publish();
  const Verdict v = g.judge(1);
  EXPECT_EQ(v.outcome, Outcome::reject);   // on_stale_ledger = closed (the default)
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.findings[0].budget, "ml");
  EXPECT_TRUE(v.findings[0].unchecked);
  EXPECT_NE(v.message().find("the last sync could not count budget ml: squeue line 7"), std::string::npos) << v.message();
}

}  // namespace
}  // namespace scaleguard::budget

namespace scaleguard::budget {
namespace {

// Issue 40: the tightest of every enclosing budget decides; the refusal names the parent's
// budget and the sub-account. An account the ledger's tree lacks (new since the sync) could be
// under any account budget: the fail mode.
TEST(BudgetGate, AParentAccountsBudgetRefusesASubAccountsJob) {
  GateFixture g("[budget inst]\naccount = inst\ngpu_hours = 10\nactions = 100% reject\n"
                "[budget proj]\naccount = proj\ngpu_hours = 1000\nactions = 100% reject\n");
  g.ledger->account_parents = {{"root", {}}, {"inst", {"root"}}, {"proj", {"inst"}}, {"other", {"root"}}};
  g.ledger->accounts["alice"] = {"proj", "other"};
  g.entry("inst", 8);
  g.entry("proj", 0);
  g.publish();
  Charge c{"proj", "alice", "od", 4, 4, 60, 1};
  auto v = g.gate->judge(c, g.now * 1000, false);
  EXPECT_EQ(v.outcome, Outcome::reject);
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.findings[0].budget, "inst");
  EXPECT_NE(v.message().find("budget inst (account inst, which covers sub-account proj"), std::string::npos) << v.message();
  c.gpu_hours = 2;   // 8 + 2 = 10: fits the parent
  EXPECT_EQ(g.gate->judge(c, g.now * 1000, false).outcome, Outcome::pass);
  c.account = "other", c.gpu_hours = 4;   // a sibling of inst: not under it
  EXPECT_EQ(g.gate->judge(c, g.now * 1000, false).outcome, Outcome::pass);
  c.account = "newproj";
  g.ledger->accounts["alice"].push_back("newproj");
  g.publish();
  v = g.gate->judge(c, g.now * 1000, false);
  EXPECT_EQ(v.outcome, Outcome::reject);
  EXPECT_NE(v.message().find("not in the ledger's account tree"), std::string::npos) << v.message();
}

TEST(BudgetGate, AnUpdateWhileARequeuedJobWaitsDoesNotMakeItsNextRunFree) {
  // Review of issue 36 class 4: the ledger (before the requeue) counts the job running, 60 of
  // 100 committed, 30 more accepted since. The owner requeues it and updates it while it waits
  // (nothing grows): the Gate's record of that update holds the old run's 60, which is not a
  // lien for the new run. The new run is charged whole: 60 + 30 + 60 > 100.
  GateFixture g("[budget ml]\naccount = ml\ngpu_hours = 100\nactions = 100% reject\n");
  g.entry("ml", 0, 60, 0);
  g.ledger->job_gpu_hours["sg-1"] = 60;
  g.publish();
  EXPECT_EQ(g.judge(30).outcome, Outcome::pass);
  const std::int64_t requeued_ms = g.now * 1000 + 1000;
  Charge update{"ml", "alice", "od", 60, 8, 450, 1};
  update.update = true, update.prior_account = "ml", update.prior_partition = "od", update.prior_gpu_hours = 60;
  update.prior_record = "sg-1", update.record = "sg-2";
  EXPECT_EQ(g.gate->judge(update, requeued_ms + 1000, true).outcome, Outcome::pass);
  Charge rerun{"ml", "alice", "od", 60, 8, 450, 1};
  rerun.rerun = true, rerun.record = "sg-2", rerun.requeued_ms = requeued_ms;
  const Verdict v = g.gate->judge(rerun, requeued_ms + 2000, false);
  EXPECT_EQ(v.outcome, Outcome::reject) << v.message();
  // A ledger synced after the requeue counts the waiting job's lien (60): an update then carries
  // it, and the run adds nothing (60 used + 60 held + 30 - the 30 accepted before it: fits at 90).
  g.ledger = std::make_shared<Ledger>(*g.ledger);
  g.ledger->snapshot = g.now + 3;
  g.entry("ml", 0, 0, 60 + 30);
  g.ledger->job_gpu_hours = {{"sg-2", 60}};
  g.publish();
  update.prior_record = "sg-2", update.record = "sg-3";
  EXPECT_EQ(g.gate->judge(update, g.ledger->snapshot * 1000 + 500, true).outcome, Outcome::pass);
  rerun.record = "sg-3";
  EXPECT_EQ(g.gate->judge(rerun, g.ledger->snapshot * 1000 + 1000, false).outcome, Outcome::pass);
}

}  // namespace
}  // namespace scaleguard::budget
