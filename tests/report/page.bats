#!/usr/bin/env bats
# `scaleguard report` as one page (issue 40): usage and waste, the decisions of the window
# (refused, rewritten, warned; GPU-hours and dollars avoided) and the budgets, found from the
# policy (audit_file, [budgets] ledger) or named with --decision-log / --ledger; a section
# whose file is absent says so. GPU utilisation from sacct's gres/gpuutil, or the plan's
# estimate labelled so.

bats_load_library_path=/usr/lib/bats
load "$bats_load_library_path/bats-support/load"
load "$bats_load_library_path/bats-assert/load"
bats_require_minimum_version 1.5.0

setup() {
  : "${SCALEGUARD_BIN:?}" "${SCALEGUARD_SOURCE_DIR:?}" "${SCALEGUARD_TEST_DATA:?}"
  data=$SCALEGUARD_TEST_DATA
  window=(--sacct-file "$data/sacct-mixed.txt" --since 2026-12-01 --until 2026-12-04)
  # The dev policy with a decision log that is not there yet.
  cp "$SCALEGUARD_SOURCE_DIR/configs/policy.ini" "$SCALEGUARD_SOURCE_DIR/configs/catalog.ini" "$BATS_TEST_TMPDIR/"
  sed -i "s|^# audit_file = .*|audit_file = $BATS_TEST_TMPDIR/audit.jsonl|" "$BATS_TEST_TMPDIR/policy.ini"
  export SCALEGUARD_POLICY=$BATS_TEST_TMPDIR/policy.ini
  # The window is in local time, the log in UTC: make them one clock for the numbers below.
  export TZ=UTC
}

report() { "$SCALEGUARD_BIN" report "$@"; }

