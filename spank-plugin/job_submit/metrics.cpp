#include "metrics.h"

#include <time.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "budget.h"
#include "scaleguard/metrics_decisions.h"
#include "slurm_api.h"

namespace sg_slurm {
namespace {

namespace pm = scaleguard::metrics;

struct Writer {
  std::string path;
  int interval_s = 15;
  pm::DecisionMetrics counters;
  std::thread thread;
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  std::string error_logged;   // metrics thread only: the last write error logged
};
// Read by the judging threads. Set in init and cleared in fini, which slurmctld never runs
// alongside job_submit; a raw pointer for the same reason as the budget Keeper (slurmctld
// exits without fini(): a static owner would destroy a joinable thread).
std::atomic<Writer*> g_writer{nullptr};

void write_once(Writer& w) {
  pm::Text text;
  w.counters.render(text);
  const std::int64_t now = time(nullptr);
  pm::LedgerGauge ledger;
  const auto budgets = budget_gauges(now, &ledger);
  pm::render_budgets(text, budgets, ledger, now);
  const std::string error = pm::write_textfile(w.path, text.str());
  if (error == w.error_logged) return;   // each change of state is logged once
  if (error.empty()) slurm_info("job_submit/scaleguard: metrics written to %s", w.path.c_str());
  else slurm_error("job_submit/scaleguard: metrics not written: %s", error.c_str());
  w.error_logged = error;
}

void thread_main(Writer* w) {
  std::unique_lock<std::mutex> lock(w->mutex);
  while (!w->stopping) {
    lock.unlock();
    try {
      write_once(*w);
    } catch (const std::exception& e) {
      slurm_error("job_submit/scaleguard: metrics thread: %s", e.what());
    } catch (...) {
      slurm_error("job_submit/scaleguard: metrics thread: unknown exception");
    }
    lock.lock();
    w->wake.wait_for(lock, std::chrono::seconds(w->interval_s), [w] { return w->stopping; });
  }
}

}  // namespace

void start_metrics(const Settings& settings) {
  if (settings.metrics_file.empty() || g_writer.load()) return;
  pm::calibrate_clock();   // at init (20 ms), never in a judging thread
  auto* w = new Writer;
  w->path = settings.metrics_file;
  w->interval_s = settings.metrics_interval_s;
  w->counters.policy_loaded(time(nullptr), false);
  w->thread = std::thread(thread_main, w);
  g_writer.store(w);
  slurm_info("job_submit/scaleguard: metrics to %s every %d s", w->path.c_str(), w->interval_s);
}

void stop_metrics() {
  Writer* w = g_writer.exchange(nullptr);
  if (!w) return;
  {
    std::lock_guard<std::mutex> lock(w->mutex);
    w->stopping = true;
  }
  w->wake.notify_all();
  if (w->thread.joinable()) w->thread.join();
  delete w;
}

void count_decision(const scaleguard::Policy& policy, const AuditEntry& e) {
  Writer* w = g_writer.load(std::memory_order_acquire);
  if (!w || !e.decision) return;
  const std::string& asked = e.judged_partition.empty() ? e.partition : e.judged_partition;
  w->counters.count(*e.decision, pm::partition_label(policy, asked, *e.decision),
                    e.event == "update" ? pm::Event::update : pm::Event::submit);
}

void count_policy_reload(bool ok) {
  Writer* w = g_writer.load(std::memory_order_acquire);
  if (!w) return;
  if (ok) w->counters.policy_loaded(time(nullptr), true);
  else w->counters.policy_reload_failed();
}

TimedCall::TimedCall(bool update) : update_(update) {
  if (g_writer.load(std::memory_order_relaxed)) start_ns_ = pm::monotonic_ns();
}

TimedCall::~TimedCall() {
  Writer* w = g_writer.load(std::memory_order_acquire);
  if (!w || start_ns_ == 0) return;
  w->counters.observe_ns(update_ ? pm::Event::update : pm::Event::submit, pm::monotonic_ns() - start_ns_);
}

}  // namespace sg_slurm
