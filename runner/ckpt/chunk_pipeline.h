// The two-stage pipeline behind the raw checkpoint reads and writes: chunk k+1 is read from
// (or written to) the disk while chunk k is hashed and copied, through a few reused buffers.
#pragma once
#include <cstddef>
#include <functional>
#include <string>

namespace scaleguard::ckpt {

// Runs produce(i) then consume(i) for chunks i = 0..n-1, with at most `depth` chunks produced
// and not yet consumed (chunk i may reuse chunk i - depth's buffer). One stage runs on a
// helper thread (`produce_on_helper` says which), the other on the caller's, so they overlap.
// Each returns "" or why it failed; the first failure stops both and is returned.
std::string run_chunk_pipeline(size_t n, size_t depth, const std::function<std::string(size_t)>& produce,
                               const std::function<std::string(size_t)>& consume, bool produce_on_helper);

}  // namespace scaleguard::ckpt
