// TensorBoard event files without TensorFlow or protobuf: TFRecord framing (uint64 length,
// masked CRC32C of the length, data, masked CRC32C of the data) around hand-encoded `Event`
// protobufs. Only what scalars need:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace scaleguard::run {

uint32_t crc32c(const void* data, size_t n);  // Castagnoli, reflected (as TFRecord uses)

class EventWriter {
 public:
  // Creates DIR (one level) and DIR/events.out.tfevents.<unix time>.<hostname> (".<pid>" added
  // when that name exists) and writes the "brain.Event:2" record. Throws RunError.
  explicit EventWriter(const std::string& dir);
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;
  // One Event at `step` holding these scalars (tag, value); flushed, so TensorBoard sees it live.
  // A failed write warns once on stderr and ends the file (training goes on).
  void scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values);
  const std::string& path() const { return path_; }

 private:
  void record(const std::string& event);
  std::string path_;
  FILE* f_ = nullptr;
};

}  // namespace scaleguard::run
