#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <cstdio>

#include <algorithm>
#include <functional>
#include <string_view>
#include <tuple>

#include "scaleguard/metrics_decisions.h"

namespace scaleguard::metrics {
namespace {

constexpr std::size_t kSlots = 8192;   // a power of two, > 2 x (kMaxSeries + overflow series)
const char* const kEvents[] = {"submit", "update"};

std::uint64_t hash_of(const std::string& s) { return std::hash<std::string_view>{}(s); }

}  // namespace

std::string partition_label(const Policy& policy, const std::string& requested, const Decision& d) {
  if (d.rewrite.partition && policy.find_partition(*d.rewrite.partition)) return *d.rewrite.partition;
  if (requested.empty()) {
    const Partition* def = policy.default_partition();
    return def ? def->name : "other";
  }
  if (requested.find(',') == std::string::npos) return policy.find_partition(requested) ? requested : "other";
  std::size_t start = 0;
  while (start <= requested.size()) {
    const std::size_t end = std::min(requested.find(',', start), requested.size());
    const std::string name = requested.substr(start, end - start);
    if (policy.find_partition(name)) return name;
    start = end + 1;
  }
  return "other";
}

namespace {

std::uint64_t clock_monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

// The time-stamp counter, where the kernel itself keeps time with it: two clock_gettime calls
// were most of what metrics added to a cheap decision (~50 of ~60 ns); two TSC reads are a few ns.
struct TscClock {
  std::atomic<bool> on{false};
  double ns_per_tick = 0;
  std::uint64_t tsc0 = 0, ns0 = 0;
};
TscClock g_tsc;

}  // namespace

void calibrate_clock() {
#if defined(__x86_64__)
  if (g_tsc.on.load(std::memory_order_acquire)) return;
  // Only when Linux's clocksource is the TSC: then it is invariant and synchronised across CPUs.
  char source[32] = {};
  if (FILE* f = std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re")) {
    if (!std::fgets(source, sizeof source, f)) source[0] = 0;
    std::fclose(f);
  }
  if (std::string_view(source).substr(0, 4) != "tsc\n") return;
  const std::uint64_t t0 = __rdtsc(), m0 = clock_monotonic_ns();
  const timespec pause{0, 20000000};   // 20 ms: the factor to ~1e-4
  nanosleep(&pause, nullptr);
  const std::uint64_t t1 = __rdtsc(), m1 = clock_monotonic_ns();
  if (t1 <= t0 || m1 <= m0) return;
  g_tsc.ns_per_tick = static_cast<double>(m1 - m0) / static_cast<double>(t1 - t0);
  g_tsc.tsc0 = t1, g_tsc.ns0 = m1;
  g_tsc.on.store(true, std::memory_order_release);
#endif
}

std::uint64_t monotonic_ns() {
#if defined(__x86_64__)
  if (g_tsc.on.load(std::memory_order_acquire))
    return g_tsc.ns0 + static_cast<std::uint64_t>(static_cast<double>(__rdtsc() - g_tsc.tsc0) * g_tsc.ns_per_tick);
#endif
  return clock_monotonic_ns();
}

const std::vector<double>& DecisionMetrics::latency_bounds() {
  static const std::vector<double> b = {5e-6,  1e-5,  2.5e-5, 5e-5,  1e-4, 2.5e-4, 5e-4, 1e-3,
                                        2.5e-3, 5e-3, 1e-2,   2.5e-2, 0.1,  0.25,   1};
  return b;
}

DecisionMetrics::DecisionMetrics() : slots_(kSlots, 0) {
  series_.reserve(kMaxSeries + 64);
  hashes_.reserve(kMaxSeries + 64);
  static_assert(kBuckets == 16, "latency_bounds() has 15 bounds");
}

DecisionMetrics::Series& DecisionMetrics::find_locked(std::uint64_t hash, const std::string& partition,
                                                      const std::string& rule, std::uint8_t event,
                                                      std::uint8_t outcome, bool shadow) {
  hash ^= (static_cast<std::uint64_t>(event) << 1 | static_cast<std::uint64_t>(outcome) << 3 | (shadow ? 1u : 0u)) *
          0x9e3779b97f4a7c15ull;
  for (std::size_t i = hash & (kSlots - 1);; i = (i + 1) & (kSlots - 1)) {
    const std::uint32_t at = slots_[i];
    if (at == 0) {
      // A new label set; past the bound, the same counts go to partition "overflow" (at most
      // 2 events x 4 outcomes x 2 modes x 2 kinds more series).
      const bool overflow = partition == "overflow";
      if (series_.size() >= kMaxSeries && !overflow)
        return find_locked(hash_of("overflow") * 31 + (rule.empty() ? 0 : hash_of("overflow")), "overflow",
                           rule.empty() ? "" : "overflow", event, outcome, shadow);
      series_.push_back(Series{partition, rule, event, outcome, shadow});
      hashes_.push_back(hash);
      slots_[i] = static_cast<std::uint32_t>(series_.size());
      return series_.back();
    }
    Series& s = series_[at - 1];
    if (hashes_[at - 1] == hash && s.event == event && s.outcome == outcome && s.shadow == shadow &&
        s.partition == partition && s.rule == rule)
      return s;
  }
}

void DecisionMetrics::count(const Decision& d, const std::string& partition, Event event) {
  const bool reject = d.action == Action::reject;
  const double asked = d.envelope.gpu_hours() * 3600;   // as the audit line's judged_gpu_hours
  const double granted = reject ? 0 : d.granted_gpu_hours * 3600;
  const std::uint64_t ph = hash_of(partition) * 31;
  const auto e = static_cast<std::uint8_t>(event);
  std::lock_guard<std::mutex> lock(mutex_);
  Series& s = find_locked(ph, partition, "", e, static_cast<std::uint8_t>(d.action), d.shadow);
  s.count += 1;
  s.asked += asked;
  s.granted += granted;
  s.avoided += asked > granted ? asked - granted : 0;
  for (const auto& r : d.rules)
    find_locked(ph + hash_of(r.id), partition, r.id, e, static_cast<std::uint8_t>(r.action), d.shadow).count += 1;
}

void DecisionMetrics::observe_ns(Event event, std::uint64_t ns) {
  static const auto bounds_ns = [] {
    std::array<std::uint64_t, kBuckets - 1> b{};
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::uint64_t>(latency_bounds()[i] * 1e9 + 0.5);
    return b;
  }();
  std::size_t i = 0;
  while (i < bounds_ns.size() && ns > bounds_ns[i]) ++i;
  Latency& l = latency_[static_cast<std::size_t>(event)];
  l.counts[i].fetch_add(1, std::memory_order_relaxed);
  l.sum_ns.fetch_add(ns, std::memory_order_relaxed);
}

void DecisionMetrics::policy_loaded(std::int64_t now, bool reload) {
  if (reload) reloads_.fetch_add(1, std::memory_order_relaxed);
  loaded_at_.store(now, std::memory_order_relaxed);
}

void DecisionMetrics::policy_reload_failed() {
  reloads_.fetch_add(1, std::memory_order_relaxed);
  reload_failures_.fetch_add(1, std::memory_order_relaxed);
}

void DecisionMetrics::render(Text& out) const {
  std::vector<Series> copy;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    copy = series_;
  }
  std::sort(copy.begin(), copy.end(), [](const Series& a, const Series& b) {
    return std::tie(a.rule, a.partition, a.event, a.outcome, a.shadow) <
           std::tie(b.rule, b.partition, b.event, b.outcome, b.shadow);
  });
  auto labels = [](const Series& s) {
    Labels l = {{"partition", s.partition}};
    if (!s.rule.empty()) l.emplace_back("rule", s.rule);
    l.emplace_back("event", kEvents[s.event]);
    l.emplace_back("outcome", to_string(static_cast<Action>(s.outcome)));
    l.emplace_back("mode", s.shadow ? "shadow" : "enforce");
    return l;
  };
  struct Family {
    const char* name;
    const char* help;
    double Series::*value;
  };
  const Family decisions[] = {
      {"scaleguard_decisions_total",
       "Decisions on governed jobs and refusals, by partition, event (submit, update), outcome (accept, warn, "
       "rewrite, reject) and mode (enforce, shadow).",
       nullptr},
      {"scaleguard_asked_gpu_seconds_total",
       "GPU-seconds judged: the most Slurm could grant each decided job (its envelope).", &Series::asked},
      {"scaleguard_granted_gpu_seconds_total", "GPU-seconds granted after the decision (0 for a refusal).",
       &Series::granted},
      {"scaleguard_avoided_gpu_seconds_total",
       "GPU-seconds asked but not granted (refused or cut by a rewrite): what the policy saved.", &Series::avoided},
  };
  for (const auto& f : decisions) {
    out.family(f.name, "counter", f.help);
    for (const auto& s : copy)
      if (s.rule.empty()) out.sample(f.name, labels(s), f.value ? s.*f.value : static_cast<double>(s.count));
  }
  out.family("scaleguard_rule_hits_total", "counter",
             "Policy rules that fired, by partition, rule id, event, the rule's own outcome and mode (a decision "
             "may hit several rules).");
  for (const auto& s : copy)
    if (!s.rule.empty()) out.sample("scaleguard_rule_hits_total", labels(s), static_cast<double>(s.count));

