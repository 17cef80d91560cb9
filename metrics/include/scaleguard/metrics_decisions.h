// What job_submit/scaleguard counts per decision, for Prometheus: decisions by partition,
// event and outcome with the GPU-seconds asked (the envelope judged), granted and avoided;
// the rules that fired; the decision latency histogram; policy reloads.
//
// count() and observe_ns() run in slurmctld's judging threads: one short mutex (count) or two
// relaxed atomics (observe), no allocation once a label set has been seen, no I/O. render()
// runs in the plugin's metrics thread. Label sets are bounded (kMaxSeries; the policy's
// partitions and rule ids are the only strings that reach a label).
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "scaleguard/decide.h"
#include "scaleguard/metrics.h"
#include "scaleguard/policy.h"

namespace scaleguard::metrics {

enum class Event : std::uint8_t { submit, update };

// The partition label of a decision: where the job goes (a rewrite's partition), else the one
// asked for (the policy's default for none; of a list, the first the policy has); "other" for
// a name the policy does not have, so users cannot mint label values.
std::string partition_label(const Policy& policy, const std::string& requested, const Decision& d);

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
  void count(const Decision& d, const std::string& partition, Event event);
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
  struct Series {
    std::string partition, rule;   // rule empty: a decision series, else a rule hit
    std::uint8_t event = 0, outcome = 0;
    bool shadow = false;
    std::uint64_t count = 0;
    double asked = 0, granted = 0, avoided = 0;   // GPU-seconds (decision series)
  };
  Series& find_locked(std::uint64_t hash, const std::string& partition, const std::string& rule, std::uint8_t event,
                      std::uint8_t outcome, bool shadow);

  mutable std::mutex mutex_;
  std::vector<Series> series_;          // reserved: never reallocates
  std::vector<std::uint32_t> slots_;    // open addressing: series index + 1, 0 = empty
  std::vector<std::uint64_t> hashes_;   // by series index

  static constexpr std::size_t kBuckets = 16;   // latency_bounds().size() + 1
  struct Latency {
    std::array<std::atomic<std::uint64_t>, kBuckets> counts{};
    std::atomic<std::uint64_t> sum_ns{0};
  };
  std::array<Latency, 2> latency_;      // by Event
  std::atomic<std::uint64_t> reloads_{0}, reload_failures_{0};
  std::atomic<std::int64_t> loaded_at_{0};
};

}  // namespace scaleguard::metrics
