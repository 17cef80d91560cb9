#!/usr/bin/env bats
# `scaleguard calibrate` on hand-written metrics files in the runner's format (data/): a
# data-parallel CPU run, a GPipe pipeline, a file without its run line and a malformed one.
# Host numbers are given by flags so the predictions are exact; the built-in probe runs once
# and is only checked for producing numbers (never timing thresholds).

load helpers

cal() { sg calibrate --metrics "$SCALEGUARD_CLI_DATA/$1" "${@:2}"; }

# Median of the step_ms values of FILE after its first step line, in seconds (jq, not C++).
median_step_s() {
  jq -s '[.[] | select(.step_ms) | .step_ms] | .[1:] | sort
         | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end / 1000' \
    "$SCALEGUARD_CLI_DATA/$1"
}

@test "calibrate: predicted vs measured for a 2-rank data-parallel run" {
  run cal dp2-cpu.jsonl --peak-gflops 20 --link-gb-s 5
  assert_exit 0
  assert_output --partial "layout: tp=1 pp=1 dp=2 zero=0, 1 micro-batch(es) of 8 per rank, global batch 16"
  assert_output --partial "median of 10 (first 1 left out as warm-up)"   # the checkpoint event is not a step
  assert_output --regexp 'step time +[0-9.]+ ms +[0-9.]+ ms +[0-9.]+'
  assert_output --regexp 'implied efficiency: [0-9.]+'
  # 0.5 MB of gradients are one DDP bucket: the planner exposes it (the last bucket is
  # reduced after the backward pass), so bandwidth is calibrated against it.
  assert_output --regexp 'implied bandwidth_utilization: [0-9.]+'
}

@test "calibrate --json: medians from the file, efficiency = predicted / measured compute" {
  run --separate-stderr cal dp2-cpu.jsonl --peak-gflops 20 --link-gb-s 5 --json
  assert_exit 0
  json=$output
  expected=$(median_step_s dp2-cpu.jsonl)
  jq -e --argjson m "$expected" '(.measured.step_seconds - $m) | fabs < 1e-9' <<<"$json"
  jq -e '.steps.used == 10 and .steps.skipped == 1' <<<"$json"
  # Only the math scales with efficiency (predicted at 1 here); memory-bound work and the
  # fixed per-step costs are subtracted from both sides.
  jq -e '(.implied.efficiency - (.predicted.compute_seconds - .predicted.memory_bound_seconds)
          / (.measured.compute_seconds - .predicted.memory_bound_seconds - .predicted.fixed_seconds)) | fabs < 1e-9' <<<"$json"
  jq -e '(.measured.compute_seconds - .measured.step_seconds * (1 - .measured.comm_fraction - .measured.bubble_fraction)) | fabs < 1e-9' <<<"$json"
  # The implied efficiency does not depend on the efficiency the prediction started from.
  run --separate-stderr cal dp2-cpu.jsonl --peak-gflops 20 --link-gb-s 5 --efficiency 0.3 --json
  jq -e --argjson e "$(jq .implied.efficiency <<<"$json")" '((.implied.efficiency - $e) | fabs < 1e-9) and .predicted.efficiency == 0.3' <<<"$output"
  # Twice the peak: half the implied efficiency.
  run --separate-stderr cal dp2-cpu.jsonl --peak-gflops 40 --link-gb-s 5 --json
  jq -e --argjson e "$(jq .implied.efficiency <<<"$json")" '(.implied.efficiency - $e / 2) | fabs < 1e-9' <<<"$output"
  # --skip moves the window.
  run --separate-stderr cal dp2-cpu.jsonl --peak-gflops 20 --link-gb-s 5 --skip 0 --json
  jq -e '.steps.used == 11' <<<"$output"
}

@test "calibrate: a pipeline's bubble is predicted as (p-1)/(m+p-1)" {
  run cal pp2-gpipe.jsonl --peak-gflops 10 --link-gb-s 2
  assert_exit 0
  assert_output --regexp 'pipeline bubble +11\.1% +12\.9%'   # pp=2, 8 micro-batches: 1/9
  assert_output --partial "schedule gpipe"
  assert_output --regexp 'implied bandwidth_utilization: [0-9.]+'
}

