#include <charconv>
#include <cmath>

#include "scaleguard/metrics.h"

namespace scaleguard::metrics {

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string escape_label(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

namespace {
// HELP text escapes backslash and newline only.
std::string escape_help(const std::string& v) {
  std::string out;
  for (char c : v) out += c == '\\' ? "\\\\" : c == '\n' ? "\\n" : std::string(1, c);
  return out;
}
}  // namespace

void Text::family(const std::string& name, const char* type, const std::string& help) {
  out_ += "# HELP " + name + " " + escape_help(help) + "\n# TYPE " + name + " " + type + "\n";
}

void Text::sample(const std::string& name, const Labels& labels, double value) {
  out_ += name;
  if (!labels.empty()) {
    out_ += '{';
    for (std::size_t i = 0; i < labels.size(); ++i)
      out_ += (i ? "," : "") + labels[i].first + "=\"" + escape_label(labels[i].second) + "\"";
    out_ += '}';
  }
  out_ += ' ' + format_value(value) + '\n';
}

void Text::histogram(const std::string& name, const Labels& labels, const std::vector<double>& bounds,
                     const std::vector<std::uint64_t>& counts, double sum) {
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i <= bounds.size(); ++i) {
    cumulative += i < counts.size() ? counts[i] : 0;
    Labels l = labels;
    l.emplace_back("le", i < bounds.size() ? format_value(bounds[i]) : "+Inf");
    sample(name + "_bucket", l, static_cast<double>(cumulative));
  }
  sample(name + "_sum", labels, sum);
  sample(name + "_count", labels, static_cast<double>(cumulative));
}

}  // namespace scaleguard::metrics
