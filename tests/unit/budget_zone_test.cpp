// Budget periods in an IANA time zone (issue 40 item 4): the calendar from the tz database
// (budget/zone, libdate-tz) at fixed instants around the 2026 daylight saving changes of
// Europe/Berlin (2026-03-29, 2026-10-25) and America/New_York (2026-03-08, 2026-11-01); the
// policy keys; the sync's counting and the ledger's boundaries; slurmctld's Gate, which has no
// tz database, rolling a zoned budget over from the ledger and failing over past it.
#include <gtest/gtest.h>

#include "scaleguard/budget.h"
#include "scaleguard/budget_admit.h"
#include "scaleguard/budget_ledger.h"
#include "scaleguard/budget_zone.h"
#include "test_support.h"

namespace scaleguard::budget {
namespace {

using test::TempFile;

std::int64_t at(const char* text) {
  auto t = parse_instant(text);
  EXPECT_TRUE(t.ok()) << text;
  return t.ok() ? *t : 0;
}

std::string utc(std::int64_t t) { return format_instant(t); }

Period zoned(Cycle cycle, const char* zone, const char* start = nullptr) {
  Period p;
  p.cycle = cycle;
  p.zone = zone;
  p.anchor = cycle == Cycle::week ? 4 * 86400 : 0;   // load_budgets' defaults: midnight, Mondays, the 1st
  if (start) p.anchor = at(start);                   // wall-clock time, counted like unix seconds
  return p;
}

Window window(const Period& p, const char* t) {
  auto w = zoned_window_at(p, at(t));
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().str());
  return w.ok() ? *w : Window{};
}

constexpr std::int64_t kHour = 3600;

// --- the calendar -------------------------------------------------------------------------

TEST(BudgetZone, BerlinDayOfTheSpringChangeHas23Hours) {
  const Period day = zoned(Cycle::day, "Europe/Berlin");
  Window w = window(day, "2026-03-29T12:00:00Z");
  EXPECT_EQ(utc(w.start), "2026-03-28T23:00:00Z");   // 00:00 CET
  EXPECT_EQ(utc(w.end), "2026-03-29T22:00:00Z");     // 00:00 CEST
  EXPECT_EQ(w.end - w.start, 23 * kHour);
  w = window(day, "2026-03-28T12:00:00Z");
  EXPECT_EQ(utc(w.start), "2026-03-27T23:00:00Z");
  EXPECT_EQ(w.end - w.start, 24 * kHour);
  w = window(day, "2026-03-30T12:00:00Z");
  EXPECT_EQ(utc(w.start), "2026-03-29T22:00:00Z");
  EXPECT_EQ(w.end - w.start, 24 * kHour);
  // An hour before UTC's midnight is already the next day in Berlin: usage at 23:30 UTC on the
  // 28th belongs to the 29th there (to the 28th at a fixed UTC offset).
  EXPECT_EQ(utc(window(day, "2026-03-28T23:30:00Z").start), "2026-03-28T23:00:00Z");
  EXPECT_EQ(utc(window(day, "2026-03-28T22:59:59Z").start), "2026-03-27T23:00:00Z");
}

TEST(BudgetZone, BerlinDayOfTheAutumnChangeHas25Hours) {
  const Period day = zoned(Cycle::day, "Europe/Berlin");
  const Window w = window(day, "2026-10-25T12:00:00Z");
  EXPECT_EQ(utc(w.start), "2026-10-24T22:00:00Z");   // 00:00 CEST
  EXPECT_EQ(utc(w.end), "2026-10-25T23:00:00Z");     // 00:00 CET
  EXPECT_EQ(w.end - w.start, 25 * kHour);
  // Usage a second before local midnight is the 24th's, whatever UTC's date says.
  EXPECT_EQ(utc(window(day, "2026-10-24T21:59:59Z").end), "2026-10-24T22:00:00Z");
  EXPECT_EQ(utc(window(day, "2026-10-25T23:00:00Z").start), "2026-10-25T23:00:00Z");
}

TEST(BudgetZone, BerlinMonthsAndWeeksFollowTheWallClock) {
  const Period month = zoned(Cycle::month, "Europe/Berlin");
  // April starts at 00:00 CEST: 22:00 UTC on March 31st.
  Window w = window(month, "2026-03-31T22:30:00Z");
  EXPECT_EQ(utc(w.start), "2026-03-31T22:00:00Z");
  EXPECT_EQ(utc(w.end), "2026-04-30T22:00:00Z");
  w = window(month, "2026-03-31T21:30:00Z");   // 23:30 CEST: still March
  EXPECT_EQ(utc(w.start), "2026-02-28T23:00:00Z");
  EXPECT_EQ(utc(w.end), "2026-03-31T22:00:00Z");
  EXPECT_EQ(w.end - w.start, (31 * 24 - 1) * kHour);
  const Period quarter = zoned(Cycle::quarter, "Europe/Berlin");
  w = window(quarter, "2026-11-15T00:00:00Z");
  EXPECT_EQ(utc(w.start), "2026-09-30T22:00:00Z");   // October 1st, 00:00 CEST
  EXPECT_EQ(utc(w.end), "2026-12-31T23:00:00Z");     // January 1st, 00:00 CET
  // Weeks from Monday 00:00: the one with the spring change has 167 hours, autumn's 169.
  const Period week = zoned(Cycle::week, "Europe/Berlin");
  w = window(week, "2026-03-29T12:00:00Z");   // a Sunday
  EXPECT_EQ(utc(w.start), "2026-03-22T23:00:00Z");
  EXPECT_EQ(utc(w.end), "2026-03-29T22:00:00Z");
  EXPECT_EQ(w.end - w.start, 167 * kHour);
  w = window(week, "2026-10-25T12:00:00Z");
  EXPECT_EQ(utc(w.start), "2026-10-18T22:00:00Z");
  EXPECT_EQ(w.end - w.start, 169 * kHour);
  // Sunday 23:30 in Berlin after the change is 21:30 UTC: still that week.
  EXPECT_EQ(utc(window(week, "2026-03-29T21:30:00Z").end), "2026-03-29T22:00:00Z");
}

TEST(BudgetZone, NewYorkDaysAndMonths) {
  const Period day = zoned(Cycle::day, "America/New_York");
  Window w = window(day, "2026-03-08T12:00:00Z");
  EXPECT_EQ(utc(w.start), "2026-03-08T05:00:00Z");   // 00:00 EST
  EXPECT_EQ(utc(w.end), "2026-03-09T04:00:00Z");     // 00:00 EDT
  EXPECT_EQ(w.end - w.start, 23 * kHour);
  w = window(day, "2026-11-01T12:00:00Z");
  EXPECT_EQ(utc(w.start), "2026-11-01T04:00:00Z");
  EXPECT_EQ(utc(w.end), "2026-11-02T05:00:00Z");
  EXPECT_EQ(w.end - w.start, 25 * kHour);
  // Evening usage in New York is the next day in UTC, and the same day there.
  EXPECT_EQ(utc(window(day, "2026-11-02T03:00:00Z").start), "2026-11-01T04:00:00Z");
  const Period month = zoned(Cycle::month, "America/New_York");
  w = window(month, "2026-11-15T12:00:00Z");
  EXPECT_EQ(utc(w.start), "2026-11-01T04:00:00Z");   // 00:00 EDT
  EXPECT_EQ(utc(w.end), "2026-12-01T05:00:00Z");     // 00:00 EST
  // A month on the 31st: the last day of a shorter month, at the anchor's time there.
  const Period end_of_month = zoned(Cycle::month, "America/New_York", "2026-01-31T09:00:00");
  w = window(end_of_month, "2026-03-15T12:00:00Z");
  EXPECT_EQ(utc(w.start), "2026-02-28T14:00:00Z");   // 09:00 EST
  EXPECT_EQ(utc(w.end), "2026-03-31T13:00:00Z");     // 09:00 EDT
}

TEST(BudgetZone, AStartTheClockSkipsOrRepeats) {
  // Days from 02:30 in Berlin: on 2026-03-29 the clock jumps from 02:00 to 03:00, so that
  // day starts at the jump; on 2026-10-25 02:30 happens twice, and the day starts at the first.
  const Period day = zoned(Cycle::day, "Europe/Berlin", "2026-01-01T02:30:00");
  Window w = window(day, "2026-03-29T12:00:00Z");
  EXPECT_EQ(utc(w.start), "2026-03-29T01:00:00Z");   // 03:00 CEST
  EXPECT_EQ(utc(w.end), "2026-03-30T00:30:00Z");     // 02:30 CEST
  w = window(day, "2026-10-25T12:00:00Z");
  EXPECT_EQ(utc(w.start), "2026-10-25T00:30:00Z");   // the first 02:30 (CEST)
  EXPECT_EQ(utc(w.end), "2026-10-26T01:30:00Z");     // 02:30 CET
  // The second 02:15 (01:15 UTC) is after that start: the same day.
  EXPECT_EQ(utc(window(day, "2026-10-25T01:15:00Z").start), "2026-10-25T00:30:00Z");
}

TEST(BudgetZone, BoundariesCoverThePeriodBeforeToTwoAfterWithTheirOffsets) {
  const Period day = zoned(Cycle::day, "Europe/Berlin");
  auto b = zoned_boundaries(day, at("2026-03-28T12:00:00Z"), at("2026-03-30T12:00:00Z"));
  ASSERT_TRUE(b.ok()) << b.error().str();
  std::vector<std::string> got;
  for (const auto& x : *b) got.push_back(format_instant(x.t, x.offset_s));
  EXPECT_EQ(got, (std::vector<std::string>{"2026-03-27T00:00:00+01:00", "2026-03-28T00:00:00+01:00",
                                           "2026-03-29T00:00:00+01:00", "2026-03-30T00:00:00+02:00",
                                           "2026-03-31T00:00:00+02:00", "2026-04-01T00:00:00+02:00"}));
  // The budget library answers from the list alone (what slurmctld does with the ledger's).
  Period listed = day;
  listed.boundaries = *b;
  EXPECT_EQ(window_at(listed, at("2026-03-29T12:00:00Z")).end - window_at(listed, at("2026-03-29T12:00:00Z")).start,
            23 * kHour);
  EXPECT_EQ(offset_at(listed, at("2026-03-29T22:00:00Z")), 7200);
  EXPECT_FALSE(window_at(listed, at("2026-04-01T12:00:00Z")).known());   // past the list: unknown
  EXPECT_FALSE(window_at(day, at("2026-03-29T12:00:00Z")).known());      // no list: unknown
}

TEST(BudgetZone, AZoneTheDatabaseLacksIsAnError) {
  auto w = zoned_window_at(zoned(Cycle::day, "Europe/Atlantis"), at("2026-03-29"));
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().message.find("'Europe/Atlantis' is not in the time zone database"), std::string::npos)
      << w.error().str();
}

