// The learning-rate schedule: a pure function of the step (no Torch, no MPI), so a resumed
// or extended run gets exactly the learning rates an uninterrupted one would.
#pragma once
#include <cstdint>
#include <string>

#include "config/config.h"

namespace scaleguard::run {

struct LrSchedule {
  std::string kind = "cosine";  // constant | linear | cosine | wsd
  double lr = 1e-3;             // peak
  double min_lr = 1e-4;         // floor of linear, cosine and wsd (lr * min-lr-ratio)
  int64_t warmup = 0;           // W: steps 0..W-1 ramp linearly to lr
  int64_t horizon = 1;          // H: the decay ends at step H-1; later steps keep min_lr
  int64_t decay = 1;            // wsd: D, the last steps of the horizon that decay (stable before)
};

// The schedule of a configuration: H = --lr-decay-steps, or --lr-decay-tokens over
// global-batch x seq-len tokens per step (rounded up), else --steps (today's default);
// wsd: D = round(--lr-wsd-decay-fraction x H), at least 1 and at most H - W.
LrSchedule lr_schedule(const Config& cfg);

// The learning rate of optimizer step `step` (0-based), p the decay's progress in [0, 1]:
//   step < W                    lr (step + 1) / W                        (every kind)
//   constant                    lr
//   linear                      min + (lr - min) (1 - p),     p = (step - W) / (H - W - 1)
//   cosine                      min + (lr - min) (1 + cos(pi p)) / 2   (same p)
//   wsd      step < H - D       lr
//            otherwise          min + (lr - min) (1 - p),     p = (step - (H - D) + 1) / D
// with p clamped to [0, 1] (p = 1 when H - W <= 1): every decay reaches min at step H - 1.
double lr_at(const LrSchedule& s, int64_t step);
double lr_at(const Config& cfg, int64_t step);  // lr_at(lr_schedule(cfg), step)

}  // namespace scaleguard::run
