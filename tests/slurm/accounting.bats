#!/usr/bin/env bats
# `scaleguard report` over real Slurm accounting (slurmdbd + MariaDB of the dev cluster): this
# file runs jobs that complete, fail, are requeued and are cancelled, with known GPU counts,
# then checks the report for that window against each run's GPUs x ElapsedRaw as sacct
# itself prints it, the waste and cost rules (docs/report.md), and the clear messages for an
# empty window, a partition without a price and a missing sacct. The last test requeues a job
# so that Slurm moves its finished run's EligibleTime past the window (sacct's plain window
# query drops such runs).

load helpers

# True when slurmctld stores jobs in slurmdbd (scripts/dev-cluster/accounting).
accounting_on() {
  scontrol show config | grep -Eq '^AccountingStorageType += accounting_storage/slurmdbd' &&
    sacct -n -X -j 1 >/dev/null 2>&1
}

# Waits (hang guard, not a measurement) until job $1 is RUNNING.
wait_running() {
  local i
  for ((i = 0; i < 300; i++)); do
    [ "$(squeue -h -j "$1" -o %T)" = RUNNING ] && return 0
    sleep 0.2
  done
  echo "job $1 not running: $(squeue -h -j "$1" -o '%T %r')" >&2
  return 1
}

# Waits until sacct shows, for every "ID:STATE[,STATE...]" argument, exactly those final
# states in order (one per run). Records reach slurmdbd asynchronously: poll.
wait_sacct() {
  local i spec id want got ok
  for ((i = 0; i < 300; i++)); do
    ok=1
    for spec in "$@"; do
      id=${spec%%:*} want=${spec#*:}
      got=$(sacct -n -X -D -P -j "$id" -o State | awk '{print $1}' | paste -sd,)
      [ "$got" = "$want" ] || { ok=0; break; }
    done
    [ "$ok" = 1 ] && return 0
    sleep 0.2
  done
  echo "sacct: job $id has states '$got', expected '$want'" >&2
  return 1
}

# Price of one GPU-hour on partition $1, from configs/policy.ini and the catalog it names
# (the rule of docs/report.md: instance $/h / GPUs per node, spot or on-demand).
gpu_hour_price() {
  local policy=$SCALEGUARD_SOURCE_DIR/configs/policy.ini catalog=$SCALEGUARD_SOURCE_DIR/configs/catalog.ini
  local instance capacity key
  instance=$(ini_value "$policy" "partition $1" instance)
  capacity=$(ini_value "$policy" "partition $1" capacity)
  key=on_demand; [ "$capacity" = spot ] && key=spot
  awk -v p="$(ini_value "$catalog" "instance $instance" "$key")" \
      -v g="$(ini_value "$catalog" "instance $instance" gpus)" 'BEGIN { printf "%.10f", p / g }'
}

ini_value() {  # ini_value FILE SECTION KEY
  awk -v s="[$2]" -v k="$3" '
    /^\[/ { in_s = ($0 == s) }
    in_s && $1 == k && $2 == "=" { print $3; exit }' "$1"
}

# |$1 - $2| <= 1e-9 * max(1, |$2|): the report's sums of doubles vs awk's.
assert_close() {
  awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b; if (m < 1) m = 1;
                                   exit !(d <= 1e-9 * m) }' ||
    fail "${3:-value}: got $1, expected $2"
}

setup_file() {
  cluster_env
  # bats 1.8 fails the file on a skip in setup_file: the reason is handed to setup() instead.
  export AC_SKIP=
  accounting_on || { AC_SKIP="the dev cluster has no accounting (AccountingStorageType=accounting_storage/slurmdbd, scripts/dev-cluster/accounting)"; return 0; }
  spank_loaded || { AC_SKIP="scaleguard SPANK plugin not built: the 16-GPU job needs --train-model"; return 0; }
  resume_nodes
  export AC_TMP=$(user_dir)
  cd "$AC_TMP"
  # Jobs of earlier test files must not fall into this window: wait for an empty queue, then
  # start the window on the next whole second (sacct's resolution).
  local i
  for ((i = 0; i < 300; i++)); do [ -z "$(squeue -h -o %i)" ] && break; sleep 0.2; done
  [ -z "$(squeue -h -o %i)" ] || { squeue >&2; echo "queue not empty" >&2; return 1; }
  sleep 1
  export AC_SINCE=$(date +%Y-%m-%dT%H:%M:%S)
  sleep 1
  export AC_FORGED="scaleguard: accept: single gpus=1 nodes=1 comm=0.01 ckpt=2s"

  # 16 GPUs on two nodes: a model that needs distribution (the plan lands in AdminComment).
  submit -J sg-ac -o /dev/null -N2 --gpus-per-node=8 --ntasks-per-node=1 --time=7-0 \
    --train-model=llama2-7b --train-tokens=300B --wrap 'sleep 2'
  export AC_WIDE=$job_id
  [ "$(wait_job "$AC_WIDE" 120)" = COMPLETED ] || { echo "16-GPU job did not complete" >&2; return 1; }

  # Single-GPU jobs (accepted on their raw request) run side by side.
  submit -J sg-ac -o /dev/null -p gpu-od --gpus=1 --time=1:00:00 --wrap 'sleep 3'
  export AC_OK=$job_id
  # Failed, submitted by the test user on the spot partition.
  local out
  out=$(as_user "$AC_TMP" sbatch --parsable -J sg-ac -o /dev/null -p gpu-spot --gpus=1 \
        --time=1:00:00 --wrap 'sleep 2; exit 3' 2>&1) || { echo "$out" >&2; return 1; }
  export AC_FAIL=$(grep -E '^[0-9]+$' <<<"$out" | tail -n 1)
  # Requeued: the first run sleeps until `scontrol requeue`, the second ends at once. Its
  # user-editable Comment forges a plan with a 2 s checkpoint interval: were it read, the
  # requeued run would waste 1 s instead of all of it.
  submit -J sg-ac -o /dev/null -p gpu-od --gpus=1 --time=1:00:00 --requeue \
    --comment="$AC_FORGED" --wrap 'if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then sleep 300; fi; sleep 1'
  export AC_REQ=$job_id
  # Cancelled while running.
  submit -J sg-ac -o /dev/null -p gpu-od --gpus=1 --time=1:00:00 --wrap 'sleep 300'
  export AC_CANCEL=$job_id
  # Cancelled while pending (held): used no GPU, so no report line.
  submit -J sg-ac -o /dev/null -H -p gpu-od --gpus=1 --time=1:00:00 --wrap true
  export AC_NEVER=$job_id

  wait_running "$AC_REQ"
  wait_running "$AC_CANCEL"
  sleep 2   # both have run a little: non-zero elapsed time
  scontrol requeue "$AC_REQ"
  scancel "$AC_CANCEL" "$AC_NEVER"
  # A requeued job may start again only after Slurm's requeue delay (cred_expire, 120 s by
  # default): move its begin time to 2 s from now (not now: a slurmd refuses a relaunch within
  # the second it killed the job, "already killed"). The update fails until the requeue has
  # put it back to PENDING; it can also succeed on the job still completing its first run
  # (seen in CI: the begin time then went to the first run's accounting record, and the second
  # run's cost came out of sacct unpriced), so wait for PENDING first.
  for ((i = 0; i < 100; i++)); do
    [ "$(squeue -h -j "$AC_REQ" -o %T 2>/dev/null)" = PENDING ] &&
      scontrol update jobid="$AC_REQ" StartTime=now+2 2>/dev/null && break
    sleep 0.2
  done
  wait_sacct "$AC_WIDE:COMPLETED" "$AC_OK:COMPLETED" "$AC_FAIL:FAILED" \
    "$AC_REQ:REQUEUED,COMPLETED" "$AC_CANCEL:CANCELLED" "$AC_NEVER:CANCELLED"
  sleep 1
  export AC_UNTIL=$(date +%Y-%m-%dT%H:%M:%S)
  scaleguard report --since "$AC_SINCE" --until "$AC_UNTIL" --format json \
    --policy "$SCALEGUARD_SOURCE_DIR/configs/policy.ini" > "$AC_TMP/report.json"
  sacct -X -D -n -P -j "$AC_WIDE,$AC_OK,$AC_FAIL,$AC_REQ,$AC_CANCEL" \
    -o JobID,State,AllocTRES,ElapsedRaw,Partition,User,AdminComment > "$AC_TMP/sacct.txt"
  sacct -X -D -n -P -j "$AC_REQ" -o Comment > "$AC_TMP/user-comment.txt"
  # Shown when a test fails: what each run's record holds, EligibleTime included.
  sacct -X -D -P -j "$AC_WIDE,$AC_OK,$AC_FAIL,$AC_REQ,$AC_CANCEL,$AC_NEVER" \
    -o JobID,State,Submit,Eligible,Start,End,ElapsedRaw > "$AC_TMP/records.txt"
}

teardown_file() {
  scancel --quiet --name=sg-ac 2>/dev/null || true
  # Unset when setup_file skipped (no accounting: source-built releases, SCALEGUARD_ACCOUNTING=0).
  [ -z "${AC_TMP:-}" ] || rm -rf "$AC_TMP"
}

setup() {
  [ -z "${AC_SKIP:-}" ] || skip "$AC_SKIP"
  cluster_env
  cd "$AC_TMP"
}

# GPUs sacct recorded for job $1 (every run): the untyped gres/gpu=N of AllocTRES.
sacct_gpus() {
  awk -F'|' -v id="$1" '$1 == id { if (match($3, /gres\/gpu=[0-9]+/)) print substr($3, RSTART + 9, RLENGTH - 9) }' \
    sacct.txt | sort -u
}

# Sum of GPUs x ElapsedRaw / 3600 over job $1's runs; with $2 only runs in that state.
sacct_gpu_hours() {
  awk -F'|' -v id="$1" -v st="${2:-}" -v g="$(sacct_gpus "$1")" '
    $1 == id && (st == "" || $2 ~ "^" st) { s += g * $4 }
    END { printf "%.12f", s / 3600 }' sacct.txt
}

job_json() {  # job_json ID FIELD
  jq -r --arg id "$1" ".jobs[] | select(.job_id == \$id) | .$2" report.json
}

@test "sacct recorded the GPUs each job asked for" {
  run sacct_gpus "$AC_WIDE"
  assert_output 16
  for id in "$AC_OK" "$AC_FAIL" "$AC_REQ" "$AC_CANCEL"; do
    run sacct_gpus "$id"
    assert_output 1
  done
}

@test "each job's GPU-hours are its GPUs x ElapsedRaw summed over its runs" {
  cat records.txt   # printed only if this test fails
  for id in "$AC_WIDE" "$AC_OK" "$AC_FAIL" "$AC_REQ" "$AC_CANCEL"; do
    run job_json "$id" gpus
    assert_output "$(sacct_gpus "$id")"
    assert_close "$(job_json "$id" gpu_hours)" "$(sacct_gpu_hours "$id")" "job $id gpu_hours"
  done
  # Every job ran a few seconds at least: the numbers checked are not zeros.
  awk "BEGIN { exit !($(job_json "$AC_WIDE" gpu_hours) > 0 && $(job_json "$AC_CANCEL" gpu_hours) > 0) }" ||
    fail "a job shows 0 GPU-hours"
  run job_json "$AC_REQ" runs
  assert_output 2
  run job_json "$AC_REQ" state
  assert_output COMPLETED
}

@test "totals cover exactly the jobs that ran in the window; a job never started is left out" {
  cat records.txt
  run jq -r '.total.jobs, .total.runs' report.json
  assert_output "$(printf '5\n6')"
  run job_json "$AC_NEVER" job_id
  assert_output ''
  local sum=0 id
  for id in "$AC_WIDE" "$AC_OK" "$AC_FAIL" "$AC_REQ" "$AC_CANCEL"; do
    sum=$(awk -v a="$sum" -v b="$(sacct_gpu_hours "$id")" 'BEGIN { printf "%.12f", a + b }')
  done
  assert_close "$(jq -r .total.gpu_hours report.json)" "$sum" "total gpu_hours"
}

@test "waste: the failed run whole, the requeued run up to half the checkpoint interval, nothing for completed or cancelled" {
  assert_close "$(job_json "$AC_FAIL" wasted_gpu_hours)" "$(sacct_gpu_hours "$AC_FAIL")" "failed job waste"
  # The requeued run: whole, or I/2 when the plan in its AdminComment names a checkpoint
  # interval I (never the Comment the user wrote).
  local interval expected
  interval=$(awk -F'|' -v id="$AC_REQ" '$1 == id && match($7, /ckpt=[0-9]+s/) { print substr($7, RSTART + 5, RLENGTH - 6); exit }' sacct.txt)
  expected=$(awk -F'|' -v id="$AC_REQ" -v i="${interval:-0}" -v g="$(sacct_gpus "$AC_REQ")" '
    $1 == id && $2 ~ /^REQUEUED/ { w = $4; if (i > 0 && i / 2 < w) w = i / 2; s += g * w }
    END { printf "%.12f", s / 3600 }' sacct.txt)
  awk "BEGIN { exit !($expected > 0) }" || fail "the requeued run shows no elapsed time"
  assert_close "$(job_json "$AC_REQ" wasted_gpu_hours)" "$expected" "requeued job waste"
  for id in "$AC_WIDE" "$AC_OK" "$AC_CANCEL"; do
    run job_json "$id" wasted_gpu_hours
    assert_output 0
  done
  local total
  total=$(awk -v a="$(sacct_gpu_hours "$AC_FAIL")" -v b="$expected" 'BEGIN { printf "%.12f", a + b }')
  assert_close "$(jq -r .total.wasted_gpu_hours report.json)" "$total" "total waste"
  run jq -r '.by_state | keys | join(",")' report.json
  assert_output 'CANCELLED,COMPLETED,FAILED,REQUEUED'
}

@test "cost is GPU-hours x the partition's price from the policy and catalog (spot vs on-demand)" {
  cat sacct.txt; jq -c '.notes, .by_partition' report.json   # printed only if this test fails
  local od spot
  od=$(gpu_hour_price gpu-od)
  spot=$(gpu_hour_price gpu-spot)
  awk "BEGIN { exit !($spot < $od) }" || fail "spot ($spot) is not cheaper than on-demand ($od)"
  for id in "$AC_WIDE" "$AC_OK" "$AC_REQ" "$AC_CANCEL"; do
    assert_close "$(job_json "$id" cost_usd)" "$(awk -v h="$(sacct_gpu_hours "$id")" -v p="$od" 'BEGIN { printf "%.12f", h * p }')" "job $id cost"
  done
  assert_close "$(job_json "$AC_FAIL" cost_usd)" "$(awk -v h="$(sacct_gpu_hours "$AC_FAIL")" -v p="$spot" 'BEGIN { printf "%.12f", h * p }')" "spot job cost"
  assert_close "$(job_json "$AC_FAIL" wasted_usd)" "$(job_json "$AC_FAIL" cost_usd)" "failed job wasted dollars"
  run jq -r '.by_partition | keys | join(",")' report.json
  assert_output 'gpu-od,gpu-spot'
}

@test "users and accounts come from accounting; the plan in AdminComment is read" {
  run jq -r --arg u "$SCALEGUARD_TEST_USER" '.by_user[$u].jobs' report.json
  assert_output 1
  run jq -r '.by_user.root.jobs' report.json
  assert_output 4
  run jq -r '.by_account | keys | length' report.json
  refute_output 0
  # The 16-GPU job's AdminComment carries decide()'s summary and the decision id: 16 GPUs,
  # as planned, no waste flag.
  run awk -F'|' -v id="$AC_WIDE" '$1 == id { print $7 }' sacct.txt
  assert_output --regexp '^scaleguard: .*gpus=16 nodes=2 .*\[sg=[^]]+\]$'
  run job_json "$AC_WIDE" 'flags | map(select(startswith("low_gpu_efficiency"))) | length'
  assert_output 0
}

@test "a plan the user forged in the job Comment is not read" {
  # sacct stores the forged Comment (AccountingStoreFlags=job_comment on the dev cluster)...
  run cat user-comment.txt
  assert_output --partial "$AC_FORGED"
  # ...but the report's waste for the requeued run ignores its ckpt=2s, which would make it
  # 1 GPU x 1 s (the waste test above checks the exact number against the AdminComment).
  local whole
  whole=$(sacct_gpu_hours "$AC_REQ" REQUEUED)
  awk -v w="$whole" 'BEGIN { exit !(w * 3600 > 1.5) }' || fail "the requeued run lasted under 1.5 s"
  awk -v w="$(job_json "$AC_REQ" wasted_gpu_hours)" 'BEGIN { exit !(w * 3600 > 1.5) }' ||
    fail "requeued job waste $(job_json "$AC_REQ" wasted_gpu_hours) GPU-h: the forged ckpt=2s was read"
}

@test "text and HTML reports of the same window" {
  run scaleguard report --since "$AC_SINCE" --until "$AC_UNTIL"
  assert_success
  assert_output --partial "$AC_WIDE"
  assert_output --partial gpu-spot
  run scaleguard report --since "$AC_SINCE" --until "$AC_UNTIL" --format html -o report.html
  assert_success
  run grep -c '<svg' report.html
  refute_output 0
}

@test "a partition the policy does not price is named in a note and costs \$0" {
  # The policy without its gpu-spot section.
  awk '/^\[/ { skip = ($0 == "[partition gpu-spot]") } !skip' \
    "$SCALEGUARD_SOURCE_DIR/configs/policy.ini" > nospot.ini
  sed -i "s|^catalog *=.*|catalog = $SCALEGUARD_SOURCE_DIR/configs/catalog.ini|" nospot.ini
  run scaleguard report --since "$AC_SINCE" --until "$AC_UNTIL" --format json --policy nospot.ini
  assert_success
  run jq -r '.notes[]' <<<"$output"
  assert_output --partial "partition 'gpu-spot' has no price in the policy"
}

@test "a window without jobs says so" {
  run scaleguard report --since 2001-01-01 --until 2001-01-02
  assert_failure 1
  assert_output --partial 'no jobs between 2001-01-01T00:00:00 and 2001-01-02T00:00:00'
}

@test "sacct missing from PATH is a clear error" {
  run env PATH=/nonexistent "$(command -v scaleguard)" report --since "$AC_SINCE"
  assert_failure 1
  assert_output --partial sacct
  refute_output --partial 'terminate called'
}

# Slurm moves a requeued job's begin time into the record of the run that just ended when
# `scontrol update StartTime=` comes before the requeue has finished, so that run's
# EligibleTime can lie after the window it ran in. sacct's plain time window (EligibleTime <
# --endtime) then drops it; the report must still count it.
@test "a requeued run whose EligibleTime Slurm moved past the window is still counted" {
  local i since until id out
  sleep 1; since=$(date +%Y-%m-%dT%H:%M:%S); sleep 1
  submit -J sg-ac -o /dev/null -p gpu-od --gpus=1 --time=1:00:00 --requeue --wrap 'sleep 300'
  id=$job_id
  wait_running "$id"
  sleep 2
  scontrol requeue "$id"
  for ((i = 0; i < 100; i++)); do
    scontrol update jobid="$id" StartTime=now+3600 2>/dev/null && break
    sleep 0.2
  done
  # Cancel it once the requeue is complete (PENDING, not COMPLETING): the wait then gets its
  # own CANCELLED record.
  for ((i = 0; i < 300; i++)); do
    [ "$(squeue -h -j "$id" -o %T)" = PENDING ] && break
    sleep 0.2
  done
  scancel "$id"
  wait_sacct "$id:REQUEUED,CANCELLED"
  sleep 1; until=$(date +%Y-%m-%dT%H:%M:%S)
  sacct -X -D -P -j "$id" -o JobID,State,Submit,Eligible,Start,End,ElapsedRaw   # shown on failure
  scaleguard report --since "$since" --until "$until" --format json \
    --policy "$SCALEGUARD_SOURCE_DIR/configs/policy.ini" > moved.json
  sacct -X -D -n -P -j "$id" -o JobID,State,AllocTRES,ElapsedRaw > moved-sacct.txt
  run jq -r '.total.jobs, .total.runs' moved.json
  assert_output "$(printf '1\n1')"
  out=$(jq -r --arg id "$id" '.jobs[] | select(.job_id == $id) | .gpu_hours, .state' moved.json)
  local elapsed
  elapsed=$(awk -F'|' '$2 == "REQUEUED" { print $4 }' moved-sacct.txt)
  awk "BEGIN { exit !($elapsed > 0) }" || fail "the requeued run shows no elapsed time"
  assert_close "$(head -n 1 <<<"$out")" "$(awk -v e="$elapsed" 'BEGIN { printf "%.12f", e / 3600 }')" \
    "job $id gpu_hours"
  # Its last record, the wait it was cancelled in, gives the job's state.
  [ "$(tail -n 1 <<<"$out")" = CANCELLED ] || fail "job $id state: $(tail -n 1 <<<"$out")"
}
