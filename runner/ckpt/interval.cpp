#include "ckpt/interval.h"

#include "scaleguard/plan.h"

#include <cmath>
#include <cstdlib>

namespace scaleguard::ckpt {

Result<OnSaveError> parse_on_save_error(const std::string& text) {
  if (text == "continue") return OnSaveError::keep_training;
  if (text == "stop") return OnSaveError::stop;
  return Error{"on_save_error '" + text + "' is not continue|stop", "", 0, "on_save_error",
               "continue keeps training without that checkpoint, stop exits with the error"};
}

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

IntervalClock::IntervalClock(IntervalSpec spec, double mtbf_hours, double now_seconds)
    : spec_(spec), mtbf_seconds_(mtbf_hours * 3600), last_save_(now_seconds) {}

double IntervalClock::interval_seconds() const {
  switch (spec_.kind) {
    case IntervalSpec::Kind::steps: return 0;
    case IntervalSpec::Kind::minutes: return spec_.minutes * 60;
    case IntervalSpec::Kind::automatic:
      return save_seconds_ < 0 ? 0 : daly_interval_seconds(save_seconds_, mtbf_seconds_);
  }
  return 0;
}

bool IntervalClock::due(int64_t step, double now_seconds) const {
  if (spec_.kind == IntervalSpec::Kind::steps) return spec_.steps > 0 && step > 0 && step % spec_.steps == 0;
  return now_seconds - last_save_ >= interval_seconds();
}

void IntervalClock::saved(double now_seconds, double save_seconds) {
  last_save_ = now_seconds;
  save_seconds_ = save_seconds;
}

bool agree_due(CommitComm& comm, bool due_here) { return comm.all_min(due_here ? 0 : 1) == 0; }

}  // namespace scaleguard::ckpt