// --- the policy ---------------------------------------------------------------------------

struct Loaded {
  std::shared_ptr<const Policy> policy;
  std::shared_ptr<const Budgets> budgets;
  Error error;
  std::string path;
};

Loaded load(const std::string& budget_text) {
  TempFile f(test::policy_text() + budget_text, "policy.ini");
  Loaded out;
  out.path = f.path();
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

const std::string kSettings = "[budgets]\nledger = /var/lib/scaleguard/budget-ledger.json\nledger_max_age = 15m\n";

TEST(BudgetZone, TimezoneKeysInTheSettingsAndPerBudget) {
  auto l = load(kSettings + "timezone = Europe/Berlin\n"
                "[budget a]\naccount = a\ngpu_hours = 1\nperiod = day\n"
                "[budget b]\naccount = b\ngpu_hours = 1\nperiod = month\ntimezone = America/New_York\nstart = 2026-01-15T06:00\n"
                "[budget c]\naccount = c\ngpu_hours = 1\nperiod = week\ntimezone = UTC\n"
                "[budget d]\naccount = d\ngpu_hours = 1\nperiod = 2026-12-01T00:00+01:00..2026-12-31T23:59+01:00\n");
  ASSERT_TRUE(l.budgets) << l.error.str();
  const auto& list = l.budgets->list;
  EXPECT_EQ(l.budgets->settings.timezone, "Europe/Berlin");
  EXPECT_EQ(list[0].period.zone, "Europe/Berlin");
  EXPECT_EQ(list[1].period.zone, "America/New_York");
  EXPECT_EQ(list[1].period.anchor, at("2026-01-15T06:00:00"));   // New York's wall clock
  EXPECT_EQ(list[2].period.zone, "");                            // UTC: the fixed offset 0
  EXPECT_EQ(list[3].period.zone, "");                            // a range: its instants
  EXPECT_NE(list[0].identity().find(";tz=Europe/Berlin"), std::string::npos);
  EXPECT_EQ(list[2].identity().find("tz="), std::string::npos);   // a UTC budget's ledger entries stay valid
  const std::string text = describe(*l.budgets, at("2026-12-05T12:00:00"));
  EXPECT_NE(text.find("per day in Europe/Berlin"), std::string::npos) << text;
  EXPECT_NE(text.find("periods at the wall clock of Europe/Berlin"), std::string::npos) << text;
  // With the tz database (policy check, the sync): the periods in the zone's time.
  auto resolved = with_zone_boundaries(*l.budgets, l.path, at("2026-12-05T12:00:00"), at("2026-12-05T12:00:00"));
  ASSERT_TRUE(resolved.ok()) << resolved.error().str();
  const std::string now = describe(**resolved, at("2026-12-05T12:00:00"));
  EXPECT_NE(now.find("per day in Europe/Berlin (now 2026-12-05T00:00:00+01:00 .. 2026-12-06T00:00:00+01:00)"),
            std::string::npos) << now;
  EXPECT_NE(now.find("per month in America/New_York (now 2026-11-15T06:00:00-05:00 .. 2026-12-15T06:00:00-05:00)"),
            std::string::npos) << now;
}

TEST(BudgetZone, MalformedZonesOffsetsUnderAZoneAndUnknownZonesAreRefused) {
  const std::string b = "[budget a]\naccount = a\ngpu_hours = 1\nperiod = day\n";
  auto l = load(kSettings + b + "timezone = Europe/../etc/passwd\n");
  ASSERT_FALSE(l.budgets);
  EXPECT_NE(l.error.str().find("is not a time zone name"), std::string::npos) << l.error.str();
  l = load(kSettings + "timezone = /etc/localtime\n" + b);
  ASSERT_FALSE(l.budgets);
  EXPECT_NE(l.error.str().find("is not a time zone name"), std::string::npos) << l.error.str();
  l = load(kSettings + b + "timezone = Europe/Berlin\nstart = 2026-01-01T06:00+01:00\n");
  ASSERT_FALSE(l.budgets);
  EXPECT_NE(l.error.str().find("names an offset, under timezone Europe/Berlin"), std::string::npos) << l.error.str();
  l = load(kSettings + "[budget r]\naccount = a\ngpu_hours = 1\nperiod = 2026-12-01..2026-12-31\ntimezone = Europe/Berlin\n");
  ASSERT_FALSE(l.budgets);
  EXPECT_NE(l.error.str().find("without the offsets of its ends"), std::string::npos) << l.error.str();
  // A name of the right shape the tz database lacks: the plugin cannot tell, the CLI can.
  l = load(kSettings + b + "timezone = Europe/Atlantis\n");
  ASSERT_TRUE(l.budgets) << l.error.str();
  auto resolved = with_zone_boundaries(*l.budgets, l.path, at("2026-12-05"), at("2026-12-05"));
  ASSERT_FALSE(resolved.ok());
  EXPECT_NE(resolved.error().str().find("[budget a] timezone: time zone 'Europe/Atlantis' is not in the time zone database"),
            std::string::npos) << resolved.error().str();
}

// --- the sync and the Gate ----------------------------------------------------------------

// Usage before and after midnight in Berlin (23:00 UTC in winter): a zoned day counts only the
// run after it; the same budget in UTC counts both.
TEST(BudgetZone, TheSyncCountsTheZonesDayAndWritesItsBoundaries) {
  const std::int64_t snapshot = at("2026-12-04T23:50:00Z");   // 00:50 on the 5th in Berlin
  const std::vector<UsedRun> runs = {
      {"1", "a", "alice", "od", 2, at("2026-12-04T22:00:00Z"), at("2026-12-04T22:30:00Z")},   // 23:00-23:30 on the 4th
      {"2", "a", "alice", "od", 2, at("2026-12-04T23:10:00Z"), at("2026-12-04T23:40:00Z")},   // 00:10-00:40 on the 5th
  };
  auto count = [&](const std::string& zone) {
    auto l = load(kSettings + "[budget a]\naccount = a\ngpu_hours = 10\nperiod = day\ntimezone = " + zone + "\n");
    EXPECT_TRUE(l.budgets) << l.error.str();
    auto resolved = with_zone_boundaries(*l.budgets, l.path, snapshot, snapshot + l.budgets->settings.max_age_s);
    EXPECT_TRUE(resolved.ok()) << resolved.error().str();
    Ledger ledger;
    ledger.snapshot = snapshot;
    EXPECT_LE(earliest_start(**resolved, snapshot), at("2026-12-04T23:00:00Z"));
    count_budgets(**resolved, *l.policy, runs, {}, snapshot, &ledger);
    return ledger.entries.at("a");
  };
  const LedgerEntry berlin = count("Europe/Berlin"), in_utc = count("UTC");
  EXPECT_EQ(utc(berlin.window.start), "2026-12-04T23:00:00Z");
  EXPECT_DOUBLE_EQ(berlin.used, 1.0);    // the run after Berlin's midnight alone
  EXPECT_EQ(utc(in_utc.window.start), "2026-12-04T00:00:00Z");
  EXPECT_DOUBLE_EQ(in_utc.used, 2.0);    // both: the 4th in UTC until 00:00 UTC
  EXPECT_TRUE(in_utc.boundaries.empty());
  // From the window's start to past the ledger's max age (15 min) and a period more.
  ASSERT_GE(berlin.boundaries.size(), 3u);
  EXPECT_EQ(berlin.boundaries.front(), (Boundary{at("2026-12-04T23:00:00Z"), 3600}));
  EXPECT_EQ(berlin.boundaries[1].t, berlin.window.end);
  // The ledger keeps them.
  Ledger l;
  l.snapshot = snapshot;
  l.entries["a"] = berlin;
  auto back = parse_ledger(format_ledger(l));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->entries.at("a").boundaries, berlin.boundaries);
  // A list out of order, or with an offset no zone has, is not a ledger.
  l.entries["a"].boundaries = {{10, 0}, {5, 0}};
  EXPECT_FALSE(parse_ledger(format_ledger(l)).ok());
  l.entries["a"].boundaries = {{10, 99999}};
  EXPECT_FALSE(parse_ledger(format_ledger(l)).ok());
}