@test "sections whose files are absent say so, in text, HTML and JSON" {
  run report "${window[@]}"
  assert_success
  assert_line "== DECISIONS: no decision log at $BATS_TEST_TMPDIR/audit.jsonl (the policy's audit_file): no decision written yet"
  assert_line "== BUDGETS: no budgets in the policy $BATS_TEST_TMPDIR/policy.ini"
  run report "${window[@]}" --format html
  assert_output --partial "<p class=\"missing\">no decision log at $BATS_TEST_TMPDIR/audit.jsonl"
  run report "${window[@]}" --json
  run jq -r '.decisions, .decisions_missing, .total.jobs' <<<"$output"
  assert_output "null
no decision log at $BATS_TEST_TMPDIR/audit.jsonl (the policy's audit_file): no decision written yet
11"
  # A policy without audit_file: the section says how to get one.
  run report "${window[@]}" --policy "$SCALEGUARD_SOURCE_DIR/configs/policy.ini"
  assert_line --partial "== DECISIONS: no decision log: the policy $SCALEGUARD_SOURCE_DIR/configs/policy.ini sets no audit_file"
}

@test "the policy's decision log: refusals, rewrites, warnings by rule, GPU-hours and dollars avoided in the window" {
  cp "$data/decisions.jsonl" "$BATS_TEST_TMPDIR/audit.jsonl"
  run --separate-stderr report "${window[@]}"
  assert_success
  # 2026-12-01..04 (local time = UTC here): 3 refused (1152 + 100 + 4.5 GPU-h),
  # 1 rewritten (48 GPU-h on gpu-spot). $: 1252 x 32.77/8 + 48 x 9.83/8; the refusal with no
  # partition is not priced.
  assert_line "saved: 3 refused, 1 rewritten, 1 warned; 1304.50 GPU-hours (\$5187.48) avoided"
  assert_line "== DECISIONS (decision log $BATS_TEST_TMPDIR/audit.jsonl, times UTC)"
  assert_line --regexp '^max_job_gpu_hours +2 +0 +0 +1252.00 +5128.51$'
  assert_line --partial "no price for partition (none)"
  [[ $stderr == *"3 line(s) are not decisions"* ]]
  run report "${window[@]}" --format html
  assert_output --partial 'refused<b>3</b>'
  assert_output --partial 'dollars avoided<b>$5187.48</b>'
  # --decision-log names another log; one that does not exist is an error.
  rm "$BATS_TEST_TMPDIR/audit.jsonl"
  run --separate-stderr report "${window[@]}" --decision-log "$data/decisions.jsonl"
  assert_success
  assert_line --partial "saved: 3 refused"
  run report "${window[@]}" --decision-log "$BATS_TEST_TMPDIR/none.jsonl"
  assert_failure 1
  assert_output "scaleguard report: --decision-log: $BATS_TEST_TMPDIR/none.jsonl does not exist"
}

@test "a window with refusals and no jobs still has its report" {
  cp "$data/decisions.jsonl" "$BATS_TEST_TMPDIR/audit.jsonl"
  run --separate-stderr report --sacct-file "$data/sacct-mixed.txt" --since 2026-12-03T07:00 --until 2026-12-03T09:00
  assert_success
  assert_line --index 1 --partial "0 jobs"
  assert_line "saved: 1 refused, 0 rewritten, 0 warned; 1152.00 GPU-hours (\$4718.88) avoided"
  # Without the log it is the empty window it was.
  rm "$BATS_TEST_TMPDIR/audit.jsonl"
  run report --sacct-file "$data/sacct-mixed.txt" --since 2026-12-03T07:00 --until 2026-12-03T09:00
  assert_failure 1
  assert_output --partial "no jobs between"
}

@test "budgets from the policy's ledger, or --ledger; the old single-part flags still work" {
  opts=(--policy "$data/budgets/policy.ini" --decision-log "$data/budgets/decisions.jsonl")
  run report "${window[@]}" "${opts[@]}"
  assert_success
  assert_line "== BUDGETS: no budget ledger at /var/lib/scaleguard/budget-ledger.json yet (written by \`scaleguard budget sync\`)"
  run report "${window[@]}" "${opts[@]}" --ledger "$data/budgets/ledger.json"
  assert_success
  assert_line "== BUDGETS (ledger $data/budgets/ledger.json; each budget's own period)"
  assert_line --partial "ml (account ml): 100.00 GPU-hours"
  run report "${window[@]}" "${opts[@]}" --ledger "$BATS_TEST_TMPDIR/none.json"
  assert_failure 1
  assert_output --partial "--ledger: $BATS_TEST_TMPDIR/none.json does not exist"
  run report --budgets --policy "$data/budgets/policy.ini" --ledger "$data/budgets/ledger.json"
  assert_success
  assert_line --index 0 --partial "budgets, ledger"
  run --separate-stderr report --decisions "$data/decisions.jsonl"
  assert_success
  assert_line --index 0 --partial "scaleguard decisions:"
}

@test "GPU utilisation from accounting where sacct records it, the plan's estimate labelled where not" {
  run report --sacct-file "$data/sacct-gpuutil.txt"
  assert_success
  assert_line --regexp '^201 .* 23%$'
  assert_line "    ! low_gpu_efficiency: 8 GPUs busy 23% of the time (accounting: gres/gpuutil; limit 50%)"
  assert_line --regexp '^202 .* 91%$'
  run report --sacct-file "$data/sacct-gpuutil.txt" --min-gpu-util 95 --json
  run jq -r '.jobs[] | "\(.job_id) \(.gpu_util) \(.gpu_util_source) \(.flags | length)"' <<<"$output"
  assert_output "201 23 accounting 1
202 91 accounting 1
203 70 accounting 1"
  run report --sacct-file "$data/sacct-no-gpuutil.txt"
  assert_line --regexp '^202 .* 12% plan$'
  assert_line "    ! low_gpu_efficiency (plan estimate, no GPU utilisation in accounting): 8 GPUs allocated, plan uses 1"
  run report --sacct-file "$data/sacct-no-gpuutil.txt" --min-gpu-util 101
  assert_failure 1
  assert_output --partial "--min-gpu-util"
}
