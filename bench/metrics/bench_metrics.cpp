// What metrics add to one decision inside slurmctld: decide() alone (the baseline) against
// decide() + what job_submit/scaleguard does for metrics around it (metrics.cpp: the call's
// two clock reads and latency observation, partition_label, DecisionMetrics::count). Rounds
// alternate the two loops so a loaded machine slows both alike; the ratio printed is the
// median of the rounds' ratios, of wall time and of the thread's CPU time
// (CLOCK_THREAD_CPUTIME_ID: not the time spent waiting for a core on a loaded machine).
//   bench_metrics [ROUNDS=41] [ITERATIONS=20000]
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "scaleguard/decide.h"
#include "scaleguard/metrics_decisions.h"
#include "scaleguard/policy.h"

using namespace scaleguard;
namespace pm = scaleguard::metrics;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

struct Case {
  const char* name;
  JobRequest request;
};

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 41;
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 20000;
  auto policy = load_policy(std::string(SCALEGUARD_SOURCE_DIR) + "/configs/policy.ini");
  if (!policy) return std::fprintf(stderr, "%s\n", policy.error().str().c_str()), 1;
  std::vector<Case> cases(3);
  cases[0].name = "1 GPU x 2 h, no intent (accept)";
  cases[0].request.gpus_total = 1, cases[0].request.time_limit_min = 120;
  cases[1].name = "8 GPUs x 24 h, no intent (reject)";
  cases[1].request.gpus_total = 8, cases[1].request.time_limit_min = 24 * 60;
  cases[2].name = "350M on 8 GPUs (reject, intent)";
  cases[2].request.gpus_total = 8, cases[2].request.time_limit_min = 24 * 60;
  cases[2].request.model = "350M", cases[2].request.single_gpu_hours = 11;
  pm::calibrate_clock();   // as job_submit/scaleguard's start_metrics()
  pm::DecisionMetrics metrics;
  using clock = std::chrono::steady_clock;
  std::printf("%-36s %12s %16s %7s %12s %16s %7s\n", "request", "decide (ns)", "+ metrics (ns)", "ratio",
              "decide cpu", "+ metrics cpu", "ratio");
  for (auto& c : cases) {
    const Policy& p = **policy;
    std::vector<double> alone, with, ratios, alone_cpu, with_cpu, ratios_cpu;
    volatile double sink = 0;
    for (int r = 0; r < rounds; ++r) {
      const double c0 = cpu_ns();
      auto t0 = clock::now();
      for (int i = 0; i < iterations; ++i) sink = sink + decide(c.request, p).granted_gpu_hours;
      auto t1 = clock::now();
      const double c1 = cpu_ns();
      for (int i = 0; i < iterations; ++i) {
        const std::uint64_t start = pm::monotonic_ns();   // TimedCall
        const Decision d = decide(c.request, p);
        metrics.count(d, pm::partition_label(p, c.request.partition, d), pm::Event::submit);   // record_decision
        sink = sink + d.granted_gpu_hours;
        metrics.observe_ns(pm::Event::submit, pm::monotonic_ns() - start);   // ~TimedCall
      }
      auto t2 = clock::now();
      const double c2 = cpu_ns();
      const double a = std::chrono::duration<double, std::nano>(t1 - t0).count() / iterations;
      const double b = std::chrono::duration<double, std::nano>(t2 - t1).count() / iterations;
      if (r == 0) continue;   // warm-up
      alone.push_back(a), with.push_back(b), ratios.push_back(b / a);
      const double ac = (c1 - c0) / iterations, bc = (c2 - c1) / iterations;
      alone_cpu.push_back(ac), with_cpu.push_back(bc), ratios_cpu.push_back(bc / ac);
    }
    std::printf("%-36s %12.0f %16.0f %7.3f %12.0f %16.0f %7.3f\n", c.name, median(alone), median(with),
                median(ratios), median(alone_cpu), median(with_cpu), median(ratios_cpu));
  }
  return 0;
}
