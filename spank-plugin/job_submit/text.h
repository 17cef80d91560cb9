// Hostile-input hygiene for strings that come from a job submission or go back into one.
#pragma once
#include <string>
#include <string_view>

namespace sg_slurm {

constexpr size_t kMaxValue = 4096;     // longest --train-* value or TRES string we read
constexpr size_t kMaxComment = 1024;   // longest text we add to a job comment
constexpr size_t kMaxMessage = 2048;   // longest message we return to the user

// True if `text` has a byte below 0x20 or 0x7f (newline, tab, escape, ...).
bool has_control(std::string_view text);

// One printable line: control characters become spaces, runs of spaces collapse, and the
// result is cut to `max` bytes (at a UTF-8 boundary) with "..." when shortened.
std::string one_line(std::string_view text, size_t max);

// A short quoted preview of an untrusted value for error messages.
std::string preview(std::string_view value);

// An environment variable name we are willing to set: SCALEGUARD_[A-Z0-9_]+.
bool is_plan_env_name(std::string_view name);

}  // namespace sg_slurm
