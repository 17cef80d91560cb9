// Value parsers shared by the CLI, the config loaders and both Slurm plugins: bounded,
// locale-free (std::from_chars), no exceptions.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include "scaleguard/decide.h"
#include "scaleguard/plan.h"
#include "parse_number.h"
#include "scaleguard/text.h"

namespace scaleguard {

namespace {
constexpr size_t kMaxValue = 64;  // no count, duration or TRES item needs more

Error value_error(std::string message, std::string hint) {
  Error e;
  e.message = std::move(message);
  e.hint = std::move(hint);
  return e;
}

bool too_long_or_control(const std::string& t) { return t.size() > kMaxValue || text::has_control(t); }
}  // namespace

std::optional<double> parse_number(const std::string& s) {
  if (s.empty() || s.size() > kMaxValue) return std::nullopt;
  const char* first = s.data();
  const char* last = s.data() + s.size();
  if (*first == '+') ++first;
  double v = 0;
  auto [ptr, ec] = std::from_chars(first, last, v, std::chars_format::general);
  if (ec != std::errc() || ptr != last || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<long long> parse_integer(const std::string& s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  long long v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

Result<double> parse_count(const std::string& raw) {
  const std::string hint = "write a number with an optional K, M, B or T suffix, e.g. 350M, 40B, 1.5T, 1e9";
  if (too_long_or_control(raw)) return value_error("malformed count", hint);
  std::string t = text::trim(raw);
  if (t.empty()) return value_error("empty count", hint);
  double scale = 1;
  switch (std::toupper(static_cast<unsigned char>(t.back()))) {
    case 'K': scale = 1e3; break;
    case 'M': scale = 1e6; break;
    case 'B': case 'G': scale = 1e9; break;
    case 'T': scale = 1e12; break;
    default: break;
  }
  if (scale != 1) t.pop_back();
  auto v = parse_number(t);
  if (!v) return value_error("'" + raw + "' is not a count", hint);
  const double n = *v * scale;
  if (n <= 0) return value_error("'" + raw + "' must be greater than 0", hint);
  if (n > 1e18) return value_error("'" + raw + "' is absurdly large (more than 1e18)", hint);
  return n;
}

// A billion of any --time field (days, hours, minutes or seconds) is already longer than 10
// years; bounding each field first keeps the sum below far inside long long (a field of up to
// 19 digits times 86400 overflowed: "307445734561825861" wrapped to 44 s = 1 minute).
constexpr long long kMaxTimeField = 1000000000;

Result<int> parse_slurm_minutes(const std::string& raw) {
  const std::string hint =
      "use Slurm's --time forms: MIN, MIN:SEC, H:MIN:SEC, D-H, D-H:MIN, D-H:MIN:SEC or INFINITE";
  if (too_long_or_control(raw)) return value_error("malformed time", hint);
  std::string t = text::trim(raw);
  if (t.empty()) return value_error("empty time", hint);
  if (text::iequals(t, "infinite") || text::iequals(t, "unlimited")) return -1;
  long long days = 0;
  std::string rest = t;
  bool has_days = false;
  if (auto dash = t.find('-'); dash != std::string::npos) {
    auto d = parse_integer(t.substr(0, dash));
    if (!d || *d < 0) return value_error("'" + raw + "' is not a time", hint);
    if (*d > kMaxTimeField) return value_error("'" + raw + "' is longer than 10 years", hint);
    days = *d;
    rest = t.substr(dash + 1);
    has_days = true;
  }
  auto parts = text::split(rest, ':');
  if (parts.size() > 3) return value_error("'" + raw + "' has too many ':' fields", hint);
  std::vector<long long> v;
  for (const auto& p : parts) {
    auto n = parse_integer(p);
    if (!n || *n < 0) return value_error("'" + raw + "' is not a time", hint);
    if (*n > kMaxTimeField) return value_error("'" + raw + "' is longer than 10 years", hint);
    v.push_back(*n);
  }
  long long seconds = 0;
  if (has_days) {  // D-H, D-H:M, D-H:M:S
    seconds = days * 86400 + v[0] * 3600 + (v.size() > 1 ? v[1] * 60 : 0) + (v.size() > 2 ? v[2] : 0);
  } else if (v.size() == 1) {  // MIN
    seconds = v[0] * 60;
  } else if (v.size() == 2) {  // MIN:SEC
    seconds = v[0] * 60 + v[1];
  } else {  // H:M:S
    seconds = v[0] * 3600 + v[1] * 60 + v[2];
  }
  const long long minutes = (seconds + 59) / 60;  // Slurm rounds seconds up to a minute
  if (minutes > 366LL * 24 * 60 * 10) return value_error("'" + raw + "' is longer than 10 years", hint);
  if (minutes == 0) return -1;  // Slurm: "a time limit of zero requests that no time limit be imposed"
  return static_cast<int>(minutes);
}

Result<double> parse_hours(const std::string& raw) {
  const std::string hint = "write hours as 11, 11h, 90m, 2d, 1w or Slurm's D-HH:MM:SS";
  if (too_long_or_control(raw)) return value_error("malformed duration", hint);
  std::string t = text::trim(raw);
  if (t.empty()) return value_error("empty duration", hint);
  if (t.find(':') != std::string::npos || (t.find('-') != std::string::npos && t.front() != '-')) {
    auto m = parse_slurm_minutes(t);
    if (!m) return value_error("'" + raw + "' is not a duration", hint);
    if (m.value() < 0) return value_error("'" + raw + "' is not a finite duration", hint);
    return m.value() / 60.0;
  }
  double scale = 1;
  switch (std::tolower(static_cast<unsigned char>(t.back()))) {
    case 's': scale = 1.0 / 3600; break;
    case 'm': scale = 1.0 / 60; break;
    case 'h': scale = 1; break;
    case 'd': scale = 24; break;
    case 'w': scale = 168; break;
    default: scale = 0; break;
  }
  if (scale != 0) t.pop_back(); else scale = 1;
  auto v = parse_number(t);
  if (!v) return value_error("'" + raw + "' is not a duration", hint);
  const double h = *v * scale;
  if (h <= 0) return value_error("'" + raw + "' must be greater than 0", hint);
  if (h > 24 * 366 * 10) return value_error("'" + raw + "' is longer than 10 years", hint);
  return h;
}

Result<std::string> parse_strategy(const std::string& raw) {
  const std::string hint = "one of auto, single, ddp, zero, pipeline, tensor, hybrid";
  if (too_long_or_control(raw)) return value_error("malformed strategy", hint);
  const std::string t = text::lower(text::trim(raw));
  if (t == "auto") return t;
  // A few common spellings map to the ladder's names.
  if (t == "dp") return std::string("ddp");
  if (t == "fsdp" || t == "sharded") return std::string("zero");
  if (t == "pp") return std::string("pipeline");
  if (t == "tp") return std::string("tensor");
  if (t == "3d") return std::string("hybrid");
  if (strategy_from_string(t)) return t;
  return value_error("unknown strategy '" + raw + "'", hint);
}

namespace {

// A GRES count the way Slurm reads it (slurm_protocol_defs.c _is_valid_number and suffix_mult,
// the same in 22.05, 23.11 and 25.11): a decimal digit first, strtoull, then nothing or one of
// Slurm's suffixes, case-insensitive: k/kib (x1024), kb (x1000), m/mib, mb, g/gib, gb, t/tib,
// tb, p/pib, pb. kind: 1 = a count, 0 = not a number (Slurm then reads a type, or refuses
// after '='), -1 = a number Slurm would overflow (wraps in uint64): refused rather than guessed.
int slurm_count(const std::string& f, long long* out) {
  if (f.empty()) return 0;
  const unsigned char c0 = static_cast<unsigned char>(f[0]);
  if (c0 == '+' || c0 == '-' || std::isspace(c0)) return -1;  // Slurm: a type named "+8": refused
  if (!std::isdigit(c0)) return 0;
  size_t i = 0;
  long long v = 0;
  for (; i < f.size() && std::isdigit(static_cast<unsigned char>(f[i])); ++i) {
    if (v > 1000000000LL) return -1;  // far beyond any real count: refuse, never wrap
    v = v * 10 + (f[i] - '0');
  }
  const std::string suffix = text::lower(f.substr(i));
  static const struct { const char* s; long long mult; } kSuffixes[] = {
      {"", 1},
      {"k", 1LL << 10}, {"kib", 1LL << 10}, {"kb", 1000LL},
      {"m", 1LL << 20}, {"mib", 1LL << 20}, {"mb", 1000000LL},
      {"g", 1LL << 30}, {"gib", 1LL << 30}, {"gb", 1000000000LL},
      {"t", 1LL << 40}, {"tib", 1LL << 40}, {"tb", 1000000000000LL},
      {"p", 1LL << 50}, {"pib", 1LL << 50}, {"pb", 1000000000000000LL}};
  for (const auto& s : kSuffixes) {
    if (suffix != s.s) continue;
    if (v > 0 && s.mult > (1LL << 50) / v) return -1;
    *out = v * s.mult;
    return 1;
  }
  return 0;  // "1x": Slurm reads a type (after ':') or refuses (after '=')
}

long long ceil_div(long long a, long long b) { return b <= 0 ? 0 : (a + b - 1) / b; }

}  // namespace

Result<GpuTres> parse_gpu_tres(const std::string& raw, const SharedGpuGres& shared) {
  const std::string hint = "write gres:gpu:N, gres:gpu:TYPE:N, gres/gpu:N or gpu:TYPE:N";
  if (raw.size() > 4096 || text::has_control(raw)) return value_error("malformed TRES string", hint);
  GpuTres out;
  long long total = 0;
  for (auto item : text::split(raw, ',')) {
    if (item.empty()) continue;
    if (item.rfind("gres:", 0) == 0 || item.rfind("gres/", 0) == 0) item = item.substr(5);
    // Slurm's grammar (slurm_get_next_tres): the count follows the last '=', else the last
    // ':' (gpu:a100=8 and gpu:a100:8 are 8 GPUs of type a100); after ':' a non-number is the
    // type with a count of 1 (gpu:a100), after '=' it is an error; the type is what lies
    // between the name's first ':' and the count; an entry with a count of 0 is dropped.
    std::string head = item, type;
    long long count = 1;
    const auto eq = item.rfind('='), colon = item.rfind(':');
    const auto sep = eq != std::string::npos ? eq : colon;
    const std::string gres_name = item.substr(0, item.find_first_of(":="));
    if (gres_name != "gpu" && gres_name != "shard" && gres_name != "mps") continue;  // cpu=4, mem=10G, ...
    if (sep != std::string::npos) {
      const std::string tail = item.substr(sep + 1);
      if (tail.empty() || tail.size() > 64) return value_error("'" + item + "': empty or overlong count", hint);
      head = item.substr(0, sep);
      const int kind = slurm_count(tail, &count);
      if (kind < 0) return value_error("'" + item + "' has a count Slurm would read differently", hint);
      if (kind == 0) {
        if (item[sep] == '=') return value_error("'" + item + "' has a bad GPU count", hint);
        count = 1;
        type = tail;
      }
    }
    const auto name_end = head.find(':');
    const std::string name = head.substr(0, name_end);
    long long per_gpu = 0;  // units of this GRES that make one GPU; 0 = not a GPU
    if (name == "gpu") per_gpu = 1;
    else if (name == "shard") per_gpu = shared.shard_per_gpu;
    else if (name == "mps") per_gpu = shared.mps_per_gpu;
    if (per_gpu <= 0) continue;
    if (name_end != std::string::npos) {
      if (!type.empty()) return value_error("'" + item + "' has too many ':' fields", hint);
      type = head.substr(name_end + 1);
      if (type.empty() || type.size() > 64) return value_error("'" + item + "': empty or overlong type", hint);
      if (type.find(':') != std::string::npos) return value_error("'" + item + "' has too many ':' fields", hint);
    }
    if (count == 0) continue;  // Slurm drops it: its type must not stand for a later entry's
    if (count > 100000LL * per_gpu) return value_error("'" + item + "': GPU count out of range", hint);
    if (name == "gpu" && !type.empty()) {
      if (!out.type.empty() && !text::iequals(type, out.type)) out.type += "," + type;  // one_gpu_type judges it
      else if (out.type.empty()) out.type = type;
    }
    // A shared GRES counts as the GPUs it takes a share of, rounded up (policy shared_gpu_gres).
    total += ceil_div(count, per_gpu);
    if (total > 100000) return value_error("GPU count out of range", hint);
  }
  out.count = static_cast<int>(total);
  return out;
}

Result<int> parse_held_gpus(const std::string& tres, const SharedGpuGres& shared) {
  const std::string hint = "a TRES list like cpu=8,gres/gpu=4,gres/gpu:a100=4";
  if (tres.size() > 65536 || text::has_control(tres)) return value_error("malformed TRES list", hint);
  const char* const kNames[] = {"gpu", "shard", "mps"};
  long long untyped[3] = {-1, -1, -1}, typed[3] = {0, 0, 0};
  for (const auto& item : text::split(tres, ',')) {
    if (item.rfind("gres/", 0) != 0) continue;   // cpu=8, mem=64G, node=1, license/...
    const auto eq = item.find('=');
    const std::string key = item.substr(5, eq == std::string::npos ? std::string::npos : eq - 5);
    const std::string name = key.substr(0, key.find(':'));
    for (int i = 0; i < 3; ++i) {
      if (name != kNames[i]) continue;
      if (eq == std::string::npos) return value_error("TRES entry '" + item + "' is not NAME=COUNT", hint);
      const std::string count = item.substr(eq + 1);
      if (count.empty() || count.size() > 9 || count.find_first_not_of("0123456789") != std::string::npos)
        return value_error("GPU count '" + count + "' in '" + item + "' is not a whole number up to 999999999", hint);
      const long long n = std::stoll(count);
      if (key == name) untyped[i] = n;
      else typed[i] = std::min(typed[i] + n, 1LL << 40);
    }
  }
  // Back through parse_gpu_tres: the one place that says what a shard or an mps unit is worth.
  std::string list;
  for (int i = 0; i < 3; ++i) {
    const long long n = untyped[i] >= 0 ? untyped[i] : typed[i];
    if (n > 0) list += (list.empty() ? "" : ",") + std::string(kNames[i]) + "=" + std::to_string(n);
  }
  auto g = parse_gpu_tres(list, shared);
  if (!g) return g.error();
  return g->count;
}

}  // namespace scaleguard
