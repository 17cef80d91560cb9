#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <sched.h>

#include <cstdio>
#include <cstring>

#include <algorithm>
#include <iterator>
#include <mutex>
#include <string_view>
#include <tuple>

#include "scaleguard/metrics_decisions.h"

namespace scaleguard::metrics {
namespace {

constexpr std::size_t kSlots = 8192;   // a power of two, > 2 x (kMaxSeries + overflow series)
const char* const kEvents[] = {"submit", "update"};

// Label strings are short (partition names, rule ids): fixed-size loads the compiler inlines
// (a memcpy of a variable length is a call: it made hashing most of count()), 8 bytes a multiply.
inline std::uint64_t load8(const char* p) {
  std::uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}
inline std::uint64_t load4(const char* p) {
  std::uint32_t w;
  std::memcpy(&w, p, 4);
  return w;
}
std::uint64_t hash_of(std::string_view s) {
  constexpr std::uint64_t k = 0x9e3779b97f4a7c15ull;
  const char* p = s.data();
  const std::size_t n = s.size();
  std::uint64_t h = (n + 1) * k;
  if (n >= 8) {
    for (std::size_t i = 0; i + 8 < n; i += 8) h = (h ^ load8(p + i)) * k, h ^= h >> 29;
    h = (h ^ load8(p + n - 8)) * k;   // the last 8 bytes (overlapping the step before)
  } else if (n >= 4) {
    h = (h ^ (load4(p) | load4(p + n - 4) << 32)) * k;
  } else if (n > 0) {
    const auto b = [p](std::size_t i) { return static_cast<std::uint64_t>(static_cast<unsigned char>(p[i])); };
    h = (h ^ (b(0) | b(n / 2) << 8 | b(n - 1) << 16)) * k;
  }
  return h ^ (h >> 32);
}

// latency_bounds() in nanoseconds.
constexpr std::uint64_t kBoundsNs[] = {5000,     10000,    25000,    50000,     100000,    250000,    500000,    1000000,
                                       2500000,  5000000,  10000000, 25000000,  100000000, 250000000, 1000000000};

}  // namespace

std::string_view partition_label(const Policy& policy, const std::string& requested, const Decision& d) {
  if (d.rewrite.partition) {
    if (const Partition* p = policy.find_partition(*d.rewrite.partition)) return p->name;
  }
  if (requested.empty()) {
    const Partition* def = policy.default_partition();
    return def ? std::string_view(def->name) : "other";
  }
  if (requested.find(',') == std::string::npos) {
    const Partition* p = policy.find_partition(requested);
    return p ? std::string_view(p->name) : "other";
  }
  std::size_t start = 0;
  while (start <= requested.size()) {
    const std::size_t end = std::min(requested.find(',', start), requested.size());
    if (const Partition* p = policy.find_partition(requested.substr(start, end - start))) return p->name;
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
  static const std::vector<double> b = [] {
    std::vector<double> v;
    for (const std::uint64_t ns : kBoundsNs) v.push_back(static_cast<double>(ns) / 1e9);   // 5e-06, 1e-05, ...
    return v;
  }();
  return b;
}

void DecisionMetrics::SpinLock::wait() noexcept {
  for (unsigned spins = 0;; ++spins) {
    if (!taken_.load(std::memory_order_relaxed) && !taken_.exchange(true, std::memory_order_acquire)) return;
    if (spins < 64) {
#if defined(__x86_64__)
      _mm_pause();
#elif defined(__aarch64__)
      asm volatile("yield");
#endif
    } else {
      sched_yield();   // the holder may have lost its CPU: more threads than cores in slurmctld
    }
  }
}

DecisionMetrics::DecisionMetrics() : slots_(kSlots, 0) {
  series_.reserve(kMaxSeries + 64);
  static_assert(kBuckets == std::size(kBoundsNs) + 1, "a bucket per bound and +Inf");
}

DecisionMetrics::Series& DecisionMetrics::find_locked(std::uint64_t hash, std::string_view partition,
                                                      std::string_view rule, std::uint8_t event,
                                                      std::uint8_t outcome, bool shadow) {
  hash ^= (static_cast<std::uint64_t>(event) << 1 | static_cast<std::uint64_t>(outcome) << 3 | (shadow ? 1u : 0u)) *
          0x9e3779b97f4a7c15ull;
  for (std::size_t i = (hash ^ hash >> 21) & (kSlots - 1);; i = (i + 1) & (kSlots - 1)) {
    const std::uint32_t at = slots_[i];
    if (at == 0) {
      // A new label set; past the bound, the same counts go to partition "overflow" (at most
      // 2 events x 4 outcomes x 2 modes x 2 kinds more series).
      const bool overflow = partition == "overflow";
      if (series_.size() >= kMaxSeries && !overflow)
        return find_locked(hash_of("overflow") * 31 + (rule.empty() ? 0 : hash_of("overflow")), "overflow",
                           rule.empty() ? "" : "overflow", event, outcome, shadow);
      series_.push_back(Series{std::string(partition), std::string(rule), event, outcome, shadow, hash, {}});
      slots_[i] = static_cast<std::uint32_t>(series_.size());
      return series_.back();
    }
    Series& s = series_[at - 1];
    if (s.hash == hash && s.event == event && s.outcome == outcome && s.shadow == shadow && s.partition == partition &&
        s.rule == rule)
      return s;
  }
}

void DecisionMetrics::count(const Decision& d, std::string_view partition, Event event) {
  const bool reject = d.action == Action::reject;
  const double asked = d.envelope.gpu_hours() * 3600;   // as the audit line's judged_gpu_hours
  const double granted = reject ? 0 : d.granted_gpu_hours * 3600;
  const double avoided = asked > granted ? asked - granted : 0;
  const std::uint64_t ph = hash_of(partition) * 31;
  const auto e = static_cast<std::uint8_t>(event);
  std::lock_guard<SpinLock> lock(lock_);
  Numbers& n = find_locked(ph, partition, {}, e, static_cast<std::uint8_t>(d.action), d.shadow).n;
  n.count += 1;
  n.asked += asked;
  n.granted += granted;
  n.avoided += avoided;
  for (const auto& r : d.rules)
    find_locked(ph + hash_of(r.id), partition, r.id, e, static_cast<std::uint8_t>(r.action), d.shadow).n.count += 1;
}

void DecisionMetrics::observe_ns(Event event, std::uint64_t ns) {
  std::size_t i = 0;
  while (i < std::size(kBoundsNs) && ns > kBoundsNs[i]) ++i;
  Latency& l = latency_[static_cast<std::size_t>(event)];
  std::lock_guard<SpinLock> lock(lock_);
  l.counts[i] += 1;
  l.sum_ns += ns;
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
  // Under the lock only the numbers are copied (no allocation: reserved first); the labels of
  // the first n series were written before the lock published them and never change.
  std::vector<Numbers> numbers;
  numbers.reserve(series_.capacity());
  std::array<Latency, 2> latency;
  std::size_t n = 0;
  {
    std::lock_guard<SpinLock> lock(lock_);
    n = series_.size();
    for (std::size_t i = 0; i < n; ++i) numbers.push_back(series_[i].n);
    latency = latency_;
  }
  struct Row {
    const Series* s;
    Numbers n;
  };
  std::vector<Row> copy;
  copy.reserve(n);
  for (std::size_t i = 0; i < n; ++i) copy.push_back({&series_[i], numbers[i]});
  std::sort(copy.begin(), copy.end(), [](const Row& x, const Row& y) {
    const Series &a = *x.s, &b = *y.s;
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
    double Numbers::*value;
  };
  const Family decisions[] = {
      {"scaleguard_decisions_total",
       "Decisions on governed jobs and refusals, by partition, event (submit, update), outcome (accept, warn, "
       "rewrite, reject) and mode (enforce, shadow).",
       nullptr},
      {"scaleguard_asked_gpu_seconds_total",
       "GPU-seconds judged: the most Slurm could grant each decided job (its envelope).", &Numbers::asked},
      {"scaleguard_granted_gpu_seconds_total", "GPU-seconds granted after the decision (0 for a refusal).",
       &Numbers::granted},
      {"scaleguard_avoided_gpu_seconds_total",
       "GPU-seconds asked but not granted (refused or cut by a rewrite): what the policy saved.", &Numbers::avoided},
  };
  for (const auto& f : decisions) {
    out.family(f.name, "counter", f.help);
    for (const auto& r : copy)
      if (r.s->rule.empty()) out.sample(f.name, labels(*r.s), f.value ? r.n.*f.value : static_cast<double>(r.n.count));
  }
  out.family("scaleguard_rule_hits_total", "counter",
             "Policy rules that fired, by partition, rule id, event, the rule's own outcome and mode (a decision "
             "may hit several rules).");
  for (const auto& r : copy)
    if (!r.s->rule.empty()) out.sample("scaleguard_rule_hits_total", labels(*r.s), static_cast<double>(r.n.count));

  out.family("scaleguard_decision_duration_seconds", "histogram",
             "Time job_submit/scaleguard spent in one job_submit or job_modify call.");
  for (std::size_t e = 0; e < latency.size(); ++e) {
    const std::vector<std::uint64_t> counts(latency[e].counts.begin(), latency[e].counts.end());
    out.histogram("scaleguard_decision_duration_seconds", {{"event", kEvents[e]}}, latency_bounds(), counts,
                  static_cast<double>(latency[e].sum_ns) / 1e9);
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
