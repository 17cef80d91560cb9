#!/usr/bin/env bats
# `scaleguard policy check`, `scaleguard ckpt-interval` and `scaleguard ckpt ls` on an empty
# directory: answers exit 0, broken files 1, usage errors 2.

load helpers

@test "policy check: the shipped policy prints its effective rules and OK" {
  run sg policy check configs/policy.ini
  assert_exit 0
  assert_output --partial "[partition gpu-od] (default)"
  assert_output --partial "distributed_min_gpu_hours"
  assert_line "OK"
  # The default path is the source tree's configs/policy.ini.
  run sg policy check
  assert_exit 0
  assert_line "OK"
}

@test "policy check: broken policies name file, line and key (1)" {
  run sg policy check /nonexistent/policy.ini
  assert_runtime_error "cannot open file"
  cat > "$BATS_TEST_TMPDIR/typo.ini" <<INI
catalog = $SCALEGUARD_SOURCE_DIR/configs/catalog.ini
[rules]
distributed_min_gpu_hours = 100 reject
single_gpu_max_hourz = 24
INI
  run sg policy check "$BATS_TEST_TMPDIR/typo.ini"
  assert_runtime_error "typo.ini:4"
  assert_output --partial "single_gpu_max_hourz"
  printf 'catalog = %s\n[rules]\nmax_comm_ratio = lots\n' "$SCALEGUARD_SOURCE_DIR/configs/catalog.ini" > "$BATS_TEST_TMPDIR/value.ini"
  run sg policy check "$BATS_TEST_TMPDIR/value.ini"
  assert_runtime_error "value.ini:3"
  head -c 4096 /dev/urandom > "$BATS_TEST_TMPDIR/binary.ini"
  run sg policy check "$BATS_TEST_TMPDIR/binary.ini"
  assert_exit 1
}

@test "policy: anything but 'check' is a usage error (2)" {
  run sg policy
  assert_exit 2
  assert_output --partial "usage: scaleguard policy check"
  run sg policy lint configs/policy.ini
  assert_exit 2
}

@test "ckpt-interval: Young and Daly for a job, text and JSON" {
  run sg ckpt-interval --save-seconds 60 --mtbf-hours 6300 --gpus 64
  assert_exit 0
  assert_output --partial "64 GPU(s) on 8 node(s)"
  assert_output --regexp 'Daly .* <- use this'
  run sg ckpt-interval --save-seconds 60 --mtbf-hours 6300 --json
  assert_exit 0
  # Young's sqrt(2CM): 60 s save, 6300 h MTBF.
  jq -e '(.young_s - (2 * 60 * 6300 * 3600 | sqrt)) | fabs < 1' <<<"$output"
  jq -e '.daly_s < .young_s and .interval_s == .daly_s' <<<"$output"
}

@test "ckpt-interval: failures faster than checkpoints are an answer, not an error" {
  run sg ckpt-interval --save-seconds 3600 --mtbf-hours 0.5 --gpus 64
  assert_exit 0
  assert_output --partial "unbounded"
  run sg ckpt-interval --save-seconds 3600 --mtbf-hours 0.5 --gpus 64 --json
  jq -e '.overhead == null' <<<"$output"
}

@test "ckpt-interval: bad values are usage errors (2)" {
  run sg ckpt-interval --mtbf-hours 10
  assert_usage_error "save-seconds"
  for bad in 0 -1 1e9 nan abc ""; do
    run sg ckpt-interval --save-seconds "$bad" --mtbf-hours 10
    assert_usage_error "--save-seconds"
    run sg ckpt-interval --save-seconds 60 --mtbf-hours "$bad"
    assert_usage_error "--mtbf-hours"
  done
  run sg ckpt-interval --save-seconds 60 --mtbf-hours 10 --gpus 0
  assert_usage_error "--gpus"
}

@test "ckpt ls: an empty directory lists nothing and exits 0; a missing one is an error" {
  mkdir "$BATS_TEST_TMPDIR/empty"
  run sg ckpt ls "$BATS_TEST_TMPDIR/empty"
  assert_exit 0
  assert_line --index 0 --regexp '^NAME +STEP'
  assert_equal "${#lines[@]}" 1
  run sg ckpt ls "$BATS_TEST_TMPDIR/empty" --json
  assert_exit 0
  jq -e 'length == 0' <<<"$output"
  run sg ckpt ls "$BATS_TEST_TMPDIR/missing"
  assert_runtime_error "is not a directory"
  run sg ckpt
  assert_no_crash
  assert_equal "$status" 2
}
