// What job_submit/scaleguard counts per decision, for Prometheus: decisions by partition,
// event and outcome with the GPU-seconds asked (the envelope judged), granted and avoided;
// the rules that fired; the decision latency histogram; policy reloads.
//
// count() and observe_ns() run in slurmctld's judging threads: each takes one short spin lock
// (one atomic exchange; it yields the CPU if the lock stays taken) around a hashed lookup and
// plain adds; no allocation once a label set has been seen, no I/O. render() runs in the
// plugin's metrics thread and holds the same lock only to copy the numbers. Label sets are
// bounded (kMaxSeries; the policy's partitions and rule ids are the only strings that reach a
// label).
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "scaleguard/decide.h"
#include "scaleguard/metrics.h"
#include "scaleguard/policy.h"

namespace scaleguard::metrics {

enum class Event : std::uint8_t { submit, update };

// The partition label of a decision: where the job goes (a rewrite's partition), else the one
// asked for (the policy's default for none; of a list, the first the policy has); "other" for
// a name the policy does not have, so users cannot mint label values. The view points into
// the policy, the decision, `requested` or a literal: use it before any of them changes.
std::string_view partition_label(const Policy& policy, const std::string& requested, const Decision& d);

// Monotonic nanoseconds for observe_ns: CLOCK_MONOTONIC, or the TSC scaled to it once
// calibrate_clock() has run (blocks 20 ms: call it at start-up, never in a judging thread; it
// keeps CLOCK_MONOTONIC unless Linux's clocksource is the TSC).
void calibrate_clock();
std::uint64_t monotonic_ns();

class DecisionMetrics {
 public:
  static constexpr std::size_t kMaxSeries = 2048;   // then counted under partition "overflow"
  DecisionMetrics();
  // One final decision (after budgets), as the audit line records it.
  void count(const Decision& d, std::string_view partition, Event event);
  // The whole job_submit or job_modify call, in nanoseconds.
  void observe_ns(Event event, std::uint64_t ns);
  // The policy in force was loaded at unix time `now` (at init, or a reload); a reload failed
  // (the last good policy stays).
  void policy_loaded(std::int64_t now, bool reload);
  void policy_reload_failed();
  void render(Text& out) const;
  // Latency histogram bucket bounds, seconds.
  static const std::vector<double>& latency_bounds();

 private:
  // Where count(), observe_ns() and render() meet: an exchange to take it, a store to give
  // it back (an uncontended std::mutex costs two atomic read-modify-writes).
  class SpinLock {
   public:
    void lock() noexcept {
      if (!taken_.exchange(true, std::memory_order_acquire)) return;
      wait();
    }
    void unlock() noexcept { taken_.store(false, std::memory_order_release); }

   private:
    void wait() noexcept;
    std::atomic<bool> taken_{false};
  };
  struct Numbers {
    std::uint64_t count = 0;
    double asked = 0, granted = 0, avoided = 0;   // GPU-seconds (decision series)
  };
  struct Series {
    // Written once, before the series is published under the lock; never changed after, so
    // render() reads them without the lock.
    std::string partition, rule;   // rule empty: a decision series, else a rule hit
    std::uint8_t event = 0, outcome = 0;
    bool shadow = false;
    std::uint64_t hash = 0;
    Numbers n;                     // under lock_
  };
  Series& find_locked(std::uint64_t hash, std::string_view partition, std::string_view rule, std::uint8_t event,
                      std::uint8_t outcome, bool shadow);

  mutable SpinLock lock_;
  std::vector<Series> series_;          // reserved: never reallocates
  std::vector<std::uint32_t> slots_;    // open addressing: series index + 1, 0 = empty

  static constexpr std::size_t kBuckets = 16;   // latency_bounds().size() + 1
  struct Latency {
    std::array<std::uint64_t, kBuckets> counts{};
    std::uint64_t sum_ns = 0;
  };
  std::array<Latency, 2> latency_{};    // by Event, under lock_
  std::atomic<std::uint64_t> reloads_{0}, reload_failures_{0};
  std::atomic<std::int64_t> loaded_at_{0};
};

}  // namespace scaleguard::metrics
