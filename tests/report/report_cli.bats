#!/usr/bin/env bats
# `scaleguard report` end to end: the fixture through the real binary, every format, and the
# clear messages (malformed line, empty window, sacct missing or failing). Where sacct must
# run, a stand-in on PATH records its arguments and prints the fixture.

bats_load_library_path=/usr/lib/bats
load "$bats_load_library_path/bats-support/load"
load "$bats_load_library_path/bats-assert/load"
bats_require_minimum_version 1.5.0

setup() {
  : "${SCALEGUARD_BIN:?}" "${SCALEGUARD_SOURCE_DIR:?}" "${SCALEGUARD_TEST_DATA:?}"
  export SCALEGUARD_POLICY=$SCALEGUARD_SOURCE_DIR/configs/policy.ini
  fixture=$SCALEGUARD_TEST_DATA/sacct-mixed.txt
  fake=$BATS_TEST_TMPDIR/bin
  mkdir -p "$fake"
}

report() { "$SCALEGUARD_BIN" report "$@"; }

# A stand-in sacct: records argv one per line, prints FILE, exits CODE (stderr MESSAGE).
fake_sacct() {  # fake_sacct FILE CODE [MESSAGE]
  cat > "$fake/sacct" <<SH
#!/bin/sh
printf '%s\n' "\$@" > "$BATS_TEST_TMPDIR/sacct.args"
cat "$1"
[ -n "${3:-}" ] && echo "${3:-}" >&2
exit $2
SH
  chmod +x "$fake/sacct"
}

@test "text report of the fixture carries the hand-computed totals" {
  run report --sacct-file "$fixture" --since 2026-12-01 --until 2026-12-03
  assert_success
  assert_line --index 0 "scaleguard report: 2026-12-01T00:00:00 .. 2026-12-03T00:00:00"
  # 83.25 GPU-hours; on demand 50.25 x 32.77/8 + spot 33 x 9.83/8 = $246.39
  assert_line --index 1 "11 jobs, 13 runs, 83.25 GPU-hours, 20.33 wasted (24.4%), cost \$246.39 (\$35.50 wasted)"
  assert_output --partial "! low_gpu_efficiency (plan estimate, no GPU utilisation in accounting): 8 GPUs allocated, plan uses 1"
}

@test "csv and html go to --output" {
  run report --sacct-file "$fixture" --since 2026-12-01 --until 2026-12-03 --format csv -o "$BATS_TEST_TMPDIR/r.csv"
  assert_success
  run head -2 "$BATS_TEST_TMPDIR/r.csv"
  assert_line --index 1 "total,2026-12-01T00:00:00..2026-12-03T00:00:00,,,,,11,13,,83.2500,20.3333,246.39,35.50,"
  run report --sacct-file "$fixture" --format html --output "$BATS_TEST_TMPDIR/r.html"
  assert_success
  run grep -o "<svg" "$BATS_TEST_TMPDIR/r.html"
  assert_equal "${#lines[@]}" 3
}

@test "json carries the same numbers, unrounded" {
  run report --sacct-file "$fixture" --since 2026-12-01 --until 2026-12-03 --json
  assert_success
  run jq -r '.total.jobs, .total.runs, .total.gpu_hours, .by_partition["gpu-spot"].gpu_hours, (.jobs[] | select(.job_id == "109") | .flags[0])' <<<"$output"
  assert_output "11
13
83.25
33
low_gpu_efficiency (plan estimate, no GPU utilisation in accounting): 8 GPUs allocated, plan uses 1"
}

@test "runs sacct with an argument vector for the window and reads its output" {
  fake_sacct "$fixture" 0
  PATH="$fake:$PATH" run report --since 2026-12-01 --until 2026-12-03
  assert_success
  assert_line --index 1 --partial "83.25 GPU-hours"
  run cat "$BATS_TEST_TMPDIR/sacct.args"
  assert_output "-a
-D
--parsable2
--delimiter="$'\x1f'"
--state=RUNNING,SUSPENDED,CANCELLED
--format=JobID,User,Account,Partition,State,Start,End,ElapsedRaw,AllocTRES,ReqTRES,NNodes,ExitCode,NodeList,TRESUsageInAve,AdminComment
--starttime=2026-12-01T00:00:00
--endtime=2026-12-03T00:00:00"
}

