// Budget periods and the times budgets are written in. Calendar arithmetic on a proleptic
// Gregorian calendar in a fixed UTC offset: no time zone database, so slurmctld and the sync
// command agree whatever TZ they run under. A zoned period (Period::zone) is a list of
// boundaries here: the tz database's arithmetic is budget/zone's, which slurmctld never links.
#include <algorithm>
#include <cstdio>
#include <cctype>
#include <cstdlib>

#include "scaleguard/budget.h"

namespace scaleguard::budget {
namespace {

constexpr std::int64_t kDay = 86400;

struct Civil {
  std::int64_t year = 1970;
  int month = 1, day = 1;     // 1-based
  int second_of_day = 0;
};

// Days since 1970-01-01 of a civil date (H. Hinnant's days_from_civil).
std::int64_t days_from_civil(std::int64_t y, int m, int d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const std::int64_t yoe = y - era * 400;
  const std::int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const std::int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

Civil civil_from_unix(std::int64_t t) {
  std::int64_t days = t >= 0 ? t / kDay : -((-t + kDay - 1) / kDay);
  Civil c;
  c.second_of_day = static_cast<int>(t - days * kDay);
  days += 719468;
  const std::int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  const std::int64_t doe = days - era * 146097;
  const std::int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const std::int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const std::int64_t mp = (5 * doy + 2) / 153;
  c.day = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  c.month = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  c.year = yoe + era * 400 + (c.month <= 2);
  return c;
}

int days_in_month(std::int64_t y, int m) {
  static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : days[m - 1];
}

// The start of the k-th calendar period after the anchor (k may be negative): the anchor's
// day of month (the month's last day when it is shorter) and time of day, `months` apart.
std::int64_t calendar_start(const Period& p, int months, std::int64_t k) {
  const Civil a = civil_from_unix(p.anchor + p.utc_offset_s);
  std::int64_t index = (a.year * 12 + (a.month - 1)) + k * months;
  const std::int64_t y = index >= 0 ? index / 12 : -((-index + 11) / 12);
  const int m = static_cast<int>(index - y * 12) + 1;
  const int d = a.day < days_in_month(y, m) ? a.day : days_in_month(y, m);
  return days_from_civil(y, m, d) * kDay + a.second_of_day - p.utc_offset_s;
}

int months_of(Cycle c) { return c == Cycle::quarter ? 3 : 1; }
std::int64_t length_of(Cycle c) { return c == Cycle::week ? 7 * kDay : kDay; }

std::int64_t floor_div(std::int64_t a, std::int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Reads exactly `n` digits at text[*i].
bool digits(const std::string& text, std::size_t* i, int n, int* out) {
  if (*i + n > text.size()) return false;
  int v = 0;
  for (int k = 0; k < n; ++k) {
    const char c = text[*i + k];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *i += n;
  *out = v;
  return true;
}

}  // namespace

Window window_in(const std::vector<Boundary>& b, std::int64_t t, int* start_offset_s, int* end_offset_s) {
  // The last boundary at or before t, and the one after it.
  const auto after = std::upper_bound(b.begin(), b.end(), t, [](std::int64_t v, const Boundary& x) { return v < x.t; });
  if (after == b.begin() || after == b.end()) return {0, 0};
  const auto start = std::prev(after);
  if (start_offset_s) *start_offset_s = start->offset_s;
  if (end_offset_s) *end_offset_s = after->offset_s;
  return {start->t, after->t};
}

int offset_at(const Period& p, std::int64_t t) {
  if (p.zone.empty()) return p.utc_offset_s;
  const auto it = std::lower_bound(p.boundaries.begin(), p.boundaries.end(), t,
                                   [](const Boundary& x, std::int64_t v) { return x.t < v; });
  return it != p.boundaries.end() && it->t == t ? it->offset_s : 0;
}

Window window_at(const Period& p, std::int64_t t) {
  if (!p.zone.empty() && p.cycle != Cycle::range) return window_in(p.boundaries, t);
  switch (p.cycle) {
    case Cycle::range: return {p.anchor, p.range_end};
    case Cycle::day:
    case Cycle::week: {
      const std::int64_t len = length_of(p.cycle);
      const std::int64_t start = p.anchor + floor_div(t - p.anchor, len) * len;
      return {start, start + len};
    }
    case Cycle::month:
    case Cycle::quarter: {
      const int months = months_of(p.cycle);
      const Civil a = civil_from_unix(p.anchor + p.utc_offset_s), c = civil_from_unix(t + p.utc_offset_s);
      std::int64_t k = floor_div((c.year - a.year) * 12 + (c.month - a.month), months);
      while (calendar_start(p, months, k) > t) --k;
      while (calendar_start(p, months, k + 1) <= t) ++k;
      return {calendar_start(p, months, k), calendar_start(p, months, k + 1)};
    }
  }
  return {t, t};
}

Window next_window(const Period& p, const Window& w) {
  return p.cycle == Cycle::range ? w : window_at(p, w.end);
}

Window previous_window(const Period& p, const Window& w) {
  return p.cycle == Cycle::range ? w : window_at(p, w.start - 1);
}

bool in_force(const Period& p, std::int64_t t) {
  return p.cycle != Cycle::range || (t >= p.anchor && t < p.range_end);
}

Result<std::int64_t> parse_instant(const std::string& text, int* offset_s) {
  const Error bad{"'" + text + "' is not a time", "", 0, "",
                  "YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS], UTC unless followed by Z or +HH:MM"};
  std::size_t i = 0;
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  if (!digits(text, &i, 4, &y) || i >= text.size() || text[i++] != '-' || !digits(text, &i, 2, &mo) ||
      i >= text.size() || text[i++] != '-' || !digits(text, &i, 2, &d))
    return bad;
  if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo)) return bad;
  if (i < text.size() && (text[i] == 'T' || text[i] == ' ')) {
    ++i;
    if (!digits(text, &i, 2, &h) || i >= text.size() || text[i++] != ':' || !digits(text, &i, 2, &mi)) return bad;
    if (i < text.size() && text[i] == ':' && (++i, !digits(text, &i, 2, &s))) return bad;
    if (h > 23 || mi > 59 || s > 59) return bad;
  }
  int offset = 0;
  if (i < text.size() && (text[i] == 'Z' || text[i] == 'z')) {
    ++i;
  } else if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
    const int sign = text[i++] == '-' ? -1 : 1;
    int oh = 0, om = 0;
    if (!digits(text, &i, 2, &oh) || i >= text.size() || text[i++] != ':' || !digits(text, &i, 2, &om) ||
        oh > 14 || om > 59)
      return bad;
    offset = sign * (oh * 3600 + om * 60);
  }
  if (i != text.size()) return bad;
  if (offset_s) *offset_s = offset;
  return days_from_civil(y, mo, d) * kDay + h * 3600 + mi * 60 + s - offset;
}

bool names_offset(const std::string& text) {
  const auto time = text.find_first_of("Tt ");
  if (time == std::string::npos || text.empty()) return false;
  if (text.back() == 'Z' || text.back() == 'z') return true;
  return text.size() >= 6 && text.size() - 6 > time && (text[text.size() - 6] == '+' || text[text.size() - 6] == '-');
}

bool zone_name(const std::string& text, std::string* zone) {
  if (text.empty() || text.size() > 64 || !std::isalpha(static_cast<unsigned char>(text[0]))) return false;
  char previous = '/';
  for (unsigned char c : text) {
    if (c == '/' && previous == '/') return false;   // no empty part
    if (!std::isalnum(c) && c != '/' && c != '_' && c != '+' && c != '-') return false;
    previous = static_cast<char>(c);
  }
  if (previous == '/') return false;
  *zone = text == "UTC" || text == "Etc/UTC" ? "" : text;
  return true;
}

std::string format_instant(std::int64_t t, int offset_s) {
  const Civil c = civil_from_unix(t + offset_s);
  char buf[48];
  const int sod = c.second_of_day;
  if (offset_s == 0) {
    std::snprintf(buf, sizeof buf, "%04lld-%02d-%02dT%02d:%02d:%02dZ", static_cast<long long>(c.year), c.month,
                  c.day, sod / 3600, sod / 60 % 60, sod % 60);
  } else {
    const int a = std::abs(offset_s);
    std::snprintf(buf, sizeof buf, "%04lld-%02d-%02dT%02d:%02d:%02d%c%02d:%02d", static_cast<long long>(c.year),
                  c.month, c.day, sod / 3600, sod / 60 % 60, sod % 60, offset_s < 0 ? '-' : '+', a / 3600,
                  a / 60 % 60);
  }
  return buf;
}

}  // namespace scaleguard::budget
