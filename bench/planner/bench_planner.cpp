// decide() for typical requests and the full strategy search for a 1T model on 3072 GPUs,
// against a trivial baseline timed in the same run: parsing the request's values (what a
// plugin does anyway before it calls decide()). Prints medians and ratios at the end.
//   bench_planner --benchmark_repetitions=5
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>

#include "scaleguard/decide.h"
#include "scaleguard/plan.h"
#include "scaleguard/policy.h"

using namespace scaleguard;

namespace {

const Policy& policy() {
  static auto p = load_policy(std::string(SCALEGUARD_SOURCE_DIR) + "/configs/policy.ini");
  if (!p) {
    std::fprintf(stderr, "%s\n", p.error().str().c_str());
    std::exit(1);
  }
  return *p.value();
}

JobRequest request(int gpus, const char* model, double single_gpu_hours) {
  JobRequest j;
  j.gpus_total = gpus;
  j.time_limit_min = 24 * 60;
  j.model = model;
  j.single_gpu_hours = single_gpu_hours;
  return j;
}

// Baseline: the values of a typical submission parsed into a JobRequest.
void BM_ParseRequest(benchmark::State& state) {
  for (auto _ : state) {
    JobRequest j;
    j.gpus_total = parse_gpu_tres("gres:gpu:a100:8").value().count;
    j.time_limit_min = parse_slurm_minutes("1-00:00:00").value();
    j.tokens = parse_count("40B").value();
    j.strategy = parse_strategy("auto").value();
    benchmark::DoNotOptimize(j);
  }
}
BENCHMARK(BM_ParseRequest);

void BM_DecideNoIntent(benchmark::State& state) {
  const JobRequest j = request(8, "", 0);
  for (auto _ : state) benchmark::DoNotOptimize(decide(j, policy()));
}
BENCHMARK(BM_DecideNoIntent);

void BM_Decide350MOn8(benchmark::State& state) {  // the seed: refused, use 1 GPU
  const JobRequest j = request(8, "350M", 11);
  for (auto _ : state) benchmark::DoNotOptimize(decide(j, policy()));
}
BENCHMARK(BM_Decide350MOn8);

void BM_Decide7BOn16(benchmark::State& state) {  // a distributed job across two nodes
  JobRequest j = request(16, "llama2-7b", 0);
  j.tokens = 100e9;
  for (auto _ : state) benchmark::DoNotOptimize(decide(j, policy()));
}
BENCHMARK(BM_Decide7BOn16);

void BM_Decide13BOn1(benchmark::State& state) {  // does not fit: finds the fewest GPUs
  JobRequest j = request(1, "13B", 0);
  j.tokens = 100e9;
  for (auto _ : state) benchmark::DoNotOptimize(decide(j, policy()));
}
BENCHMARK(BM_Decide13BOn1);

// Issue 25, classes 5 and 6: both caps checked on the cut job (an array of 1000 x 8 GPUs x
// 2 days, refused by max_array_gpu_hours), and a job judged in two partitions with every
// partition's changes merged (gpu-spot adds requeue + signal).
void BM_DecideArrayBothCaps(benchmark::State& state) {
  JobRequest j = request(8, "", 0);
  j.time_limit_min = 2 * 24 * 60;
  j.array_tasks = 1000;
  for (auto _ : state) benchmark::DoNotOptimize(decide(j, policy()));
}
BENCHMARK(BM_DecideArrayBothCaps);

void BM_DecidePartitionList(benchmark::State& state) {
  JobRequest j = request(8, "", 0);
  j.partition = "gpu-od,gpu-spot";
  for (auto _ : state) benchmark::DoNotOptimize(decide(j, policy()));
}
BENCHMARK(BM_DecidePartitionList);

void BM_FullSearch1TOn3072(benchmark::State& state) {
  const Catalog& cat = policy().catalog;
  const Workload w{parse_model_spec("megatron-1t", cat).value(), 450e9, 0};
  const Hardware hw = hardware_for(cat, "", "p4de.24xlarge").value();
  for (auto _ : state) benchmark::DoNotOptimize(best_plan_at(w, hw, 3072, Pins{}, Goals{}));
}
BENCHMARK(BM_FullSearch1TOn3072)->Unit(benchmark::kMillisecond);

// Console output as usual, plus the median real and CPU time of each benchmark for the
// ratio table. The build machine is shared (2 cores, many jobs): CPU time is what the
// process itself spent, real time includes waiting for a core.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& r : runs) {
      const bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      const std::string name = r.run_name.function_name;
      if (median || (r.run_type == Run::RT_Iteration && !real_.count(name))) {
        real_[name] = r.GetAdjustedRealTime() * multiplier(r.time_unit);
        cpu_[name] = r.GetAdjustedCPUTime() * multiplier(r.time_unit);
      }
    }
  }
  void print_ratios() const {
    const auto base = cpu_.find("BM_ParseRequest");
    if (base == cpu_.end()) return;
    std::printf("\n%-24s %14s %14s %12s\n", "benchmark (median)", "real", "cpu", "cpu/baseline");
    for (const auto& [name, ns] : cpu_)
      std::printf("%-24s %11.3f us %11.3f us %12.1f\n", name.c_str(), real_.at(name) / 1e3, ns / 1e3, ns / base->second);
  }

 private:
  static double multiplier(benchmark::TimeUnit u) {
    switch (u) {
      case benchmark::kNanosecond: return 1;
      case benchmark::kMicrosecond: return 1e3;
      case benchmark::kMillisecond: return 1e6;
      default: return 1e9;
    }
  }
  std::map<std::string, double> real_, cpu_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  policy();  // parsed once, like the plugin does at init
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_ratios();
  benchmark::Shutdown();
  return 0;
}
