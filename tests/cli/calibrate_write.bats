#!/usr/bin/env bats
# `scaleguard calibrate --write` on the hand-written metrics files of data/ (no training, no
# timing): the override file it writes (provenance, atomic, never clobbered without --force),
# the terms the runs cannot determine, and the override read back by plan, decide and policy
# check (--calibration, $SCALEGUARD_CALIBRATION, the policy's `calibration =`). The round
# trip on real runs is calibrate_roundtrip.bats (label `calibration`).

load helpers

write() {  # write FILE [ARGS...]: fit dp2-cpu + pp2-gpipe as host "devvm"
  sg calibrate --write "$1" --host-name devvm --peak-gflops 20 --link-gb-s 5 \
    --metrics "$SCALEGUARD_CLI_DATA/dp2-cpu.jsonl" --metrics "$SCALEGUARD_CLI_DATA/pp2-gpipe.jsonl" "${@:2}"
}

@test "calibrate --write: a [host] section with the fitted terms and where they came from" {
  run write "$BATS_TEST_TMPDIR/cal.ini"
  assert_exit 0
  assert_output --partial "fitted 2 run(s) on host -> [host devvm]"
  # Two runs of the same ranks: the communication terms stay the catalog's, and it says so.
  assert_output --partial "note: comm_alpha_s and comm_beta_gb_s kept from the catalog"
  assert_output --partial "note: cores not fitted"
  run cat "$BATS_TEST_TMPDIR/cal.ini"
  assert_output --partial "[calibration]"
  assert_output --regexp "written = [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z"
  assert_output --partial "scaleguard_version = "
  assert_output --partial "command = scaleguard "
  assert_output --partial "[source 2]"
  assert_output --partial "sha256 = $(sha256sum "$SCALEGUARD_CLI_DATA/pp2-gpipe.jsonl" | cut -d' ' -f1)"
  assert_output --partial "layout = tp=1 pp=2 dp=1 zero=0 micro_batch=2 global_batch=16"
  assert_output --partial "[host devvm]"
  assert_output --partial "peak_gflops = 20"
  assert_output --partial "fitted = efficiency,step_overhead_s"
  refute_output --partial "comm_alpha_s ="
  run compgen -G "$BATS_TEST_TMPDIR/cal.ini.*"
  assert_failure   # no temporary file left beside it
}

@test "calibrate --write --json" {
  run write "$BATS_TEST_TMPDIR/cal.ini" --json
  assert_exit 0
  run jq -e '.section == "host devvm" and .terms.comm_alpha_s == null and (.terms.efficiency > 0)
             and (.runs | length) == 2' <<<"$output"
  assert_success
}

@test "calibrate --write never replaces a file without --force" {
  echo "keep me" > "$BATS_TEST_TMPDIR/cal.ini"
  run write "$BATS_TEST_TMPDIR/cal.ini"
  assert_exit 1
  assert_output --partial "exists; pass --force to replace it"
  assert_equal "$(cat "$BATS_TEST_TMPDIR/cal.ini")" "keep me"
  run write "$BATS_TEST_TMPDIR/cal.ini" --force
  assert_exit 0
  run grep -c "keep me" "$BATS_TEST_TMPDIR/cal.ini"
  assert_output 0
}

@test "calibrate: several runs need --write; --force and --host-name go with it" {
  run sg calibrate --metrics "$SCALEGUARD_CLI_DATA/dp2-cpu.jsonl" --metrics "$SCALEGUARD_CLI_DATA/pp2-gpipe.jsonl"
  assert_usage_error "fitted together with --write"
  run sg calibrate --metrics "$SCALEGUARD_CLI_DATA/dp2-cpu.jsonl" --force --peak-gflops 20 --link-gb-s 5
  assert_usage_error "go with --write"
  run write "$BATS_TEST_TMPDIR/cal.ini" --host-name "a b"
  assert_usage_error "--host-name"
}

