// Shared by the harnesses: where the shipped configs are, and a way to fail loudly.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "scaleguard/decide.h"
#include "scaleguard/policy.h"

namespace sg_fuzz {

// configs/ of the source tree (compiled in), or $SCALEGUARD_FUZZ_CONFIGS.
inline std::string config_dir() {
  if (const char* env = std::getenv("SCALEGUARD_FUZZ_CONFIGS"); env && *env) return env;
  return SCALEGUARD_FUZZ_CONFIGS;
}

// A broken invariant: print it and abort, so libFuzzer saves the input as a crash.
[[noreturn]] inline void fail(const char* what, const std::string& detail = "") {
  std::fprintf(stderr, "\nscaleguard fuzz: invariant broken: %s%s%s\n", what,
               detail.empty() ? "" : ": ", detail.c_str());
  std::abort();
}
#define SG_FUZZ_CHECK(cond, detail) \
  do {                              \
    if (!(cond)) ::sg_fuzz::fail(#cond, (detail)); \
  } while (0)

// The shipped policy (configs/policy.ini with configs/catalog.ini), loaded once.
inline const scaleguard::Policy& shipped_policy() {
  static std::shared_ptr<const scaleguard::Policy> policy = [] {
    auto loaded = scaleguard::load_policy(config_dir() + "/policy.ini");
    if (!loaded) fail("cannot load the shipped policy", loaded.error().str());
    return loaded.value();
  }();
  return *policy;
}

// SCALEGUARD_FUZZ_VERBOSE set: harnesses print what they drew (for reading a crash input).
inline bool verbose() {
  static const bool on = std::getenv("SCALEGUARD_FUZZ_VERBOSE") != nullptr;
  return on;
}

inline void print_request(const scaleguard::JobRequest& j) {
  std::fprintf(stderr,
               "request: gpus=%d per_node=%d per_task=%d per_socket=%d type='%s' nodes=%d-%d ntasks=%d "
               "time=%d partition='%s' model='%s' tokens=%g single_gpu_hours=%g strategy=%s deadline=%g "
               "ckpt_dir='%s' ckpt_interval=%d\n",
               j.gpus_total, j.gpus_per_node, j.gpus_per_task, j.gpus_per_socket, j.gpu_type.c_str(), j.nodes_min,
               j.nodes_max, j.ntasks, j.time_limit_min, j.partition.c_str(), j.model.c_str(), j.tokens,
               j.single_gpu_hours, j.strategy.c_str(), j.deadline_hours, j.ckpt_dir.c_str(), j.ckpt_interval_min);
#if __has_include("scaleguard/envelope.h")
  std::fprintf(stderr,
               "  nodes_listed=%d ntasks_per_node=%d sockets_per_node=%d exclusive=%d array_tasks=%d "
               "het_component=%d het_prior_gpu_hours=%g\n",
               j.nodes_listed, j.ntasks_per_node, j.sockets_per_node, j.exclusive, j.array_tasks, j.het_component,
               j.het_prior_gpu_hours);
#endif
  std::fprintf(stderr, "  eval_interval=%g eval_tokens=%g\n", j.eval_interval, j.eval_tokens);
}

inline bool has_control(const std::string& s) {
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return true;
  return false;
}

}  // namespace sg_fuzz
