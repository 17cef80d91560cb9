// Harness 3: decide() with the shipped configs/policy.ini on a JobRequest drawn from the
// input (decide_request.h: FuzzedDataProvider, inside what the request reader and the CLI can
// hand over), so a crash here is one a user can cause.
// decide() is noexcept and must answer every request; its JSON must parse and its rewrite
// must name only sane values.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdio>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "decide_request.h"
#include "fuzz_common.h"
#include "scaleguard/decide.h"
#include "scaleguard/policy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const scaleguard::Policy& policy = sg_fuzz::shipped_policy();
  FuzzedDataProvider in(data, size);
  const scaleguard::JobRequest job = sg_fuzz::draw_decide_request(in);

  if (sg_fuzz::verbose()) sg_fuzz::print_request(job);
  const scaleguard::Decision d = scaleguard::decide(job, policy);
  if (sg_fuzz::verbose()) std::fprintf(stderr, "decision: %s\n", d.summary.c_str());

  const std::string json = scaleguard::to_json(d);
  SG_FUZZ_CHECK(nlohmann::json::accept(json), json.substr(0, 512));
  SG_FUZZ_CHECK(d.plan_json.empty() || nlohmann::json::accept(d.plan_json), d.plan_json.substr(0, 512));
  SG_FUZZ_CHECK(!d.summary.empty(), "a decision without a summary");
  for (const auto& [name, value] : d.plan_env)
    SG_FUZZ_CHECK(name.rfind("SCALEGUARD_", 0) == 0 && !name.empty(), name);
  const scaleguard::Rewrite& rw = d.rewrite;
  if (d.action == scaleguard::Action::rewrite) SG_FUZZ_CHECK(!rw.empty(), d.summary);
  if (rw.gpus_total) SG_FUZZ_CHECK(*rw.gpus_total > 0 && *rw.gpus_total <= 100000, d.summary);
  if (rw.gpus_per_node) SG_FUZZ_CHECK(*rw.gpus_per_node > 0 && *rw.gpus_per_node <= 100000, d.summary);
  if (rw.nodes) SG_FUZZ_CHECK(*rw.nodes > 0 && *rw.nodes <= 1000000, d.summary);
  if (rw.time_limit_min) SG_FUZZ_CHECK(*rw.time_limit_min != 0, d.summary);
  SG_FUZZ_CHECK(rw.signal_before_s >= 0, d.summary);
  return 0;
}
