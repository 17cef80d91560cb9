// The GPU-hour caps judge the envelope after every cut; a plan's prediction may only tighten
// (docs/admin-guide.md, "What is enforced"). Every cap sees what the others cut (issue 25,
// class 5): max_job_gpu_hours, then max_array_gpu_hours on the job as the first left it, then
// `caps`: a job that no cut brings under every cap that cuts is refused. Rewrite cuts the time
// (a job without intent keeps its GPUs).
#include <algorithm>

#include "judge.h"
#include "scaleguard/text.h"

namespace scaleguard::rules {

namespace {

// GPUs the job holds after the earlier cuts (an exclusive job: whole nodes), its spare nodes'
// included (--train-spare-nodes: Slurm allocates them for the whole time limit).
int final_gpus(const Judge& j) {
  if (!j.new_gpus) return j.held_gpus(j.gpus);
  return j.job.exclusive || j.part.exclusive ? (j.new_nodes.value_or(1) + j.spare_nodes) * j.gpn
                                             : j.held_gpus(*j.new_gpus);
}

// One job's (one array element's) GPU-hours at this time limit, or the plan's prediction when
// larger (the spares held idle for the plan's wall time on top of it).
double one_at(const Judge& j, int minutes) {
  const double predicted =
      j.have_plan ? j.chosen.gpu_hours + j.spare_gpu_hours(j.chosen) : 0;
  return std::max(static_cast<double>(final_gpus(j)) * minutes / 60.0, predicted);
}

double job_cap(const Judge& j) { return j.on(RuleId::max_job_gpu_hours) ? j.threshold(RuleId::max_job_gpu_hours) : 0; }
int elements(const Judge& j) { return j.on(RuleId::max_array_gpu_hours) ? std::max(1, j.job.array_tasks) : 1; }
double array_cap(const Judge& j) { return elements(j) > 1 ? j.threshold(RuleId::max_array_gpu_hours) : 0; }

}  // namespace

// max_job_gpu_hours: one job's GPU-hours (a het job's components summed).
void max_job_gpu_hours(Judge& j) {
  const double jcap = job_cap(j);
  const int time = j.new_time.value_or(j.limit);
  const double one = one_at(j, time);
  const double prior = j.job.het_prior_gpu_hours;
  if (!(jcap > 0 && one + prior > jcap)) return;
  const int gpus = final_gpus(j);
  const double budget = jcap - prior;
  const int capped = budget > 0 ? std::max(1, static_cast<int>(budget / gpus * 60)) : 0;
  // The literal request only when it is what was judged: a plan predicting more names that.
  const int held = j.held_gpus(j.gpus);
  std::string detail = gpus == held && time == j.limit && one <= held * j.hours
                           ? text::format("%d GPUs x %s h = %s GPU-hours", held, text::num(j.hours).c_str(),
                                          text::num(held * j.hours, 0).c_str()) + j.how
                       : one > static_cast<double>(gpus) * time / 60.0 ? "the plan predicts " + text::num(one, 0) + " GPU-hours"
                                                                       : text::num(one, 0) + " GPU-hours";
  if (j.job.het_component > 0)
    detail += " + " + text::num(prior, 0) + " GPU-hours of het job components 0-" +
              std::to_string(j.job.het_component - 1);
  if (j.fire(RuleId::max_job_gpu_hours, detail + " > " + text::num(jcap) + " allowed for one job") && capped > 0)
    j.new_time = capped;
  else if (capped <= 0 && j.cuts(RuleId::max_job_gpu_hours))
    j.max_action = Action::reject;  // nothing left to give this component (a warning cap only warns)
  if (capped > 0) j.ask(std::nullopt, capped);
}

// max_array_gpu_hours: a job array's elements x one element's GPU-hours.
void max_array_gpu_hours(Judge& j) {
  const double acap = array_cap(j);
  const int n = elements(j);
  const double one = one_at(j, j.new_time.value_or(j.limit));
  if (!(acap > 0 && one * n > acap)) return;
  const int capped = std::max(1, static_cast<int>(acap / n / final_gpus(j) * 60));
  if (j.fire(RuleId::max_array_gpu_hours,
             text::format("%d array elements x %s GPU-hours = %s GPU-hours > %s allowed for one array", n,
                          text::num(one, 1).c_str(), text::num(one * n, 0).c_str(), text::num(acap).c_str()) +
                 j.how))
    j.new_time = std::min(capped, j.new_time.value_or(capped));
  j.ask(std::nullopt, capped);
}

// caps: a cap that cuts must be met by what all the cuts leave (the one-minute floor can keep a
// large array above its cap): otherwise no rewrite satisfies every cap and the job is refused.
// A cap whose action is warn only warns. Sets what the job may take after every cut: a cap that
// only warns leaves the job whole, and budgets and later het components are charged all of it
// (issue 36, class 3).
void caps(Judge& j) {
  const double jcap = job_cap(j), acap = array_cap(j);
  const int n = elements(j);
  const double held = static_cast<double>(final_gpus(j)) * j.new_time.value_or(j.limit) / 60.0;
  std::string unmet;
  if (jcap > 0 && j.cuts(RuleId::max_job_gpu_hours) && held + j.job.het_prior_gpu_hours > jcap * (1 + 1e-9))
    unmet = "max_job_gpu_hours " + text::num(jcap);
  else if (acap > 0 && j.cuts(RuleId::max_array_gpu_hours) && held * n > acap * (1 + 1e-9))
    unmet = "max_array_gpu_hours " + text::num(acap) + " over " + std::to_string(n) + " elements";
  if (!unmet.empty()) {
    j.d.rules.push_back(RuleHit{"caps", Action::reject,
                                text::num(held, 1) + " GPU-hours per job after every cut still exceed " + unmet +
                                    ": no rewrite satisfies every cap"});
    j.max_action = Action::reject;
  }
  j.granted = one_at(j, j.new_time.value_or(j.limit));
}

}  // namespace scaleguard::rules
