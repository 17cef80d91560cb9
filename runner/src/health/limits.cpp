#include "health/limits.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace scaleguard::run {

const char* section_name(Section s) {
  switch (s) {
    case Section::kStartup: return "start-up";
    case Section::kStep: return "step";
    case Section::kCheckpoint: return "checkpoint";
    case Section::kEval: return "evaluation";
    case Section::kFinish: return "finish";
    default: return "?";
  }
}

void SectionLimits::record(Section section, double seconds) {
  auto& q = times_[static_cast<int>(section)];
  q.push_back(seconds);
  while (q.size() > std::max<size_t>(1, s_.window)) q.pop_front();
}

double SectionLimits::p99(Section section) const {
  const auto& q = times_[static_cast<int>(section)];
  if (q.empty()) return 0;
  std::vector<double> v(q.begin(), q.end());
  std::sort(v.begin(), v.end());
  // Nearest rank: the smallest value with at least 99 % of the samples at or below it.
  size_t idx = static_cast<size_t>(std::ceil(0.99 * static_cast<double>(v.size()))) - 1;
  return v[std::min(idx, v.size() - 1)];
}

double SectionLimits::floor_of(Section section) const {
  switch (section) {
    case Section::kStep: return s_.step_floor_s;
    case Section::kCheckpoint: return s_.ckpt_floor_s;
    case Section::kEval: return s_.eval_floor_s;
    default: return s_.startup_s;
  }
}

double SectionLimits::limit(Section section) const {
  if (section == Section::kStartup || section == Section::kFinish) return s_.startup_s;
  // Steps: the start-up limit until enough steps are known. Checkpoints and evaluations are
  // rare: their floor alone until their first sample, then the learned limit.
  if (section == Section::kStep && samples(section) < s_.min_samples) return std::max(s_.startup_s, s_.step_floor_s);
  return std::max(floor_of(section), s_.k * p99(section));
}

std::string SectionLimits::explain(Section section) const {
  char buf[160];
  if (section == Section::kStartup || section == Section::kFinish)
    std::snprintf(buf, sizeof buf, "start-up limit %.0f s", s_.startup_s);
  else if (section == Section::kStep && samples(section) < s_.min_samples)
    std::snprintf(buf, sizeof buf, "start-up limit %.0f s: %zu of %zu steps known", limit(section), samples(section),
                  s_.min_samples);
  else
    std::snprintf(buf, sizeof buf, "max(floor %.3g s, %.3g x p99 %.3g s of the last %zu)", floor_of(section), s_.k,
                  p99(section), samples(section));
  return buf;
}

}  // namespace scaleguard::run
