#!/usr/bin/env bats
# `scaleguard report --decisions FILE` end to end: job_submit/scaleguard's decision log
# (tests/unit/data/decisions.jsonl, numbers worked out in tests/unit/report_decisions_test.cpp)
# through the real binary: every format, exit codes (0 written, 1 nothing to report or an
# unreadable file, 2 usage), malformed lines reported on stderr, hostile input.

bats_require_minimum_version 1.5.0
bats_load_library_path=/usr/lib/bats
load "$bats_load_library_path/bats-support/load"
load "$bats_load_library_path/bats-assert/load"

setup() {
  : "${SCALEGUARD_BIN:?}" "${SCALEGUARD_SOURCE_DIR:?}" "${SCALEGUARD_TEST_DATA:?}"
  unset SCALEGUARD_POLICY SCALEGUARD_CATALOG
  log=$SCALEGUARD_TEST_DATA/decisions.jsonl
  day=(--since 2026-12-03T00:00:00Z --until 2026-12-04T00:00:00Z)
}

report() { "$SCALEGUARD_BIN" report "$@"; }

# No signal, no uncaught exception.
refute_crash() {
  (( status < 128 )) || fail "killed by signal $((status - 128))"
  refute_output --partial "terminate called"
}

@test "text summary of a day: enforced and shadow apart, skipped lines on stderr" {
  run --separate-stderr report --decisions "$log" "${day[@]}"
  assert_success
  assert_line --index 0 "scaleguard decisions: 2026-12-03T00:00:00Z .. 2026-12-04T00:00:00Z"
  assert_line --index 1 "enforced: 5 decisions: 1 accepted, 1 warned, 1 rewritten, 2 refused; 1204.50 GPU-hours avoided of 1260.50 judged"
  assert_line --index 2 "shadow mode (logged, not enforced): 2 decisions: 0 accepted; would have refused 1, rewritten 0, warned 1; would have avoided 384.00 GPU-hours of 394.00 judged"
  assert_line --regexp '^max_job_gpu_hours +1 +0 +0 +1152\.00$'
  assert_line --regexp '^carol +1 +0 +0 +384\.00$'
  assert_output --partial "note: 1 decision outside the window left out"
  [ "$stderr" = "scaleguard report: $log: 3 lines are not decisions (line 5: not JSON; line 9: 'action' is 'maybe', not accept, warn, rewrite or reject; line 12: 'uid' is not a user id (0 to 4294967295))" ] ||
    fail "stderr: $stderr"
}

@test "csv, json and html go to --output" {
  run report --decisions "$log" "${day[@]}" --format csv -o "$BATS_TEST_TMPDIR/d.csv"
  assert_success
  run head -2 "$BATS_TEST_TMPDIR/d.csv"
  assert_line --index 0 "mode,by,key,decisions,accepted,warned,rewritten,refused,judged_gpu_hours,avoided_gpu_hours"
  assert_line --index 1 "enforce,total,2026-12-03T00:00:00Z..2026-12-04T00:00:00Z,5,1,1,1,2,1260.5000,1204.5000"
  run --separate-stderr report --decisions "$log" "${day[@]}" --json
  assert_success
  run jq -r '.enforced.total.refused, .shadow.total.avoided_gpu_hours, .skipped, .first_skipped[0].line, .largest[1].mode, .largest[1].message' <<<"$output"
  assert_output "2
384
3
5
shadow
scaleguard: Ablehnung — zu groß ✓ <b>&</b>
\"quoted\""
  run report --decisions "$log" "${day[@]}" --format html --output "$BATS_TEST_TMPDIR/d.html"
  assert_success
  run grep -c "<svg" "$BATS_TEST_TMPDIR/d.html"
  assert_output 1
  run grep -c "<script" "$BATS_TEST_TMPDIR/d.html"
  assert_output 0
}

@test "reads standard input with -; the window is open unless given" {
  run --separate-stderr report --decisions - < "$log"
  assert_success
  assert_line --index 0 "scaleguard decisions: 2026-12-02T23:59:59Z .. 2026-12-03T14:00:01Z"
  assert_line --index 1 --partial "enforced: 6 decisions"
}