@test "calibrate --write refuses a CPU run fitted against a GPU type" {
  run sg calibrate --write "$BATS_TEST_TMPDIR/cal.ini" --hardware A100-80GB --metrics "$SCALEGUARD_CLI_DATA/dp2-cpu.jsonl"
  assert_exit 1
  assert_output --partial "are the runs from this hardware"
  [ ! -e "$BATS_TEST_TMPDIR/cal.ini" ]
}

@test "plan and calibrate read the override: --calibration and \$SCALEGUARD_CALIBRATION" {
  write "$BATS_TEST_TMPDIR/cal.ini"
  local model=(--model layers=2,hidden=64,heads=4,seq=64,vocab=256 --precision fp32 --tokens 1M --gpus 2 --dp 2
               --tp 1 --pp 1 --zero 0 --micro-batch 8 --global-batch 16)
  run sg plan --gpu-type devvm "${model[@]}"
  assert_exit 2   # no such GPU type without the override
  assert_output --partial "unknown GPU type 'devvm'"
  run sg plan --calibration "$BATS_TEST_TMPDIR/cal.ini" --gpu-type devvm "${model[@]}" --json
  assert_exit 0
  local step
  step=$(jq .step_seconds <<<"$output")
  # The fit's own run, predicted by plan: what the file says it fitted.
  run grep -A6 '^\[source 1\]' "$BATS_TEST_TMPDIR/cal.ini"
  local fitted
  fitted=$(sed -n 's/^fitted_step_s = //p' <<<"$output")
  run jq -n --argjson a "$step" --argjson b "$fitted" '($a / $b - 1) | fabs < 0.001'
  assert_output true
  SCALEGUARD_CALIBRATION="$BATS_TEST_TMPDIR/cal.ini" run sg plan --gpu-type devvm "${model[@]}"
  assert_exit 0
  assert_output --partial "on devvm (devvm)"
  run sg calibrate --metrics "$SCALEGUARD_CLI_DATA/dp2-cpu.jsonl" --hardware devvm --calibration "$BATS_TEST_TMPDIR/cal.ini"
  assert_exit 0
  assert_output --partial "devvm (devvm) from the catalog"
}

@test "a bad override is an error with its file and line, for plan (2) and decide (1)" {
  printf '[gpu A100-80GB]\nefficiency = 0.5\nlatency = 3\n' > "$BATS_TEST_TMPDIR/bad.ini"
  run sg plan --calibration "$BATS_TEST_TMPDIR/bad.ini" --model 350M --tokens 1B --gpu-type A100-80GB
  assert_exit 2   # plan's exit code for a catalog it cannot use
  assert_output --partial "bad.ini:3"
  assert_output --partial "latency"
  run sg decide --calibration "$BATS_TEST_TMPDIR/bad.ini" $(cat configs/examples/350m-8gpu.args)
  assert_exit 1
  assert_output --partial "bad.ini:3"
}

@test "the policy's calibration = layers the override for decide and policy check" {
  printf '[gpu A100-40GB]\nefficiency = 0.2\nstep_overhead_s = 0.5\n' > "$BATS_TEST_TMPDIR/cal.ini"
  sed "s|^catalog = .*|catalog = $SCALEGUARD_SOURCE_DIR/configs/catalog.ini\ncalibration = cal.ini|" \
    configs/policy.ini > "$BATS_TEST_TMPDIR/policy.ini"
  run sg policy check "$BATS_TEST_TMPDIR/policy.ini"
  assert_exit 0
  assert_output --partial "calibration $BATS_TEST_TMPDIR/cal.ini"
  run sg decide --policy configs/policy.ini $(cat configs/examples/350m-8gpu.args) --json
  local before
  before=$(jq .plan.step_seconds <<<"$output")
  run sg decide --policy "$BATS_TEST_TMPDIR/policy.ini" $(cat configs/examples/350m-8gpu.args) --json
  local after
  after=$(jq .plan.step_seconds <<<"$output")
  run jq -n --argjson a "$after" --argjson b "$before" '$a > $b'
  assert_output true
}
