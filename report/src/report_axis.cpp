// Nice-number axis ticks (report_axis.h). Labels are derived from the step, not from the
// value alone: rounding each value to a fixed two decimals gave a small window's axis
// "0.01, 0.01, 0.01, 0.00".
#include "scaleguard/report_axis.h"

#include <cmath>
#include <cstdio>
#include <string>

namespace scaleguard::report {
namespace {

// Smallest 1/2/5 x 10^k not below v.
double nice_step(double v) {
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * p >= v * (1 - 1e-9)) return m * p;
  return 10 * p;
}

// Decimals that tell multiples of a 1/2/5 x 10^k step apart: 0.5 -> 1, 0.02 -> 2, 5 -> 0.
int decimals_for(double step) {
  const int d = -static_cast<int>(std::floor(std::log10(step) + 1e-9));
  return d > 0 ? d : 0;
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// "1234567.5" -> "1,234,567.5"
std::string thousands(const std::string& s) {
  const std::size_t dot = s.find('.');
  const std::size_t int_end = dot == std::string::npos ? s.size() : dot;
  std::string out;
  for (std::size_t i = 0; i < int_end; ++i) {
    if (i > 0 && (int_end - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out + s.substr(int_end);
}

}  // namespace

std::string tick_label(double value, double step, double top) {
  if (value == 0) return "0";
  if (top >= 1e4) {
    struct Unit { double scale; const char* suffix; };
    constexpr Unit units[] = {{1e15, "P"}, {1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}};
    for (const auto& u : units)
      if (top >= u.scale) return fixed(value / u.scale, decimals_for(step / u.scale)) + u.suffix;
  }
  return thousands(fixed(value, decimals_for(step)));
}

AxisTicks nice_ticks(double max, int target) {
  AxisTicks t;
  if (!(max > 0) || !std::isfinite(max)) max = 1;
  if (target < 1) target = 1;
  t.step = nice_step(max / target);
  t.intervals = static_cast<int>(std::ceil(max / t.step - 1e-9));
  if (t.intervals < 1) t.intervals = 1;
  for (int i = 0; i <= t.intervals; ++i) t.labels.push_back(tick_label(t.step * i, t.step, t.top()));
  return t;
}

}  // namespace scaleguard::report
