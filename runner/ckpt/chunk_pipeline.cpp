#include "ckpt/chunk_pipeline.h"

#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace scaleguard::ckpt {

void ChunkPipeline::Free::operator()(char* p) const { std::free(p); }

std::string ChunkPipeline::run(size_t n, const Stage& produce, const Stage& consume, bool produce_on_helper) {
  constexpr size_t kDepth = 4;
  while (buffers_.size() < kDepth) {
    char* p = static_cast<char*>(std::aligned_alloc(kDirectAlign, kChunkBytes));
    if (!p) return "out of memory for the checkpoint I/O buffers";
    buffers_.emplace_back(p);
  }
  auto buffer = [&](size_t i) { return buffers_[i % kDepth].get(); };

  std::mutex m;
  std::condition_variable cv;
  size_t produced = 0, consumed = 0;
  bool stop = false;
  std::string error;
  // Records chunk i's outcome; false when the stage must stop.
  auto finish = [&](std::string why, size_t& count) {
    const bool ok = why.empty();
    {
      std::lock_guard<std::mutex> lock(m);
      if (ok) {
        ++count;
      } else {
        if (error.empty()) error = std::move(why);
        stop = true;
      }
    }
    cv.notify_all();
    return ok;
  };
  auto producer = [&] {
    for (size_t i = 0; i < n; ++i) {
      {
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, [&] { return stop || i - consumed < kDepth; });
        if (stop) return;
      }
      if (!finish(produce(i, buffer(i)), produced)) return;
    }
  };
  auto consumer = [&] {
    for (size_t i = 0; i < n; ++i) {
      {
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, [&] { return stop || produced > i; });
        if (produced <= i) return;
      }
      if (!finish(consume(i, buffer(i)), consumed)) return;
    }
  };
  std::thread helper = produce_on_helper ? std::thread(producer) : std::thread(consumer);
  if (produce_on_helper) consumer();
  else producer();
  // A stage ends early only after a failure has set `stop`, which wakes the other.
  helper.join();
  return error;
}

}  // namespace scaleguard::ckpt