@test "--since/--until without a zone are local time" {
  # EST5: local = UTC - 5 h. Line 1 is at 08:00Z = 03:00 local; since <= ts < until.
  TZ=EST5 run --separate-stderr report --decisions "$log" --since 2026-12-03T03:00:00 --until 2026-12-03T04:00 --json
  assert_success
  run jq -r '.since, .until, .enforced.total.refused' <<<"$output"
  assert_output "2026-12-03T08:00:00Z
2026-12-03T09:00:00Z
1"
  TZ=EST5 run report --decisions "$log" --since 2026-12-03T03:00:01 --until 2026-12-03T04:00
  assert_failure 1
  assert_output --partial "no decisions between 2026-12-03T08:00:01Z and 2026-12-03T09:00:00Z in $log"
}

@test "nothing to report is exit 1, and says why" {
  run report --decisions "$log" --since 2027-01-01 --until 2027-01-02
  assert_failure 1
  assert_output --partial "no decisions between"
  printf 'garbage\n{"ts":"2026-12-03T08:00:00Z"}\n' > "$BATS_TEST_TMPDIR/bad.jsonl"
  run report --decisions "$BATS_TEST_TMPDIR/bad.jsonl"
  assert_failure 1
  assert_output "scaleguard report: no decisions between the beginning and now in $BATS_TEST_TMPDIR/bad.jsonl: 2 lines are not decisions (line 1: not JSON; line 2: no 'action')"
  : > "$BATS_TEST_TMPDIR/empty.jsonl"
  run report --decisions "$BATS_TEST_TMPDIR/empty.jsonl"
  assert_failure 1
  assert_output "scaleguard report: no decisions between the beginning and now in $BATS_TEST_TMPDIR/empty.jsonl"
  run report --decisions "$BATS_TEST_TMPDIR/nope.jsonl"
  assert_failure 1
  assert_output --partial "cannot read $BATS_TEST_TMPDIR/nope.jsonl: No such file or directory"
  run report --decisions "$BATS_TEST_TMPDIR"
  assert_failure 1
  assert_output --partial "it is a directory"
}

@test "usage errors are exit 2" {
  run report --decisions "$log" --sacct-file "$log"
  assert_failure 2
  assert_output --partial "--sacct-file does not go with --decisions"
  run report --decisions "$log" --policy "$SCALEGUARD_SOURCE_DIR/configs/policy.ini"
  assert_failure 2
  assert_output --partial "--policy does not go with --decisions"
  run report --decisions "$log" --format pdf
  assert_failure 2
  assert_output --partial "'pdf' is not text, csv, html or json"
  run report --decisions
  assert_failure 2
  run report --decisions ""
  assert_failure 2
  run report --decisions "$log" --since 2026-12-04T00:00:00Z --until 2026-12-03T00:00:00Z
  assert_failure 1
  assert_output --partial "is not after --since"
  run report --decisions "$log" --since 2026-12-03T00:00:00+25:00
  assert_failure 1
  assert_output --partial "--since: '2026-12-03T00:00:00+25:00' is not a UTC time"
}

@test "hostile input: huge, deep, binary and cut lines are skipped, never fatal" {
  local f=$BATS_TEST_TMPDIR/hostile.jsonl
  { head -n 1 "$log"
    head -c 300000 /dev/zero | tr '\0' '{'; echo
    printf '%*s\n' 5000 '' | tr ' ' '['
    head -c 4096 /dev/urandom | tr -d '\n'; echo
    printf '{"ts":"2026-12-03T09:00:00Z","action":"reject","user":"\\u0000<x>","judged_gpu_hours":1e308}\n'
    head -n 3 "$log" | tail -n 1 | head -c 120; } > "$f"
  for format in text csv html json; do
    run --separate-stderr report --decisions "$f" --format "$format"
    refute_crash
    assert_success
  done
  [[ $stderr == *"line 2: longer than 64 KiB; line 3: nested deeper than 16 levels"* ]] || fail "stderr: $stderr"
  [[ $stderr == *"still being written?"* ]] || fail "stderr: $stderr"
}
