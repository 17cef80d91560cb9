// Harness 1: the planner's value parsers, the first code every untrusted --train-* value and
// TRES string reaches (CLI, SPANK plugin, job_submit). The whole input is one value; every
// parser reads it, and what each one accepts must lie in its documented range. Also the
// host list and array index counters of envelope.h, which the request reader applies to
// --nodelist and --array.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_common.h"
#include "scaleguard/catalog.h"
#include "scaleguard/decide.h"
#include "scaleguard/model.h"
#include "scaleguard/probe_store.h"
#if __has_include("scaleguard/envelope.h")
#include "scaleguard/envelope.h"  // host lists and array indices (the request reader counts them)
#define SG_FUZZ_ENVELOPE 1
#endif

namespace {

const scaleguard::Catalog& catalog() {
  static const scaleguard::Catalog c = [] {
    auto loaded = scaleguard::load_catalog(sg_fuzz::config_dir() + "/catalog.ini");
    if (!loaded) sg_fuzz::fail("cannot load the shipped catalog", loaded.error().str());
    return loaded.value();
  }();
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);

  if (auto gpus = scaleguard::parse_gpu_tres(text)) {
    SG_FUZZ_CHECK(gpus->count >= 0 && gpus->count <= 100000, text);
    SG_FUZZ_CHECK(!sg_fuzz::has_control(gpus->type), text);
  }
  // Shared GPU GRES counted as GPUs (policy shared_gpu_gres = shard:8, mps:100).
  if (auto gpus = scaleguard::parse_gpu_tres(text, scaleguard::SharedGpuGres{8, 100})) {
    SG_FUZZ_CHECK(gpus->count >= 0 && gpus->count <= 100000, text);
  }
#ifdef SG_FUZZ_ENVELOPE
  if (auto n = scaleguard::count_hostlist(text)) SG_FUZZ_CHECK(*n >= 0 && *n <= 1000000, text);
  if (auto n = scaleguard::count_array_tasks(text)) SG_FUZZ_CHECK(*n >= 0 && *n <= 10000000, text);
#endif
  // A probe store record (users write them; slurmctld reads them): what parses is in range and
  // survives a round trip through format_record.
  if (auto rec = scaleguard::probe::parse_record(text)) {
    SG_FUZZ_CHECK(std::isfinite(rec->speedup) && rec->speedup > 0 && rec->comm_ratio >= 0 && rec->ranks >= 2, text);
    SG_FUZZ_CHECK(!sg_fuzz::has_control(rec->user) && !sg_fuzz::has_control(rec->job_id), text);
    auto again = scaleguard::probe::parse_record(scaleguard::probe::format_record(*rec));
    SG_FUZZ_CHECK(again && again->fingerprint == rec->fingerprint && again->instance == rec->instance &&
                      again->time == rec->time,
                  text);
  }
  if (auto n = scaleguard::parse_count(text)) {
    SG_FUZZ_CHECK(std::isfinite(*n) && *n > 0 && *n <= 1e18, text);
  }
  if (auto h = scaleguard::parse_hours(text)) {
    SG_FUZZ_CHECK(std::isfinite(*h) && *h > 0 && *h <= 24 * 366 * 10, text);
  }
  if (auto m = scaleguard::parse_slurm_minutes(text)) {
    SG_FUZZ_CHECK(*m == -1 || (*m > 0 && *m <= 366 * 24 * 60 * 10), text);
  }
  if (auto s = scaleguard::parse_strategy(text)) {
    static const char* const kNames[] = {"auto", "single", "ddp", "zero", "pipeline", "tensor", "hybrid"};
    bool known = false;
    for (const char* name : kNames) known |= *s == name;
    SG_FUZZ_CHECK(known, *s);
  }
  if (auto spec = scaleguard::parse_model_spec(text, catalog())) {
    const scaleguard::ModelSpec& m = *spec;
    SG_FUZZ_CHECK(std::isfinite(m.params) && m.params >= 1e5 && m.params <= 1e14, text);
    SG_FUZZ_CHECK(m.layers > 0 && m.hidden > 0 && m.heads > 0 && m.seq > 0 && m.vocab > 0, text);
    SG_FUZZ_CHECK(m.hidden % m.heads == 0, text);
    // A count the parser accepted must give a shape: derive_shape is the count path's core.
    if (auto n = scaleguard::parse_count(text); n && *n >= 1e5 && *n <= 1e14) {
      auto shape = scaleguard::derive_shape(*n);
      SG_FUZZ_CHECK(shape.ok(), text);
      SG_FUZZ_CHECK(shape->layers >= 1 && shape->hidden >= 64 && shape->heads >= 1, text);
    }
  }
  // validate_model_spec must agree with parse_model_spec and produce one printable line.
  auto valid = scaleguard::validate_model_spec(text, catalog());
  SG_FUZZ_CHECK(valid.ok() == scaleguard::parse_model_spec(text, catalog()).ok(), text);
  if (valid) SG_FUZZ_CHECK(!sg_fuzz::has_control(*valid), *valid);
  (void)scaleguard::parse_precision(text);
  (void)scaleguard::parse_optimizer(text);
  (void)scaleguard::parse_recompute(text);
  return 0;
}