// slurmctld: no tz database. A zoned budget rolls over at the boundary the ledger lists (in
// spring, 23 hours after the last), says when it resets in the zone's time, and past the list
// is not judged: on_stale_ledger.
TEST(BudgetZone, TheGateRollsAZonedBudgetOverFromTheLedgerAndFailsOverPastIt) {
  for (const bool open : {false, true}) {
    auto l = load(kSettings + (open ? "on_stale_ledger = open\n" : "") +
                  "[budget a]\naccount = a\ngpu_hours = 10\nperiod = day\ntimezone = Europe/Berlin\nactions = 100% reject\n");
    ASSERT_TRUE(l.budgets) << l.error.str();
    const Budget& b = l.budgets->list[0];
    EXPECT_TRUE(b.period.boundaries.empty());   // what slurmctld loads
    const std::int64_t snapshot = at("2026-03-28T22:50:00Z");   // 23:50 CET on the 28th
    auto ledger = std::make_shared<Ledger>();
    ledger->snapshot = snapshot;
    ledger->snapshot_ms = snapshot * 1000;
    LedgerEntry& e = ledger->entries["a"];
    e.identity = b.identity();
    e.window = {at("2026-03-27T23:00:00Z"), at("2026-03-28T23:00:00Z")};
    e.used = 9;
    e.boundaries = {{at("2026-03-27T23:00:00Z"), 3600}, {at("2026-03-28T23:00:00Z"), 3600},
                    {at("2026-03-29T22:00:00Z"), 7200}};
    Gate gate(snapshot - 3600);
    gate.set_budgets(l.budgets, l.policy);
    gate.set_ledger(ledger, "");
    auto judge = [&](const char* when) {
      return gate.judge(Charge{"a", "alice", "od", 2, 2, 60, 1}, at(when) * 1000, false);
    };
    // Before Berlin's midnight: 9 + 2 > 10, refused; it resets at 00:00 CET.
    Verdict v = judge("2026-03-28T22:55:00Z");
    EXPECT_EQ(v.outcome, Outcome::reject);
    EXPECT_NE(v.message().find("day in Europe/Berlin 2026-03-28T00:00:00+01:00 .. 2026-03-29T00:00:00+01:00"),
              std::string::npos) << v.message();
    EXPECT_NE(v.message().find("resets 2026-03-29T00:00:00+01:00"), std::string::npos) << v.message();
    // After it (23:00 UTC, still the 28th in UTC): a new period, used from 0, no sync needed.
    EXPECT_EQ(judge("2026-03-28T23:01:00Z").outcome, Outcome::pass);
    const Standing s = standing_of(b, &e, at("2026-03-28T23:01:00Z"), 0);
    EXPECT_TRUE(s.rolled_over);
    EXPECT_EQ(s.window.end - s.window.start, 23 * kHour);
    EXPECT_EQ(format_instant(s.window.end, s.end_offset_s), "2026-03-30T00:00:00+02:00");
    // Past the last boundary listed (a ledger that old is stale too; here a fresh one that
    // lists too few): not judged, the fail mode applies and says why.
    ledger->entries["a"].boundaries.pop_back();
    gate.set_ledger(ledger, "");
    v = judge("2026-03-28T23:01:00Z");
    ASSERT_EQ(v.findings.size(), 1u);
    EXPECT_TRUE(v.findings[0].unchecked);
    EXPECT_EQ(v.outcome, open ? Outcome::pass : Outcome::reject);
    EXPECT_NE(v.findings[0].message.find("follows the wall clock of Europe/Berlin and the ledger lists its periods only "
                                         "up to 2026-03-29T00:00:00+01:00"),
              std::string::npos) << v.findings[0].message;
    EXPECT_FALSE(gate.view(at("2026-03-28T23:01:00Z")).checked[0]);
  }
}

}  // namespace
}  // namespace scaleguard::budget
