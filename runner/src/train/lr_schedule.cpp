#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "scaleguard/decide.h"

namespace scaleguard::run {

LrSchedule lr_schedule(const Config& cfg) {
  LrSchedule s;
  s.kind = cfg.lr_schedule;
  s.lr = cfg.lr;
  s.min_lr = cfg.lr * cfg.min_lr_ratio;
  s.warmup = cfg.warmup;
  s.horizon = cfg.steps;
  if (cfg.lr_decay_steps > 0) s.horizon = cfg.lr_decay_steps;
  if (!cfg.lr_decay_tokens.empty()) {  // checked with the configuration
    const double per_step = static_cast<double>(cfg.global_batch) * static_cast<double>(cfg.seq_len);
    s.horizon = static_cast<int64_t>(std::ceil(scaleguard::parse_count(cfg.lr_decay_tokens).value() / per_step));
  }
  const int64_t d = std::llround(cfg.lr_wsd_decay_fraction * static_cast<double>(s.horizon));
  s.decay = std::max<int64_t>(1, std::min(d, s.horizon - s.warmup));
  return s;
}

double lr_at(const LrSchedule& s, int64_t step) {
  if (step < s.warmup) return s.lr * static_cast<double>(step + 1) / static_cast<double>(s.warmup);
  if (s.kind == "constant") return s.lr;
  auto clamp01 = [](double p) { return std::min(1.0, std::max(0.0, p)); };
  if (s.kind == "wsd") {
    const int64_t start = s.horizon - s.decay;  // first decaying step
    if (step < start) return s.lr;
    const double p = clamp01(static_cast<double>(step - start + 1) / static_cast<double>(s.decay));
    return s.min_lr + (s.lr - s.min_lr) * (1.0 - p);
  }
  const int64_t span = s.horizon - s.warmup - 1;
  const double p = span <= 0 ? 1.0 : clamp01(static_cast<double>(step - s.warmup) / static_cast<double>(span));
  if (s.kind == "linear") return s.min_lr + (s.lr - s.min_lr) * (1.0 - p);
  return s.min_lr + 0.5 * (s.lr - s.min_lr) * (1.0 + std::cos(M_PI * p));  // cosine
}

double lr_at(const Config& cfg, int64_t step) { return lr_at(lr_schedule(cfg), step); }

}  // namespace scaleguard::run
