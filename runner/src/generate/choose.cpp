#include "generate/choose.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "config/config.h"

namespace scaleguard::run {

std::string check_choice(const Choice& c) {
  if (!(c.temperature >= 0) || !std::isfinite(c.temperature)) return "temperature must be >= 0 (0 = greedy)";
  if (c.top_k < 0) return "top-k must be >= 0 (0 = off)";
  if (!(c.top_p > 0 && c.top_p <= 1)) return "top-p must be in (0, 1] (1 = off)";
  return "";
}

std::vector<double> choice_distribution(const std::vector<float>& logits, const Choice& c) {
  const size_t V = logits.size();
  if (V == 0) throw RunError("sample: an empty row of logits");
  for (float x : logits)
    if (std::isnan(x)) throw RunError("sample: the model's logits hold NaN");
  std::vector<double> p(V, 0.0);
  if (c.temperature == 0) {  // greedy: all the mass on the first largest
    p[static_cast<size_t>(std::max_element(logits.begin(), logits.end()) - logits.begin())] = 1;
    return p;
  }
  std::vector<double> z(V);
  for (size_t i = 0; i < V; ++i) z[i] = static_cast<double>(logits[i]) / c.temperature;
  const double ninf = -std::numeric_limits<double>::infinity();
  if (c.top_k > 0 && static_cast<size_t>(c.top_k) < V) {  // HF: remove scores < the k-th largest
    std::vector<double> sorted = z;
    std::nth_element(sorted.begin(), sorted.begin() + (c.top_k - 1), sorted.end(), std::greater<double>());
    const double kth = sorted[static_cast<size_t>(c.top_k - 1)];
    for (double& x : z)
      if (x < kth) x = ninf;
  }
  const double top = *std::max_element(z.begin(), z.end());
  if (top == ninf) throw RunError("sample: every logit is -inf");
  double sum = 0;
  for (size_t i = 0; i < V; ++i) sum += p[i] = std::exp(z[i] - top);
  for (double& x : p) x /= sum;
  if (c.top_p < 1) {  // the most probable first, until their mass reaches top_p (that one kept)
    std::vector<size_t> order(V);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&p](size_t a, size_t b) { return p[a] > p[b]; });
    double mass = 0, kept = 0;
    size_t i = 0;
    for (; i < V && mass < c.top_p; ++i) mass += p[order[i]];
    for (size_t j = i; j < V; ++j) p[order[j]] = 0;
    for (size_t j = 0; j < i; ++j) kept += p[order[j]];
    for (double& x : p) x /= kept;
  }
  return p;
}

int64_t choose_token(const std::vector<float>& logits, const Choice& c, std::mt19937_64& rng) {
  const std::vector<double> p = choice_distribution(logits, c);
  if (c.temperature == 0) return std::max_element(p.begin(), p.end()) - p.begin();
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;  // [0, 1), 53 random bits
  double acc = 0;
  int64_t last = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] <= 0) continue;
    acc += p[i];
    last = static_cast<int64_t>(i);
    if (u < acc) return last;
  }
  return last;  // rounding left u just above the total: the last possible token
}

}  // namespace scaleguard::run
