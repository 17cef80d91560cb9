// model_fingerprint(): the key the probe store files measurements under (measurement.h).
#include <cstdint>
#include <cstdio>

#include "scaleguard/measurement.h"
#include "scaleguard/catalog.h"
#include "scaleguard/text.h"
#include "scaleguard/model.h"

namespace scaleguard {

const char* to_string(Trust t) { return t == Trust::admin ? "admin" : "own"; }

std::string model_fingerprint(const ModelSpec& m) {
  char canon[160];
  std::snprintf(canon, sizeof canon, "gpt;L=%d;h=%d;a=%d;s=%d;v=%d;p=%s", m.layers, m.hidden, m.heads, m.seq,
                m.vocab, to_string(m.precision));
  // FNV-1a 64: stable across builds and hosts, no dependency (this is a key, not a MAC: trust
  // comes from the record file's owner, see probe/README.md).
  std::uint64_t h = 1469598103934665603ULL;
  for (const char* c = canon; *c; ++c) h = (h ^ static_cast<unsigned char>(*c)) * 1099511628211ULL;
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

const char* device_of(const GpuType& gpu) { return gpu.host ? "cpu" : "cuda"; }

bool measurement_matches(const Measurement& m, const GpuType& gpu) {
  return m.device == device_of(gpu) && !m.gpu.empty() && text::iequals(m.gpu, gpu.name);
}

}  // namespace scaleguard