@test "calibrate: against a catalog GPU instead of this host" {
  run cal dp2-cpu.jsonl --hardware A100-80GB
  assert_exit 0
  # The catalog's own efficiency for the type (one `efficiency =` line per [gpu] section).
  eff=$(awk '/^\[gpu A100-80GB\]/{g=1} g && /^efficiency/{print $3; exit}' "$SCALEGUARD_SOURCE_DIR/configs/catalog.ini")
  assert_output --partial "A100-80GB (p4de.24xlarge) from the catalog, prediction at efficiency $eff"
  assert_output --partial "trained on CPU ranks"
  run cal dp2-cpu.jsonl --hardware p4d.24xlarge
  assert_exit 0
  assert_output --partial "A100-40GB (p4d.24xlarge)"
}

@test "calibrate: the built-in probe describes this host when no flags are given" {
  run cal dp2-cpu.jsonl
  assert_exit 0
  assert_output --regexp 'peak [0-9.]+ GFLOP/s per rank \(probe: fp32 GEMM [0-9.]+ GFLOP/s per thread x 1 thread\(s\)\)'
  assert_output --regexp 'link [0-9.]+ GB/s \(probe: memory copy\)'
}

@test "calibrate: a file without its run line is refused with what is missing (1)" {
  run cal no-run-line.jsonl --peak-gflops 20 --link-gb-s 5
  assert_runtime_error "no-run-line.jsonl:1: run: the first line must be the run line"
  assert_output --partial "scaleguard-run --metrics"
}

@test "calibrate: a malformed line is refused with its line number (1)" {
  run cal malformed.jsonl --peak-gflops 20 --link-gb-s 5
  assert_runtime_error "malformed.jsonl:5: not a JSON object"
}

@test "calibrate: unreadable, empty, binary and cut files are clear errors (1)" {
  run sg calibrate --metrics "$BATS_TEST_TMPDIR/none.jsonl"
  assert_runtime_error "not a readable file"
  run sg calibrate --metrics "$BATS_TEST_TMPDIR"
  assert_runtime_error "not a readable file"
  : > "$BATS_TEST_TMPDIR/empty.jsonl"
  run sg calibrate --metrics "$BATS_TEST_TMPDIR/empty.jsonl" --peak-gflops 1 --link-gb-s 1
  assert_runtime_error "no run line"
  head -1 "$SCALEGUARD_CLI_DATA/dp2-cpu.jsonl" > "$BATS_TEST_TMPDIR/cut.jsonl"
  run sg calibrate --metrics "$BATS_TEST_TMPDIR/cut.jsonl" --peak-gflops 1 --link-gb-s 1
  assert_runtime_error "no step lines"
  head -c 2000 /dev/urandom > "$BATS_TEST_TMPDIR/random.jsonl"
  run sg calibrate --metrics "$BATS_TEST_TMPDIR/random.jsonl" --peak-gflops 1 --link-gb-s 1
  assert_exit 1
  sed 's/"tp":1/"tp":0/' "$SCALEGUARD_CLI_DATA/dp2-cpu.jsonl" > "$BATS_TEST_TMPDIR/tp0.jsonl"
  run sg calibrate --metrics "$BATS_TEST_TMPDIR/tp0.jsonl" --peak-gflops 1 --link-gb-s 1
  assert_runtime_error "run.tp: expected a whole number from 1"
  run cal dp2-cpu.jsonl --peak-gflops 1 --link-gb-s 1 --skip 50
  assert_runtime_error "none left after skipping 50"
}

@test "calibrate: bad flags are usage errors (2)" {
  run sg calibrate
  assert_usage_error "'--metrics' is required"
  for flag in --peak-gflops --link-gb-s --network-gb-s --efficiency; do
    for bad in 0 -2 abc ""; do
      run cal dp2-cpu.jsonl "$flag" "$bad"
      assert_usage_error "$flag"
    done
  done
  run cal dp2-cpu.jsonl --skip -1
  assert_usage_error "--skip"
  run cal dp2-cpu.jsonl --ranks-per-node 0
  assert_usage_error "--ranks-per-node"
  run cal dp2-cpu.jsonl --hardware B300
  assert_usage_error "--hardware=B300"
  run cal dp2-cpu.jsonl --hardware A100-80GB --peak-gflops 5
  assert_usage_error "describe --hardware host only"
}
