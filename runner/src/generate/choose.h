// Choosing the next token from a row of logits: greedy, temperature, top-k, top-p (nucleus),
// in Hugging Face's order (temperature, then top-k, then top-p), drawn with a seeded
// generator whose every draw is specified here (std::mt19937_64's 53 high bits), so a seed
// gives the same text on every machine and on CPU or GPU (the row is copied to the host).
// No Torch: tested alone (tests/runner/choose_test.cpp).
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace scaleguard::run {

struct Choice {
  double temperature = 0;  // 0: greedy (the largest logit, the lowest id among equals)
  int64_t top_k = 0;       // > 0: only the k largest logits (and any equal to the k-th) may be drawn
  double top_p = 1;        // < 1: only the most probable tokens whose probabilities sum to >= top_p
};

// "" or what is wrong with the settings (temperature >= 0, top-k >= 0, top-p in (0, 1]).
std::string check_choice(const Choice& c);

// One token id from `logits` (one per vocabulary entry; -inf allowed, NaN is an error).
// Greedy uses no randomness; otherwise exactly one draw from `rng`.
int64_t choose_token(const std::vector<float>& logits, const Choice& c, std::mt19937_64& rng);

// The probabilities choose_token() draws from (0 for excluded tokens), for tests.
std::vector<double> choice_distribution(const std::vector<float>& logits, const Choice& c);

}  // namespace scaleguard::run
