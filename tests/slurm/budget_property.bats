#!/usr/bin/env bats
# Issue 36's budget property, generated: with two small GPU-hour budgets (sgb-pp-a: 40 per day;
# sgb-pp-b: 60 per day, grace 0.05) and prep/scaleguard judging reruns, a seeded sequence of
# the test user's steps under those accounts -- held shapes of envelope_property.py's generator
# (sbatch, arrays, het jobs; time limits drawn so that budgets matter), `scontrol update` of
# his jobs (nodes, GPUs, Gres, tasks, time down, partition, Account=), `scaleguard budget sync`
# (waiting until slurmctld loaded it), a held job released for a short real run and requeued
# (sometimes rerun at once), scancel -- never leaves an account over its budget: after every
# step, used (sacct's runs in the period) + the oracle's worst case of every job Slurm holds
# (`scontrol show job -d`, counted as envelope_property.py counts it) <= gpu_hours x (1 +
# grace). The script: property/budget_property.py. SEED=N reproduces the step sequence;
# SCALEGUARD_BUDGET_PROPERTY_STEPS (default 300) sets its size; scripts/soak-budget runs 5,000.
# The whole output is kept in $SCALEGUARD_DEV_DIR/log/budget-property.log.

load helpers
load budget_helpers
# At file level: bats 1.8 arms the test's timeout before the body runs (an assignment inside
# the test is ignored and helpers.bash's 240 s would apply). 300 steps take 2-4 minutes.
BATS_TEST_TIMEOUT=$((300 + ${SCALEGUARD_BUDGET_PROPERTY_STEPS:-300} * 3))

setup_file() {
  cluster_env
  export BUD_SKIP=
  accounting_on || { BUD_SKIP="the dev cluster has no accounting (budgets count sacct's usage)"; return 0; }
  resume_nodes
  export BUD_TMP=$(user_dir)
  make_ledger_dir
  cp "$SCALEGUARD_SOURCE_DIR/configs/catalog.ini" "$BUD_TMP/"
  add_accounts sgb-pp-a sgb-pp-b
  sed -e 's/^distributed_min_gpu_hours *=.*/distributed_min_gpu_hours = off/' \
      "$SCALEGUARD_SOURCE_DIR/configs/policy.ini" > "$BUD_TMP/policy.ini"
  cat >> "$BUD_TMP/policy.ini" <<EOT

[budgets]
ledger = $BUD_LEDGER
ledger_max_age = 10m
on_stale_ledger = closed

[budget pa]
account = sgb-pp-a
gpu_hours = 40
period = day
actions = 100% reject

[budget pb]
account = sgb-pp-b
gpu_hours = 60
grace = 0.05
period = day
actions = 80% warn, 100% reject
EOT
  chmod -R a+rX "$BUD_TMP"
  export SETTINGS=$SCALEGUARD_DEV_DIR/etc/job_submit_scaleguard.conf
  cp "$SLURM_CONF" "$BUD_TMP/slurm.conf.orig"
  # Every new run of a job judged against its budgets (issue 36, class 4).
  echo "PrEpPlugins=script,scaleguard" >> "$SLURM_CONF"
  use_policy
}

teardown_file() {
  [ -n "${BUD_TMP:-}" ] || return 0
  # Until none is left (bounded): a job caught between its requeue and pending again escapes
  # one scancel and would start later, holding both nodes for the next file's tests.
  local i
  # By name, whatever account an update left the job in.
  local ids
  for ((i = 0; i < 60; i++)); do
    ids=$(squeue -h --user="$SCALEGUARD_TEST_USER" -o '%i %j' 2>/dev/null | awk '$2 ~ /^sgbp/ { print $1 }')
    [ -z "$ids" ] && break
    # shellcheck disable=SC2086  # one id per word
    scancel --quiet $ids 2>/dev/null || true
    sleep 0.5
  done
  wait_no_running_jobs
  cp "$BUD_TMP/slurm.conf.orig" "$SLURM_CONF"
  restore_settings
  resume_nodes
  rm -rf "$BUD_TMP"
}

setup() {
  [ -z "$BUD_SKIP" ] || skip "$BUD_SKIP"
  cluster_env
}

@test "no generated sequence of submissions, updates, syncs, runs, requeues and cancels puts an account over its budget" {
  local steps=${SCALEGUARD_BUDGET_PROPERTY_STEPS:-300}
  local log=$SCALEGUARD_DEV_DIR/log/budget-property.log
  # One seed by default (checked on 22.05: 0 violations), so the suite's verdict does not hang
  # on the draw; SEED=N replays, SEED=random explores (scripts/soak-budget). A random 22.05 run
  # (SEED=153472058) found an account over by the few GPU-seconds of a run that ended since the
  # last sync (issue 36 notes): open, not hidden.
  if [ "${SEED:-}" = random ]; then unset SEED; else export SEED=${SEED:-2}; fi
  run python3 "$BATS_TEST_DIRNAME/property/budget_property.py" --steps "$steps" \
    --policy "$BUD_TMP/policy.ini" --ledger "$BUD_LEDGER" \
    --ctld-log "$SCALEGUARD_DEV_DIR/log/slurmctld.log" \
    --pidfile "$SCALEGUARD_DEV_DIR/run/slurmctld.pid" -v
  printf '%s\n' "$output" > "$log"
  grep -E '^(budget property|summary|  (submit|update|sync|run|over|highest|violations|slurmctld)|VIOLATION)' "$log" >&3 || true
  assert_success
  assert_output --partial 'violations: 0'
  # The budgets mattered: some submissions were refused by one.
  assert_output --regexp 'refused by a budget [1-9]'
  assert_slurmctld_alive
}
