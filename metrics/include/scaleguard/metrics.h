// Prometheus text exposition (format 0.0.4) for the node exporter's textfile collector, and
// the atomic writer of a .prom file. No HTTP server anywhere: job_submit/scaleguard and
// `scaleguard budget sync` each write their own file; the node exporter serves them.
// Pure C++17, no exceptions thrown for bad input (names are ours; label values are escaped).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace scaleguard::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

// Builds one exposition text. Each family is started once (HELP, TYPE), then its samples.
class Text {
 public:
  // type: "counter", "gauge" or "histogram".
  void family(const std::string& name, const char* type, const std::string& help);
  void sample(const std::string& name, const Labels& labels, double value);
  // One histogram series: `counts` per bucket (not cumulative), bounds.size() + 1 of them
  // (the last is +Inf); written as cumulative _bucket{le}, _sum and _count.
  void histogram(const std::string& name, const Labels& labels, const std::vector<double>& bounds,
                 const std::vector<std::uint64_t>& counts, double sum);
  const std::string& str() const { return out_; }

 private:
  std::string out_;
};

// A sample value as Prometheus reads it: shortest round-trip decimal, +Inf, -Inf, NaN.
std::string format_value(double v);
// Label value escaping: backslash, double quote and newline.
std::string escape_label(const std::string& v);

// "" when `path` may name a textfile: absolute, no "..", a file name ending ".prom" (the
// collector reads only those). Else why not.
std::string check_textfile_path(const std::string& path);

// Replaces `path` with `text` whole: a new file beside it (hidden name, not *.prom, created
// O_EXCL relative to the directory opened O_NOFOLLOW), mode 0644, renamed over the old one;
// the collector never reads half a file and no symlink is followed. A directory anyone may
// write is refused. Returns "" or why it was not written (never throws).
std::string write_textfile(const std::string& path, const std::string& text);

}  // namespace scaleguard::metrics