  out.family("scaleguard_decision_duration_seconds", "histogram",
             "Time job_submit/scaleguard spent in one job_submit or job_modify call.");
  for (std::size_t e = 0; e < latency_.size(); ++e) {
    std::vector<std::uint64_t> counts(kBuckets);
    for (std::size_t i = 0; i < kBuckets; ++i) counts[i] = latency_[e].counts[i].load(std::memory_order_relaxed);
    out.histogram("scaleguard_decision_duration_seconds", {{"event", kEvents[e]}}, latency_bounds(), counts,
                  latency_[e].sum_ns.load(std::memory_order_relaxed) / 1e9);
  }
  out.family("scaleguard_policy_reloads_total", "counter", "Policy reloads attempted after a change of its files.");
  out.sample("scaleguard_policy_reloads_total", {}, static_cast<double>(reloads_.load()));
  out.family("scaleguard_policy_reload_failures_total", "counter",
             "Policy reloads that failed (the last good policy stayed in force).");
  out.sample("scaleguard_policy_reload_failures_total", {}, static_cast<double>(reload_failures_.load()));
  out.family("scaleguard_policy_loaded_timestamp_seconds", "gauge", "When the policy in force was loaded (unix time).");
  out.sample("scaleguard_policy_loaded_timestamp_seconds", {}, static_cast<double>(loaded_at_.load()));
}

}  // namespace scaleguard::metrics