@test "a window without jobs says so" {
  run report --sacct-file "$fixture" --since 2027-01-01 --until 2027-01-02
  assert_failure 1
  assert_output --partial "no jobs between 2027-01-01T00:00:00 and 2027-01-02T00:00:00"
  # sacct answering with only its header (no job in the window) is the same message.
  head -1 "$fixture" > "$BATS_TEST_TMPDIR/empty.txt"
  fake_sacct "$BATS_TEST_TMPDIR/empty.txt" 0
  PATH="$fake:$PATH" run report --since 2026-12-01 --until 2026-12-02
  assert_failure 1
  assert_output "scaleguard report: no jobs between 2026-12-01T00:00:00 and 2026-12-02T00:00:00 in sacct output"
}

@test "sacct missing from PATH" {
  PATH="$fake" run "$SCALEGUARD_BIN" report --since 2026-12-01
  assert_failure 1
  assert_output --partial "sacct not found in PATH"
  assert_output --partial "--sacct-file"
}

@test "sacct failing shows its exit status and message" {
  fake_sacct /dev/null 1 "sacct: error: Problem talking to the database: Connection refused"
  PATH="$fake:$PATH" run report --since 2026-12-01 --until 2026-12-02
  assert_failure 1
  assert_output "scaleguard report: sacct failed (exit 1): sacct: error: Problem talking to the database: Connection refused"
}

@test "a malformed sacct record is skipped, counted and named; the others are reported" {
  run --separate-stderr report --sacct-file "$SCALEGUARD_TEST_DATA/sacct-malformed.txt" --json
  assert_success
  [[ "$stderr" == *"sacct-malformed.txt: skipped 1 malformed sacct record (first at lines 3; line 3: has 7 fields, header has 15"* ]]
  run jq -r '.total.runs, (.jobs[].job_id), (.notes[] | select(startswith("'"$SCALEGUARD_TEST_DATA"'/sacct-malformed.txt: skipped 1")) | "note")' <<<"$output"
  assert_output "2
201
203
note"
  # A job name holding newlines and a whole forged record (saved file with JobName): the
  # record from its head to its tail is skipped; dave, whose record it forges, gets nothing.
  { head -2 "$SCALEGUARD_TEST_DATA/sacct-malformed.txt"
    printf '9|x\n10|n|dave|ml|gpu-spot|COMPLETED|2026-12-01T01:00:00|2026-12-01T02:00:00|3600|gres/gpu=64||1|0:0|n1|\ny|eve|ml|gpu-od|COMPLETED|2026-12-01T01:00:00|2026-12-01T02:00:00|3600|gres/gpu=1||1|0:0|n1|\n'
  } > "$BATS_TEST_TMPDIR/forged.txt"
  run report --sacct-file "$BATS_TEST_TMPDIR/forged.txt"
  assert_success
  assert_output --partial "skipped 1 malformed sacct record (first at lines 3-5;"
  refute_output --partial "dave"
  run --separate-stderr report --sacct-file "$BATS_TEST_TMPDIR/forged.txt" --json
  run jq -r '.by_user | keys | join(",")' <<<"$output"
  assert_output "alice"
  printf 'not|sacct\n1|2\n' > "$BATS_TEST_TMPDIR/other.txt"
  run report --sacct-file "$BATS_TEST_TMPDIR/other.txt"
  assert_failure 1
  assert_output --partial "other.txt:1: JobID: header has no JobID column"
}

@test "bad options are usage errors" {
  run report --sacct-file "$fixture" --format pdf
  assert_failure 2
  assert_output --partial "'pdf' is not text, csv, html or json"
  run report --sacct-file "$fixture" --since 2026-13-01
  assert_failure 1
  assert_output --partial "--since: '2026-13-01' is not a valid date"
  run report --sacct-file "$fixture" --since 2026-12-02 --until 2026-12-01
  assert_failure 1
  assert_output --partial "is not after --since"
  run report --sacct-file "$BATS_TEST_TMPDIR/nope.txt"
  assert_failure 1
  assert_output --partial "cannot read $BATS_TEST_TMPDIR/nope.txt"
  run report --bogus
  assert_failure 2
  run report --sacct-file "$fixture" --policy "$BATS_TEST_TMPDIR/none.ini"
  assert_failure 1
  assert_output --partial "policy:"
}

