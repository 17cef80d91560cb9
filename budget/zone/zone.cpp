// Zoned budget periods (budget_zone.h) with Howard Hinnant's date/tz: the calendar (months,
// their lengths, days) in date.h, the wall clock of a zone and its daylight saving in tz.h over
// the OS's tz database. A period starts at the same wall-clock time each day, week, month or
// quarter; the instant that is follows the zone's offset on that day.
#include "scaleguard/budget_zone.h"

#include <date/date.h>
#include <date/tz.h>

#include <chrono>
#include <exception>
#include <string>

namespace scaleguard::budget {
namespace {

using std::chrono::seconds;

constexpr std::int64_t kDay = 86400;
constexpr std::size_t kMaxBoundaries = 1000;   // the ledger takes 1024 (a day budget over 366 days: 370)

std::int64_t floor_div(std::int64_t a, std::int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

class Zoned {
 public:
  Zoned(const Period& p, const date::time_zone* tz) : p_(p), tz_(tz) {}

  // The wall-clock start of the k-th period from the anchor (k may be negative).
  date::local_seconds local_start(std::int64_t k) const {
    const date::local_seconds anchor{seconds{p_.anchor}};
    if (p_.cycle == Cycle::day || p_.cycle == Cycle::week)
      return anchor + date::days{k * (p_.cycle == Cycle::week ? 7 : 1)};
    // Months and quarters: the anchor's day of the month (the month's last day when it is
    // shorter) at the anchor's time of day.
    const auto day = date::floor<date::days>(anchor);
    const date::year_month_day ymd{day};
    const date::year_month ym = date::year_month{ymd.year(), ymd.month()} +
                                date::months{k * (p_.cycle == Cycle::quarter ? 3 : 1)};
    const date::day last = (ym / date::last).day();
    return date::local_days{ym / (ymd.day() < last ? ymd.day() : last)} + (anchor - day);
  }

  // The instant the k-th period starts. A wall-clock time the zone skips (spring forward)
  // starts the period when the clock jumps past it; one it repeats (fall back), at its first
  // occurrence.
  std::int64_t start(std::int64_t k) const {
    return tz_->to_sys(local_start(k), date::choose::earliest).time_since_epoch().count();
  }

  // The index of the period containing t: estimated on the wall clock, then checked against
  // the instants (a period whose start the zone skipped has none of its own).
  std::int64_t index_at(std::int64_t t) const {
    const date::local_seconds local = tz_->to_local(date::sys_seconds{seconds{t}});
    std::int64_t k = 0;
    if (p_.cycle == Cycle::day || p_.cycle == Cycle::week) {
      k = floor_div(local.time_since_epoch().count() - p_.anchor, p_.cycle == Cycle::week ? 7 * kDay : kDay);
    } else {
      const date::year_month_day a{date::floor<date::days>(date::local_seconds{seconds{p_.anchor}})};
      const date::year_month_day c{date::floor<date::days>(local)};
      const std::int64_t months = (int(c.year()) - int(a.year())) * 12LL +
                                  (static_cast<int>(unsigned(c.month())) - static_cast<int>(unsigned(a.month())));
      k = floor_div(months, p_.cycle == Cycle::quarter ? 3 : 1);
    }
    for (int i = 0; i < 64 && start(k) > t; ++i) --k;
    for (int i = 0; i < 64 && start(k + 1) <= t; ++i) ++k;
    return k;
  }

  Boundary boundary(std::int64_t k) const {
    const std::int64_t t = start(k);
    const auto info = tz_->get_info(date::sys_seconds{seconds{t}});
    return {t, static_cast<int>(info.offset.count())};
  }

 private:
  const Period& p_;
  const date::time_zone* tz_;
};

Result<const date::time_zone*> zone_of(const Period& p) {
  if (p.zone.empty() || p.cycle == Cycle::range)
    return Error{"not a zoned period", "", 0, "timezone", "a day, week, month or quarter with a timezone"};
  try {
    return date::locate_zone(p.zone);
  } catch (const std::exception& e) {
    return Error{"time zone '" + p.zone + "' is not in the time zone database (" + e.what() + ")", "", 0, "timezone",
                 "an IANA name as in /usr/share/zoneinfo, e.g. Europe/Berlin or America/New_York (package tzdata)"};
  }
}

}  // namespace

Result<Window> zoned_window_at(const Period& period, std::int64_t t) {
  auto tz = zone_of(period);
  if (!tz) return tz.error();
  try {
    const Zoned z(period, *tz);
    const std::int64_t k = z.index_at(t);
    Window w{z.start(k), z.start(k + 1)};
    // A period the zone skipped entirely (its start and the next's are the same instant).
    for (int i = 0; i < 64 && w.end <= w.start; ++i) w.end = z.start(k + 2 + i);
    return w;
  } catch (const std::exception& e) {
    return Error{std::string("time zone ") + period.zone + ": " + e.what(), "", 0, "timezone", ""};
  }
}

Result<std::vector<Boundary>> zoned_boundaries(const Period& period, std::int64_t from, std::int64_t to) {
  auto tz = zone_of(period);
  if (!tz) return tz.error();
  try {
    const Zoned z(period, *tz);
    std::vector<Boundary> out;
    // From the period before the one containing `from` (carry-over counts it) to the second
    // start after `to`.
    int after = 0;
    const std::int64_t first = z.index_at(from) - 1;
    for (std::int64_t k = first; after < 2 && k - first < static_cast<std::int64_t>(2 * kMaxBoundaries) && out.size() < kMaxBoundaries; ++k) {
      const Boundary b = z.boundary(k);
      if (!out.empty() && b.t <= out.back().t) continue;   // a skipped period: no start of its own
      out.push_back(b);
      if (b.t > to) ++after;
    }
    return out;
  } catch (const std::exception& e) {
    return Error{std::string("time zone ") + period.zone + ": " + e.what(), "", 0, "timezone", ""};
  }
}

Result<std::shared_ptr<const Budgets>> with_zone_boundaries(const Budgets& budgets, const std::string& policy_path,
                                                            std::int64_t from, std::int64_t to) {
  auto out = std::make_shared<Budgets>(budgets);
  for (auto& b : out->list) {
    if (b.period.zone.empty() || b.period.cycle == Cycle::range) continue;
    auto list = zoned_boundaries(b.period, from, to);
    if (!list) {
      Error e = list.error();
      e.file = policy_path, e.line = b.line, e.field = "[budget " + b.name + "] timezone";
      return e;
    }
    b.period.boundaries = std::move(list).value();
  }
  return std::shared_ptr<const Budgets>(std::move(out));
}

}  // namespace scaleguard::budget
