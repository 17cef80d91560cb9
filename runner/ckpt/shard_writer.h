// Writes one rank's shard file (HDF5) and returns its manifest entry. Local: no collectives,
// so it can run on a background thread. Only one thread may use HDF5 at a time (the async
// saver's writer thread, while the main thread leaves HDF5 alone).
#pragma once
#include <string>

#include "ckpt/snapshot.h"
#include "scaleguard/ckpt_manifest.h"
#include "scaleguard/result.h"

namespace scaleguard::ckpt {

// Writes dir/shard-<rank>.h5, fsyncs it, and checksums every dataset and the whole file.
// Test hook: SCALEGUARD_TEST_PAUSE_IN_SAVE=SECONDS (or SECONDS@STEP: only when saving that
// step) sleeps after the first dataset, having printed "scaleguard-ckpt: test pause" and its
// pid to stderr, so a test can kill it there.
Result<ShardEntry> write_shard(const std::string& dir, int rank, const Snapshot& snap);

// Test hooks: the environment variable's SECONDS, or SECONDS@STEP when saving that step
// (a test can let earlier saves of a real training run commit and hold a later one); else 0.
unsigned test_hook_seconds(const char* variable, int64_t step);

}  // namespace scaleguard::ckpt
