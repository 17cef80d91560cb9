#!/usr/bin/env bats
# `scaleguard`, `scaleguard --help`, `--version`, an unknown verb, and --help on every verb.

load helpers

@test "--help lists every verb and exits 0" {
  run sg --help
  assert_exit 0
  for verb in plan decide compare policy ckpt-interval calibrate ckpt report probe; do
    assert_output --partial "  $verb "
  done
  run sg -h
  assert_exit 0
}

@test "no verb at all shows the help" {
  run sg
  assert_exit 0   # bare `scaleguard` is a request for help
  assert_output --partial "usage: scaleguard COMMAND"
}

@test "an unknown verb exits 2 and says which" {
  run sg frobnicate --now
  assert_exit 2
  assert_output --partial "unknown command 'frobnicate'"
}

@test "--version prints the version" {
  run sg --version
  assert_exit 0
  assert_output --regexp '^scaleguard [0-9]+\.[0-9]+'
}

@test "every verb answers --help with its usage and exits 0" {
  for verb in plan decide compare ckpt-interval calibrate probe; do
    run sg $verb --help
    assert_exit 0
    assert_output --partial "usage: scaleguard $verb"
  done
  run sg report --help
  assert_exit 0
  assert_output --partial "scaleguard report"
  run sg policy --help
  assert_exit 0
  assert_output --partial "usage: scaleguard policy check"
  run sg ckpt --help
  assert_exit 0
  assert_output --partial "scaleguard ckpt ls"
}

@test "an unknown option is a usage error on every verb" {
  for verb in plan decide compare ckpt-interval calibrate probe; do
    run sg $verb --no-such-option
    assert_usage_error "no-such-option"
  done
  run sg policy check --no-such-option
  assert_usage_error "no-such-option"
}
