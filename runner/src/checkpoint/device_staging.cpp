#include "checkpoint/device_staging.h"

#include <ATen/ops/from_blob.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "ckpt/shard_writer.h"
#include "config/config.h"

namespace scaleguard::run {
namespace {

// The CPU stand-in for tests: "device" buffers are host memory, mirrors are plain host
// buffers, a thread copies them in order (SCALEGUARD_TEST_DELAY_COPY=SECONDS[@STEP] holds it,
// so the training thread's fences must wait), and the "training stream" is the calling
// thread, so fence() waits on the host.
class HostStaging final : public DeviceStaging {
 public:
  ~HostStaging() override { join(); }
  const char* kind() const override { return "host test stand-in (SCALEGUARD_TEST_STAGING=host)"; }
  size_t add(const void* device, size_t bytes) override {
    join();
    buffers_.push_back({static_cast<const char*>(device), std::vector<char>(bytes)});
    std::lock_guard<std::mutex> lock(mu_);
    copied_ = buffers_.size();  // nothing in flight for a new buffer
    return buffers_.size() - 1;
  }
  void* host(size_t i) const override { return const_cast<char*>(buffers_[i].mirror.data()); }
  void start(int64_t step) override {
    join();
    {
      std::lock_guard<std::mutex> lock(mu_);
      copied_ = 0;
    }
    const unsigned delay = ckpt::test_hook_seconds("SCALEGUARD_TEST_DELAY_COPY", step);
    copier_ = std::thread([this, delay] {
      if (delay) ::sleep(delay);
      for (size_t i = 0; i < buffers_.size(); ++i) {
        std::memcpy(buffers_[i].mirror.data(), buffers_[i].device, buffers_[i].mirror.size());
        std::lock_guard<std::mutex> lock(mu_);
        copied_ = i + 1;
        cv_.notify_all();
      }
    });
  }
  void fence(size_t i) override { wait(i); }
  void wait(size_t i) override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return copied_ > i; });
  }

 private:
  void join() {
    if (copier_.joinable()) copier_.join();
  }
  struct Buffer {
    const char* device;
    std::vector<char> mirror;
  };
  std::vector<Buffer> buffers_;
  std::thread copier_;
  std::mutex mu_;
  std::condition_variable cv_;
  size_t copied_ = 0;  // buffers [0, copied_) are in their mirrors
};

}  // namespace

std::unique_ptr<DeviceStaging> make_host_staging() { return std::make_unique<HostStaging>(); }

std::unique_ptr<DeviceStaging> make_device_staging(const at::Device& device) {
  const char* test = std::getenv("SCALEGUARD_TEST_STAGING");
  if (test && std::strcmp(test, "host") == 0) return make_host_staging();
  // off: a GPU's async snapshot without staging (a pageable .to(kCPU) per tensor on the
  // training thread, as before), only to compare the stall (scripts/gpu-check.sh).
  if (test && std::strcmp(test, "off") == 0) return nullptr;
  if (!device.is_cuda()) return nullptr;
#ifdef SCALEGUARD_WITH_NCCL
  return make_cuda_staging(device.index());
#else
  throw RunError("asynchronous checkpoints of CUDA tensors need the CUDA staging, which this build lacks");
#endif
}

void StagedBuffers::add_storage_of(const at::Tensor& t) {
  const char* base = static_cast<const char*>(t.storage().data_ptr().get());
  const size_t bytes = t.storage().nbytes();
  if (bytes == 0) return;
  for (const Buffer& b : buffers_)
    if (b.device == base) return;
  if (find(base, bytes) >= 0) throw RunError("checkpoint staging: overlapping buffers");
  const size_t i = raw_->add(base, bytes);
  if (i != buffers_.size()) throw RunError("checkpoint staging: buffer index mismatch");
  buffers_.push_back({base, bytes});
  bytes_ += bytes;
}

long StagedBuffers::find(const void* p, size_t bytes) const {
  const char* lo = static_cast<const char*>(p);
  for (size_t i = 0; i < buffers_.size(); ++i)
    if (lo >= buffers_[i].device && lo + bytes <= buffers_[i].device + buffers_[i].bytes) return static_cast<long>(i);
  return -1;
}

namespace {
// Bytes from data_ptr() to one past the last element (strides >= 0, as the runner's are).
size_t span_bytes(const at::Tensor& t) {
  if (t.numel() == 0) return 0;
  int64_t last = 0;
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  return static_cast<size_t>(last + 1) * t.element_size();
}
}  // namespace

at::Tensor StagedBuffers::host_view(const at::Tensor& device_view) {
  const long i = find(device_view.data_ptr(), span_bytes(device_view));
  if (i < 0) throw RunError("checkpoint staging: a saved tensor lies in no staged buffer");
  const auto offset = static_cast<const char*>(device_view.data_ptr()) - buffers_[static_cast<size_t>(i)].device;
  at::Tensor v = at::from_blob(static_cast<char*>(raw_->host(static_cast<size_t>(i))) + offset, device_view.sizes(),
                               device_view.strides(), at::TensorOptions().dtype(device_view.scalar_type()));
  if (!v.is_contiguous()) raw_->wait(static_cast<size_t>(i));  // Snapshot::add copies it right away
  return v;
}

void StagedBuffers::fence(const at::Tensor& live) {
  if (!live.defined() || live.numel() == 0) return;
  const long i = find(live.data_ptr(), span_bytes(live));
  if (i >= 0) raw_->fence(static_cast<size_t>(i));
}

void StagedBuffers::wait_all() {
  for (size_t i = 0; i < buffers_.size(); ++i) raw_->wait(i);
}

}  // namespace scaleguard::run
