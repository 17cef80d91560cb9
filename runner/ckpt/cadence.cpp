#include "scaleguard/ckpt_cadence.h"

#include "scaleguard/plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace scaleguard::ckpt {

Result<IntervalSpec> parse_interval(const std::string& text) {
  IntervalSpec s;
  if (text == "auto") {
    s.kind = IntervalSpec::Kind::automatic;
    return s;
  }
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  const std::string unit = end ? end : "";
  if (end == text.c_str() || !(v > 0) || !std::isfinite(v))
    return Error{"checkpoint interval '" + text + "' is not a positive number", "", 0, "ckpt-every",
                 "use N (steps), Nmin (minutes) or auto"};
  if (unit.empty() || unit == "steps") {
    if (v != std::floor(v) || v > 1e15)
      return Error{"checkpoint interval '" + text + "' must be a whole number of steps", "", 0, "ckpt-every",
                 "use N (steps), Nmin (minutes) or auto"};
    s.kind = IntervalSpec::Kind::steps;
    s.steps = static_cast<int64_t>(v);
    return s;
  }
  if (unit == "min") {
    s.kind = IntervalSpec::Kind::minutes;
    s.minutes = v;
    return s;
  }
  return Error{"checkpoint interval '" + text + "' has unknown unit '" + unit + "'", "", 0, "ckpt-every",
               "use N (steps), Nmin (minutes) or auto"};
}

double daly_interval_seconds(double c, double m) { return c <= 0 ? 0 : scaleguard::daly_interval(c, m); }

namespace {
constexpr size_t kBaselineSteps = 15;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
}  // namespace

void SaveCostMeter::step(double seconds, bool save_in_flight) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return;
  last_ = seconds;
  if (save_in_flight) {
    overlapped_.push_back(seconds);
    return;
  }
  clean_.push_back(seconds);
  if (clean_.size() > kBaselineSteps) clean_.pop_front();
}

double SaveCostMeter::baseline_step() const { return clean_.empty() ? last_ : median({clean_.begin(), clean_.end()}); }

SaveCost SaveCostMeter::take() {
  SaveCost c = cost_;
  double base = median({clean_.begin(), clean_.end()});
  if (clean_.empty() && !overlapped_.empty()) base = *std::min_element(overlapped_.begin(), overlapped_.end());
  for (double s : overlapped_) c.contention += std::max(0.0, s - base);
  c.overlapped_steps = static_cast<int>(overlapped_.size());
  overlapped_.clear();
  cost_ = SaveCost{0, 0, 0, true};
  return c;
}

IntervalClock::IntervalClock(IntervalSpec spec, double mtbf_hours, double now_seconds)
    : spec_(spec), mtbf_seconds_(mtbf_hours * 3600), last_start_(now_seconds) {}

IntervalChoice IntervalClock::choice() const {
  IntervalChoice c;
  switch (spec_.kind) {
    case IntervalSpec::Kind::steps: return c;
    case IntervalSpec::Kind::minutes: c.interval = spec_.minutes * 60; return c;
    case IntervalSpec::Kind::automatic: break;
  }
  if (cost_ < 0) return c;
  c.cost = cost_;
  c.wall = wall_;
  c.daly = daly_interval_seconds(cost_, mtbf_seconds_);
  // Daly's interval is compute time between saves; start to start adds the cost paid.
  c.interval = c.daly + c.cost;
  if (c.wall > c.interval) {  // never more often than one save takes
    c.interval = c.wall;
    c.floored = true;
  }
  return c;
}

bool IntervalClock::due(int64_t step, double now_seconds) const {
  switch (spec_.kind) {
    case IntervalSpec::Kind::steps: return spec_.steps > 0 && step > 0 && step % spec_.steps == 0;
    case IntervalSpec::Kind::minutes: return now_seconds - last_start_ >= interval_seconds();
    case IntervalSpec::Kind::automatic:
      if (in_flight_) return false;
      if (cost_ < 0) return true;  // the first check: save to measure the cost
      return now_seconds - last_start_ >= interval_seconds();
  }
  return false;
}

void IntervalClock::started(double now_seconds) {
  last_start_ = now_seconds;
  in_flight_ = true;
}

void IntervalClock::committed(double now_seconds, double cost_seconds) {
  in_flight_ = false;
  wall_ = std::max(0.0, now_seconds - last_start_);
  cost_ = std::max(0.0, cost_seconds);
}

void IntervalClock::saved(double now_seconds, double save_seconds) {
  started(now_seconds - save_seconds);
  committed(now_seconds, save_seconds);
}

namespace {
std::string seconds_text(double s) {
  char b[64];
  if (s < 1)
    std::snprintf(b, sizeof b, "%.3g ms", s * 1e3);
  else
    std::snprintf(b, sizeof b, "%.4g s", s);
  return b;
}
}  // namespace

std::string IntervalClock::explain(const SaveCost& cost, double step_seconds) const {
  const IntervalChoice c = choice();
  if (spec_.kind != IntervalSpec::Kind::automatic || cost_ < 0) return "";
  std::string line = "interval auto: next save " + seconds_text(c.interval) + " after this one started";
  if (step_seconds > 0) {
    char b[64];
    std::snprintf(b, sizeof b, " (~%.0f steps of %s)", std::floor(c.interval / step_seconds),
                  seconds_text(step_seconds).c_str());
    line += b;
  }
  char mtbf[64];
  std::snprintf(mtbf, sizeof mtbf, "%.4g h", mtbf_seconds_ / 3600);
  const std::string daly = "Daly(cost " + seconds_text(c.cost) + ", job MTBF " + mtbf + ") = " + seconds_text(c.daly);
  if (c.floored)
    line += ": one save takes " + seconds_text(c.wall) + " from start to commit, more than " + daly +
            " + cost, and saves never overlap";
  else
    line += ": " + daly + " of training + the cost";
  if (cost.async) {
    char b[160];
    std::snprintf(b, sizeof b, "; cost = stall %s + I/O contention %s over %d step%s (async)",
                  seconds_text(cost.stall).c_str(), seconds_text(cost.contention).c_str(), cost.overlapped_steps,
                  cost.overlapped_steps == 1 ? "" : "s");
    line += b;
  } else {
    line += "; cost = the save (sync)";
  }
  return line;
}

}  // namespace scaleguard::ckpt
