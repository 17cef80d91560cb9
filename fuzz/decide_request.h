// The JobRequest fuzz_decide draws from its input, in one place: the harness and the decide
// replay test (tests/unit/decide_replay_test.cpp replays corpus/fuzz_decide/ against golden
// files) read a corpus file the same way. Values stay inside what the request reader and the
// CLI can hand over (GPU counts up to 100000, nodes and tasks up to 1e6, times up to 10 years,
// counts up to 1e18); strings are either realistic (partition names, GPU types, model specs)
// or arbitrary bytes. seeds.py mirrors the order of the draws: change both together.
#pragma once
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <string>

#include "scaleguard/decide.h"
#if __has_include("scaleguard/envelope.h")
#include "scaleguard/envelope.h"
#endif

namespace sg_fuzz {
namespace decide_draw {

template <size_t N>
std::string pick_or_bytes(FuzzedDataProvider& in, const char* const (&choices)[N], size_t max_len) {
  if (in.ConsumeBool()) return choices[in.ConsumeIntegralInRange<size_t>(0, N - 1)];
  return in.ConsumeRandomLengthString(max_len);
}

// 0 (unset) and small values are the common case; any value of the range is possible.
inline int draw_int(FuzzedDataProvider& in, int lo, int hi) {
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: return 0 >= lo && 0 <= hi ? 0 : lo;
    case 1: return in.ConsumeIntegralInRange<int>(lo, hi < 64 ? hi : 64);
    case 2: return in.ConsumeBool() ? hi : lo;
    default: return in.ConsumeIntegralInRange<int>(lo, hi);
  }
}

inline double draw_double(FuzzedDataProvider& in, double hi) {
  switch (in.ConsumeIntegralInRange<int>(0, 2)) {
    case 0: return 0;
    case 1: return in.ConsumeFloatingPointInRange<double>(0, 1000);
    default: return in.ConsumeFloatingPointInRange<double>(0, hi);
  }
}

constexpr const char* kPartitions[] = {"", "gpu-od", "gpu-spot", "gpu-h100", "gpu-od,gpu-spot", "cpu", "gpu-h100,x"};
constexpr const char* kGpuTypes[] = {"", "a100", "A100-40GB", "h100", "v100", "a100,h100", "t4", "a100-80gb"};
constexpr const char* kModels[] = {"", "350M", "7B", "13B", "70B", "1.5T", "100K", "llama2-7b", "llama2-70b", "gpt2",
                                   "layers=48,hidden=8192,heads=64", "7B,precision=fp32,optimizer=sgd",
                                   "350M,recompute=full,attention=flash", "layers=1,hidden=64", "bert-large"};
constexpr const char* kStrategies[] = {"auto", "single", "ddp", "zero", "pipeline", "tensor", "hybrid"};
constexpr const char* kCkptDirs[] = {"", "/scratch/run1", "/fsx/a/b", "/tmp/x"};

}  // namespace decide_draw

inline scaleguard::JobRequest draw_decide_request(FuzzedDataProvider& in) {
  using namespace decide_draw;
  scaleguard::JobRequest job;
  job.gpus_total = draw_int(in, 0, 100000);
  job.gpus_per_node = draw_int(in, 0, 100000);
  job.gpus_per_task = draw_int(in, 0, 100000);
  job.gpus_per_socket = draw_int(in, 0, 100000);
  job.gpu_type = pick_or_bytes(in, kGpuTypes, 64);
  job.nodes_min = draw_int(in, 0, 1000000);
  job.nodes_max = draw_int(in, 0, 1000000);
  job.ntasks = draw_int(in, 0, 1000000);
  job.time_limit_min = in.ConsumeBool() ? -1 : draw_int(in, 0, 5270400);
  job.partition = pick_or_bytes(in, kPartitions, 64);
  job.user = "uid 1000";
  job.model = pick_or_bytes(in, kModels, 128);
  job.tokens = draw_double(in, 1e18);
  job.single_gpu_hours = draw_double(in, 87840);
  job.strategy = kStrategies[in.ConsumeIntegralInRange<size_t>(0, 6)];
  job.deadline_hours = draw_double(in, 87840);
  job.ckpt_dir = kCkptDirs[in.ConsumeIntegralInRange<size_t>(0, 3)];
  job.ckpt_interval_min = draw_int(in, 0, 525600);
#if __has_include("scaleguard/envelope.h")
  // The envelope's inputs (drawn last, so that older seeds still read the same). Ranges as the
  // request reader produces them: host list and array counts, Slurm's uint16 task/socket
  // fields, the het job offset as a cast uint32 (anything but NO_VAL).
  job.nodes_listed = draw_int(in, 0, 1000000);
  job.ntasks_per_node = draw_int(in, 0, 65533);
  job.sockets_per_node = draw_int(in, 0, 65533);
  job.exclusive = in.ConsumeBool();
  job.array_tasks = draw_int(in, 0, 10000000);
  job.het_component = in.ConsumeBool() ? in.ConsumeIntegral<int>() : -1;
  job.het_prior_gpu_hours = draw_double(in, 1e12);
#endif
  job.eval_interval = in.ConsumeBool() ? 0 : draw_double(in, 2.0 * scaleguard::kMaxEvalEvery);
  job.eval_tokens = in.ConsumeBool() ? 0 : draw_double(in, 1e18);
  return job;
}

}  // namespace sg_fuzz
