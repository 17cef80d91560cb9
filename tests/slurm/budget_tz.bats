#!/usr/bin/env bats
# Budget periods in a time zone (issue 40 item 4): `timezone = Europe/Berlin` makes a day
# start at Berlin's wall-clock time, daylight saving included. `budget sync` works the periods
# out with the tz database and writes them into the ledger; job_submit/scaleguard, which has no
# tz database, judges with the ledger's window and rolls over at the boundaries it lists.
# A real run in account sgz-a (8 GPUs for ~20 s, about 0.044 GPU-hours), then day budgets of
# 0.05 GPU-hours whose day starts at a chosen wall-clock time: written as a date on the other
# side of a daylight saving change from today, as a start is written once and kept all year.
# GNU date's reading of the same tz database is the oracle for the instants.

load helpers
load budget_helpers

ZONE=Europe/Berlin

# The budget, in a zone or UTC (timezone = UTC, or a start with its own offset).
write_policy() {  # write_policy TIMEZONE START [GPU_HOURS]
  sed -e 's/^distributed_min_gpu_hours *=.*/distributed_min_gpu_hours = off/' \
    "$SCALEGUARD_SOURCE_DIR/configs/policy.ini" > "$BUD_TMP/policy.ini.new"
  cat >> "$BUD_TMP/policy.ini.new" <<EOT
[budgets]
ledger = $BUD_LEDGER
ledger_max_age = 10m

[budget tz]
account = sgz-a
gpu_hours = ${3:-0.05}
period = day
timezone = $1
start = $2
actions = 100% reject
EOT
  mv "$BUD_TMP/policy.ini.new" "$BUD_TMP/policy.ini"
}

# Writes the policy and waits (bounded) until slurmctld's budget thread has loaded it.
load_policy() {  # load_policy TIMEZONE START
  local log=$SCALEGUARD_DEV_DIR/log/slurmctld.log before i
  before=$(grep -c "budget(s) from $BUD_TMP/policy.ini" "$log" || true)
  write_policy "$@"
  for ((i = 0; i < 150; i++)); do
    [ "$(grep -c "budget(s) from $BUD_TMP/policy.ini" "$log" || true)" -gt "$before" ] && return 0
    sleep 0.2
  done
  fail "slurmctld did not load the budgets of $BUD_TMP/policy.ini"
}

ledger() { jq -r ".budgets.tz.$1" "$BUD_LEDGER"; }

# sbatch as the test user.
user_sbatch() { as_user "$BUD_TMP" sbatch "$@" 2>&1; }

# $ZONE's UTC offset at an instant, in seconds (GNU date's reading of the tz database).
offset_s() {
  TZ=$ZONE date -d "@$1" +%z | awk '{ s = substr($1, 1, 1) == "-" ? -1 : 1; print s * (substr($1, 2, 2) * 3600 + substr($1, 4, 2) * 60) }'
}

# A date on the other side of a daylight saving change from today in $ZONE (its offset then).
other_side() {
  local year
  year=$(date -u +%Y)
  if [ "$(TZ=$ZONE date +%z)" = "$(TZ=$ZONE date -d "$year-07-01 12:00" +%z)" ]; then echo "$year-01-15"; else echo "$year-07-01"; fi
}

setup_file() {
  cluster_env
  export BUD_SKIP= BUD_FAIL=
  accounting_on || { BUD_SKIP="the dev cluster has no accounting (scripts/dev-cluster/accounting)"; return 0; }
  [ -e "/usr/share/zoneinfo/$ZONE" ] || { BUD_SKIP="no tz database (/usr/share/zoneinfo, package tzdata)"; return 0; }
  resume_nodes
  export BUD_TMP=$(user_dir)
  make_ledger_dir
  add_accounts sgz-a
  cp "$SCALEGUARD_SOURCE_DIR/configs/catalog.ini" "$BUD_TMP/"
  # Room for the usage job's envelope (8 GPUs x 5 min) while it is submitted.
  write_policy "$ZONE" "$(other_side)T00:00" 10
  export SETTINGS=$SCALEGUARD_DEV_DIR/etc/job_submit_scaleguard.conf
  use_policy
  local log=$SCALEGUARD_DEV_DIR/log/slurmctld.log id i
  scaleguard budget sync --policy "$BUD_TMP/policy.ini" >/dev/null
  for ((i = 0; i < 50; i++)); do grep -q "budget ledger $BUD_LEDGER loaded" "$log" && break; sleep 0.2; done
  # The usage: one real run, finished and in accounting before the tests choose boundaries.
  id=$(as_user "$BUD_TMP" sbatch -J sg-tz -A sgz-a --parsable --gpus=8 --time=5 -o /dev/null --wrap 'sleep 20')
  id=${id%%;*}
  [ -n "$id" ] || { BUD_FAIL="the usage job was not submitted"; return 0; }
  for ((i = 0; i < 600; i++)); do
    [ "$(sacct -n -X -j "$id" -o State | tr -d ' ')" = COMPLETED ] && break
    sleep 0.2
  done
  [ "$(sacct -n -X -j "$id" -o State | tr -d ' ')" = COMPLETED ] || { BUD_FAIL="the usage job $id did not complete"; return 0; }
  export TZ_RUN_END
  TZ_RUN_END=$(date -d "$(sacct -n -X -j "$id" -o End | tr -d ' ')" +%s)
}

