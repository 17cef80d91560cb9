// Value axes of the report's charts: ticks at "nice numbers" (steps of 1, 2 or 5 x 10^k)
// from 0 to the first tick at or above the largest value, each labelled with as many
// decimals as the step needs (never two labels alike: 0.005 steps read 0.005, 0.010, ...)
// and, from 10,000 up, with an SI suffix (2k, 1.5M); below that with thousands separators.
#pragma once
#include <string>
#include <vector>

namespace scaleguard::report {

struct AxisTicks {
  double step = 1;                   // 1, 2 or 5 x 10^k
  int intervals = 1;                 // ticks at 0, step, ..., intervals x step
  std::vector<std::string> labels;   // intervals + 1 of them, from 0 up
  double top() const { return step * intervals; }
};

// About `target` intervals (never more) covering [0, max]; max <= 0 or not finite: 0..1.
AxisTicks nice_ticks(double max, int target = 5);

// One tick's label on an axis with this step and top (what nice_ticks writes).
std::string tick_label(double value, double step, double top);

}  // namespace scaleguard::report
