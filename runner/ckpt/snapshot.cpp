#include "ckpt/snapshot.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>

#include "hdf5_util.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace scaleguard::ckpt {
namespace {

// The host copy of a snapshot is written once now and read once later by the writer, so
// it bypasses the cache: non-temporal stores skip the read-for-ownership of the
// destination (1 GiB: 155 ms with memcpy, 115 ms streamed on one core of this VM; the
// training thread's fences copy whatever the writer thread has not reached yet).
void copy_streaming(char* to, const char* from, size_t bytes) {
#if defined(__SSE2__)
  const size_t head = std::min(bytes, (16 - reinterpret_cast<uintptr_t>(to) % 16) % 16);
  std::memcpy(to, from, head);
  to += head, from += head, bytes -= head;
  const size_t body = bytes / 64 * 64;
  for (size_t o = 0; o < body; o += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + o));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + o + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + o + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + o + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + o), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + o + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + o + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + o + 48), d);
  }
  _mm_sfence();   // the stores are visible before the chunk is marked copied
  to += body, from += body, bytes -= body;
#endif
  std::memcpy(to, from, bytes);
}

}  // namespace

void Snapshot::add(SnapshotTensor t, const at::Tensor& data) {
  if (!data.defined()) throw std::invalid_argument("checkpoint tensor '" + t.name + "' is undefined");
  if (h5::dtype_name(data.scalar_type()).empty())
    throw std::invalid_argument("checkpoint tensor '" + t.name + "' has unsupported dtype " +
                                std::string(c10::toString(data.scalar_type())));
  if (t.name.empty() || t.name.front() == '/' || t.name.back() == '/' ||
      t.name.find("//") != std::string::npos)
    throw std::invalid_argument("checkpoint tensor name '" + t.name + "' must be non-empty groups separated by '/'");
  const auto sizes = data.sizes();
  if (t.global_shape.size() != sizes.size() || t.offset.size() != sizes.size())
    throw std::invalid_argument("checkpoint tensor '" + t.name + "': global shape and offset need " +
                                std::to_string(sizes.size()) + " dimensions");
  for (size_t i = 0; i < sizes.size(); ++i)
    if (t.offset[i] < 0 || t.offset[i] + sizes[i] > t.global_shape[i])
      throw std::invalid_argument("checkpoint tensor '" + t.name + "': slice exceeds the global shape in dim " +
                                  std::to_string(i));
  // detach(): a snapshot never takes part in autograd. clone() gives the async writer its
  // own bytes; contiguous() alone may alias the live tensor (fine for a sync save).
  const bool on_cpu = data.device().is_cpu();
  at::Tensor host = data.detach().to(at::kCPU);
  t.data = copy_ && on_cpu ? host.clone(at::MemoryFormat::Contiguous) : host.contiguous();
  t.owned = copy_ || !on_cpu;
  bytes_ += t.data.nbytes();
  tensors_.push_back(std::move(t));
}

struct Snapshot::CopyWork {
  struct Chunk {
    const char* from;
    char* to;
    size_t bytes;
    std::atomic<int> state{0};   // kFree, kClaimed, kCopied
    Chunk(const char* f, char* t, size_t b) : from(f), to(t), bytes(b) {}
  };
  static constexpr int kFree = 0, kClaimed = 1, kCopied = 2;
  std::deque<Chunk> chunks;       // deque: atomics do not move
  std::vector<at::Tensor> dest;   // per tensor; undefined where the snapshot owns it already
  std::mutex m;
  std::condition_variable cv;

  // Copies chunk c unless another thread claimed it first.
  void claim_and_copy(Chunk& c) {
    int expected = kFree;
    if (!c.state.compare_exchange_strong(expected, kClaimed)) return;
    copy_streaming(c.to, c.from, c.bytes);
    std::lock_guard<std::mutex> lock(m);
    c.state = kCopied;
    cv.notify_all();
  }
  // Copies the chunks `pick` selects (those free), then waits for the ones others copy.
  template <class Pick>
  void copy_where(Pick pick) {
    for (auto& c : chunks)
      if (pick(c)) claim_and_copy(c);
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] {
      return std::all_of(chunks.begin(), chunks.end(), [&](const Chunk& c) { return !pick(c) || c.state == kCopied; });
    });
  }
};

void Snapshot::plan_copies(std::vector<at::Tensor>& reuse) {
  constexpr size_t kChunk = size_t{4} << 20;
  copies_ = std::make_shared<CopyWork>();
  copies_->dest.resize(tensors_.size());
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const at::Tensor& src = tensors_[i].data;
    if (tensors_[i].owned) continue;
    auto same = std::find_if(reuse.begin(), reuse.end(), [&](const at::Tensor& r) {
      return r.defined() && r.sizes() == src.sizes() && r.scalar_type() == src.scalar_type();
    });
    at::Tensor dst = same != reuse.end() ? std::move(*same) : at::empty(src.sizes(), src.options());
    if (same != reuse.end()) reuse.erase(same);
    // Both contiguous (add() made src so): a copy is a memcpy of byte ranges.
    const auto* from = static_cast<const char*>(src.data_ptr());
    auto* to = static_cast<char*>(dst.data_ptr());
    for (size_t off = 0; off < src.nbytes(); off += kChunk)
      copies_->chunks.emplace_back(from + off, to + off, std::min(kChunk, src.nbytes() - off));
    copies_->dest[i] = std::move(dst);
  }
}

void Snapshot::copy() {
  if (copies_) copies_->copy_where([](const CopyWork::Chunk&) { return true; });
}

void Snapshot::copy_overlapping(const void* begin, size_t bytes) {
  if (!copies_ || bytes == 0) return;
  const char* lo = static_cast<const char*>(begin);
  const char* hi = lo + bytes;
  copies_->copy_where([&](const CopyWork::Chunk& c) { return c.from < hi && lo < c.from + c.bytes; });
}

void Snapshot::adopt_copies() {
  for (size_t i = 0; copies_ && i < tensors_.size(); ++i) {
    if (!copies_->dest[i].defined()) continue;
    tensors_[i].data = std::move(copies_->dest[i]);
    tensors_[i].owned = true;
  }
  copy_ = true;
}

void Snapshot::set_staged(std::function<void()> wait_ready) {
  for (auto& t : tensors_) t.owned = true;  // nothing to copy: the mirrors are the copies
  wait_ready_ = std::move(wait_ready);
}

std::vector<at::Tensor> Snapshot::release_copies() {
  std::vector<at::Tensor> out;
  if (!copy_ || wait_ready_) return out;  // a staged snapshot's views are not spare buffers
  for (auto& t : tensors_) out.push_back(std::move(t.data));
  tensors_.clear();
  return out;
}

void Snapshot::add_slice(const std::string& name, const at::Tensor& data, std::vector<int64_t> global_shape,
                         std::vector<int64_t> offset) {
  add({name, {}, false, std::move(global_shape), std::move(offset)}, data);
}

void Snapshot::add_whole(const std::string& name, const at::Tensor& data) {
  add({name, {}, false, data.sizes().vec(), std::vector<int64_t>(data.dim(), 0)}, data);
}

void Snapshot::add_rank_state(const std::string& name, const at::Tensor& data) {
  add({name, {}, true, data.sizes().vec(), std::vector<int64_t>(data.dim(), 0)}, data);
}

void Snapshot::set_scalar(const std::string& group, const std::string& key, int64_t value) {
  scalars_.push_back({group, key, value});
}
void Snapshot::set_scalar(const std::string& group, const std::string& key, double value) {
  scalars_.push_back({group, key, value});
}

}  // namespace scaleguard::ckpt
