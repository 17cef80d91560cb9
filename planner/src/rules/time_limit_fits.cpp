// time_limit_fits: the time limit must cover the plan's predicted wall time. Rewrite: the
// prediction + 10% (within the partition's max_time: beyond it the job checkpoints and resumes).
#include "judge.h"
#include "scaleguard/text.h"

namespace scaleguard::rules {

void time_limit_fits(Judge& j) {
  if (!j.have_plan) return;
  const double wall_h = j.chosen.wall_hours;
  const int have = j.new_time.value_or(j.limit);
  if (!j.on(RuleId::time_limit_fits) || !(wall_h * 60 > have)) return;
  const int need = ask_minutes(wall_h, j.part);
  const int max_time = j.part.max_time_min;
  const bool too_long = max_time > 0 && wall_h * 60 > max_time;
  if (j.fire(RuleId::time_limit_fits,
             "the plan needs " + text::num(wall_h, 1) + " h but the time limit is " + slurm_time(have) +
                 (too_long ? " and the partition's max_time " + slurm_time(max_time) +
                                 " is shorter: the job must checkpoint and resume"
                           : "")))
    j.new_time = need;
  j.ask(std::nullopt, need);
}

}  // namespace scaleguard::rules
