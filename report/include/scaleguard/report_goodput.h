// `scaleguard report --goodput PATH...` and the one page's goodput section: per training job,
// productive step time / allocated time and the GPU-hours lost to failures and stragglers,
// from the runner's CKPT_DIR/goodput.json (read by the CLI with runner/ckpt's
// scaleguard/goodput.h; this library does not link it) and, when the health check named a
// straggler, CKPT_DIR/health/stragglers. Meaning of each number: docs/report.md ("Goodput").
#pragma once
#include <string>
#include <vector>

namespace scaleguard::report {

struct GoodputStraggler {
  std::string node;
  long long step = 0;     // named at this step
  double ratio = 0;       // its compute time / the other nodes' median (2 = half speed)
};

struct GoodputJob {
  std::string path;       // the goodput.json read
  std::string job;        // SLURM_JOB_ID ("" outside Slurm)
  int runs = 0, failures = 0;
  long long steps = 0, lost_steps = 0;
  double allocated_s = 0, productive_s = 0, lost_s = 0, restart_s = 0, startup_s = 0, restore_s = 0, ckpt_s = 0,
         overhead_s = 0, requeue_wait_s = 0;
  double gpu_hours_allocated = 0, gpu_hours_failures = 0;
  // Estimate: the productive time after a straggler was named x (ratio - 1) / ratio x GPUs:
  // what the job lost running at the slow node's pace.
  double gpu_hours_stragglers = 0;
  std::vector<GoodputStraggler> stragglers;
  std::string state;      // the last run's: running | finished | stopped
  double goodput() const { return allocated_s > 0 ? productive_s / allocated_s : 0; }
};

struct GoodputReport {
  std::vector<GoodputJob> jobs;
  std::vector<std::string> notes;   // files that could not be read, and why
};

// "NODE step S ratio R windows W" lines (runner/src/health): the stragglers named.
std::vector<GoodputStraggler> parse_stragglers(const std::string& text);
// Fills gpu_hours_stragglers from stragglers, steps and productive_s, with `devices` GPUs.
void estimate_straggler_loss(GoodputJob& job, double devices);

std::string render_goodput_text(const GoodputReport& r);
std::string render_goodput_json(const GoodputReport& r);
std::string render_goodput_html(const GoodputReport& r);   // a section body (a table), the page's style
std::string render_goodput_page_html(const GoodputReport& r);   // that body as a page of its own

}  // namespace scaleguard::report