teardown_file() {
  budget_teardown sg-tz
}

setup() {
  [ -z "$BUD_SKIP" ] || skip "$BUD_SKIP"
  [ -z "$BUD_FAIL" ] || fail "$BUD_FAIL"
  cluster_env
  cd "$BUD_TMP"
}

@test "a day in Europe/Berlin starts at Berlin's wall clock: the run before it is not counted, while UTC or a fixed offset counts it and refuses the job" {
  # Today's day starts just after the run ended, at that wall-clock time in Berlin, written on
  # a date across a daylight saving change.
  local boundary hms other
  boundary=$(( $(date +%s) + 1 ))
  [ "$TZ_RUN_END" -lt "$boundary" ]
  hms=$(TZ=$ZONE date -d "@$boundary" +%H:%M:%S)
  other=$(other_side)
  load_policy "$ZONE" "${other}T$hms"
  while [ "$(date +%s)" -le "$boundary" ]; do sleep 0.2; done
  sync_ledger
  # The ledger's window and boundaries are Berlin's: today's start, tomorrow's at the same
  # wall-clock time (GNU date: 24 h, or 23/25 across a change), with Berlin's offsets.
  [ "$(ledger start)" = "$boundary" ] || fail "start $(ledger start), expected $boundary"
  local tomorrow next
  tomorrow=$(TZ=$ZONE date -d "$(TZ=$ZONE date -d "@$boundary" +%F) 12:00 +1 day" +%F)
  next=$(TZ=$ZONE date -d "$tomorrow $hms" +%s)
  [ "$(ledger end)" = "$next" ] || fail "end $(ledger end), expected $next"
  run jq -c '.budgets.tz.boundaries[0:2]' "$BUD_LEDGER"
  assert_output "[[$boundary,$(offset_s "$boundary")],[$next,$(offset_s "$next")]]"
  assert_close "$(ledger used)" 0 'used in Berlin'
  # 1 GPU for 2 min (0.033 GPU-hours) fits the 0.05.
  run user_sbatch -J sg-tz -H -A sgz-a --gpus=1 --time=2 --wrap true
  assert_success
  refute_output --partial 'budget tz'
  scancel --name=sg-tz
  # The same start in UTC: that day began 22 or 23 hours ago and holds the run.
  load_policy UTC "${other}T$hms"
  sync_ledger
  [ "$(ledger start)" -lt "$TZ_RUN_END" ] || fail "the UTC day starts at $(ledger start), after the run"
  awk -v u="$(ledger used)" 'BEGIN { exit !(u > 0.03) }' || fail "used in UTC $(ledger used)"
  run user_sbatch -J sg-tz -H -A sgz-a --gpus=1 --time=2 --wrap true
  assert_failure
  assert_output --partial 'budget tz (account sgz-a, day'
  assert_output --partial 'does not fit'
  # Berlin's offset on the start's date, written by hand: wrong on this side of the change.
  local offset
  offset=$(TZ=$ZONE date -d "${other} 12:00" +%:z)
  load_policy UTC "${other}T$hms$offset"
  sync_ledger
  [ "$(ledger start)" != "$boundary" ] || fail "a fixed offset $offset gave Berlin's start"
  awk -v u="$(ledger used)" 'BEGIN { exit !(u > 0.03) }' || fail "used at $offset $(ledger used)"
  run user_sbatch -J sg-tz -H -A sgz-a --gpus=1 --time=2 --wrap true
  assert_failure
}

@test "slurmctld rolls a Berlin day over at the boundary the ledger lists, without a sync, and says when in Berlin time" {
  scancel --name=sg-tz; sleep 1
  # Today's day ends a few seconds ahead; the one before holds the run.
  local boundary hms
  boundary=$(( $(date +%s) + 25 ))
  hms=$(TZ=$ZONE date -d "@$boundary" +%H:%M:%S)
  load_policy "$ZONE" "$(other_side)T$hms"
  sync_ledger
  [ "$(ledger end)" = "$boundary" ] || fail "end $(ledger end), expected $boundary"
  awk -v u="$(ledger used)" 'BEGIN { exit !(u > 0.03) }' || fail "used $(ledger used)"
  run user_sbatch -J sg-tz -H -A sgz-a --gpus=1 --time=2 --wrap true
  assert_failure
  assert_output --partial "resets $(TZ=$ZONE date -d "@$boundary" +%Y-%m-%dT%H:%M:%S%:z)"
  assert_output --partial "day in $ZONE"
  [ "$(date +%s)" -lt "$boundary" ] || fail "the refusal came after the boundary: the machine is too slow for this test"
  while [ "$(date +%s)" -le "$boundary" ]; do sleep 0.5; done
  run user_sbatch -J sg-tz -H -A sgz-a --gpus=1 --time=2 --wrap true
  assert_success
  scancel --name=sg-tz
}