# Real 22.05 `sacct -D` shape (no -X): each run's allocation line, then its steps. Job 23 is
# train.sbatch stopped by USR1: its step exited 85 (checkpoint written), the job requeued
# itself and finished; job 24 was requeued with no such step. 16 GPUs, 36 s per run each.
@test "an interrupted run whose step exited 85 (checkpoint written) wastes nothing; steps add no GPU time" {
  cat > "$BATS_TEST_TMPDIR/steps.txt" <<'SACCT'
JobID|JobName|User|Account|Partition|State|Start|End|ElapsedRaw|AllocTRES|ReqTRES|NNodes|ExitCode|NodeList|AdminComment
23|demo-gpt|root|ml|gpu-od|REQUEUED|2026-12-02T22:11:50|2026-12-02T22:12:26|36|billing=2,cpu=2,gres/gpu=16,node=2|billing=2,cpu=2,gres/gpu=16,node=2|2|0:0|gpu-st-p4d-[1-2]|scaleguard: rewrite: zero gpus=16 nodes=2 ckpt=23115s
23.batch|batch|||||2026-12-02T22:11:50|2026-12-02T22:12:26|36|cpu=1,gres/gpu=8,node=1||1|0:0|gpu-st-p4d-1|
23.0|scaleguard-run|||||2026-12-02T22:11:51|2026-12-02T22:12:25|34|cpu=2,gres/gpu=16,node=2||2|85:0|gpu-st-p4d-[1-2]|
23|demo-gpt|root|ml|gpu-od|COMPLETED|2026-12-02T22:12:27|2026-12-02T22:13:03|36|billing=2,cpu=2,gres/gpu=16,node=2|billing=2,cpu=2,gres/gpu=16,node=2|2|0:0|gpu-st-p4d-[1-2]|scaleguard: rewrite: zero gpus=16 nodes=2 ckpt=23115s
23.batch|batch|||||2026-12-02T22:12:27|2026-12-02T22:13:03|36|cpu=1,gres/gpu=8,node=1||1|0:0|gpu-st-p4d-1|
23.0|scaleguard-run|||||2026-12-02T22:12:28|2026-12-02T22:13:02|34|cpu=2,gres/gpu=16,node=2||2|0:0|gpu-st-p4d-[1-2]|
24|other|root|ml|gpu-od|REQUEUED|2026-12-02T22:11:50|2026-12-02T22:12:26|36|billing=2,cpu=2,gres/gpu=16,node=2|billing=2,cpu=2,gres/gpu=16,node=2|2|0:0|gpu-st-p4d-[1-2]|
24.batch|batch|||||2026-12-02T22:11:50|2026-12-02T22:12:26|36|cpu=1,gres/gpu=8,node=1||1|0:15|gpu-st-p4d-1|
24.0|scaleguard-run|||||2026-12-02T22:11:51|2026-12-02T22:12:25|34|cpu=2,gres/gpu=16,node=2||2|0:15|gpu-st-p4d-[1-2]|
24|other|root|ml|gpu-od|COMPLETED|2026-12-02T22:12:27|2026-12-02T22:13:03|36|billing=2,cpu=2,gres/gpu=16,node=2|billing=2,cpu=2,gres/gpu=16,node=2|2|0:0|gpu-st-p4d-[1-2]|
SACCT
  run report --sacct-file "$BATS_TEST_TMPDIR/steps.txt" --json
  assert_success
  # GPU time from the four allocation lines only: 4 x 16 GPUs x 36 s = 0.64 GPU-hours.
  run jq -r '.total.runs, .total.gpu_hours, (.jobs[] | "\(.job_id) \(.runs) \(.wasted_gpu_hours)")' <<<"$output"
  assert_output "4
0.64
23 2 0
24 2 0.16"
}
