// Errors as values: every parser and config loader returns Result<T>; nothing in the
// planner throws across its API (the Slurm plugins call it from C).
#pragma once
#include <optional>
#include <string>
#include <utility>

namespace scaleguard {

struct Error {
  std::string message;   // what is wrong, e.g. "unknown key 'gpu_tyep'"
  std::string file;      // config file, empty for command-line values
  int line = 0;          // 1-based, 0 when unknown
  std::string field;     // key or option name
  std::string hint;      // how to fix it, e.g. "did you mean 'gpu_type'?"
  // "FILE:LINE: FIELD: MESSAGE (hint: HINT)" with the empty parts left out.
  std::string str() const;
};

template <class T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT: implicit on purpose
  Result(Error error) : error_(std::move(error)) {}      // NOLINT
  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const T& value() const& { return *value_; }
  T& value() & { return *value_; }
  T&& value() && { return std::move(*value_); }
  const T* operator->() const { return &*value_; }
  const T& operator*() const { return *value_; }
  const Error& error() const { return error_; }

 private:
  std::optional<T> value_;
  Error error_;
};

}  // namespace scaleguard
