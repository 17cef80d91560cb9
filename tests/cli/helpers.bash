# Shared by the CLI tests: the binary, bats-assert, and checks that a run ended as a program
# should (an exit code, not a signal or an uncaught exception).
bats_require_minimum_version 1.5.0
bats_load_library_path=/usr/lib/bats
load "$bats_load_library_path/bats-support/load"
load "$bats_load_library_path/bats-assert/load"

setup() {
  : "${SCALEGUARD_BIN:?}" "${SCALEGUARD_SOURCE_DIR:?}" "${SCALEGUARD_CLI_DATA:?}"
  # Defaults come from the source tree, never from the caller's environment.
  unset SCALEGUARD_POLICY SCALEGUARD_CATALOG
  cd "$SCALEGUARD_SOURCE_DIR"
}

sg() { "$SCALEGUARD_BIN" "$@"; }

# The last `run` ended with exit code $1, said something, and did not crash.
assert_exit() {
  assert_no_crash
  assert_equal "$status" "$1"
}

# No signal (status >= 128), no uncaught C++ exception or sanitizer report.
assert_no_crash() {
  if (( status >= 128 )); then
    fail "killed by signal $((status - 128)): $output"
  fi
  refute_output --partial "terminate called"
  refute_output --partial "Segmentation fault"
  refute_output --partial "AddressSanitizer"
}

# A usage or input error: exit 2 with a message from scaleguard that mentions $1.
assert_usage_error() {  # assert_usage_error TEXT
  assert_exit 2
  assert_output --partial "scaleguard"
  assert_output --partial "$1"
}

# A runtime error (a file that cannot be read or used, a plan that cannot exist): exit 1.
assert_runtime_error() {  # assert_runtime_error TEXT
  assert_exit 1
  assert_output --partial "scaleguard"
  assert_output --partial "$1"
}
