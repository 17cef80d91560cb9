#!/usr/bin/env bats
# Every new run of a job is checked against its budgets (issue 36, class 4): prep/scaleguard
# (spank-plugin/job_submit/prep.cpp; the same .so as job_submit/scaleguard, loaded a second
# time through PrEpPlugins=script,scaleguard) judges each requeued job's next run in slurmctld.
# A job its owner requeues after the account's budget is used up does not start again: it is
# requeued and held, and the numbers are in its Comment; once the budget has room again (a
# sync that counts the job as waiting, its own lien, not counted twice) it runs.
# Works on a copy of configs/ with one budget of its own account (sgb-rq); restores the
# cluster's slurm.conf and policy afterwards.

load helpers
load budget_helpers

write_policy() {
  sed -e 's/^distributed_min_gpu_hours *=.*/distributed_min_gpu_hours = off/' \
      "$SCALEGUARD_SOURCE_DIR/configs/policy.ini" > "$RQ_TMP/policy.ini"
  cat >> "$RQ_TMP/policy.ini" <<EOT
[budgets]
ledger = $RQ_LEDGER
ledger_max_age = 10m
on_stale_ledger = closed

[budget rq]
account = sgb-rq
gpu_hours = 2
period = day
actions = 100% reject
EOT
}

user_sbatch() { as_user "$RQ_TMP" sbatch "$@" 2>&1; }

# Waits (bounded) until job $1 is in state $2; prints the state it ended in.
wait_state() {
  local i s
  for ((i = 0; i < ${3:-150}; i++)); do
    s=$(squeue -h -j "$1" -o %T 2>/dev/null)
    [ "$s" = "$2" ] && break
    sleep 0.2
  done
  echo "$s"
}

setup_file() {
  cluster_env
  export RQ_SKIP=
  accounting_on || { RQ_SKIP="the dev cluster has no accounting (scripts/dev-cluster/accounting)"; return 0; }
  resume_nodes
  export RQ_TMP=$(user_dir)
  export BUD_TMP=$RQ_TMP   # budget_helpers.bash's names
  make_ledger_dir
  export RQ_LEDGER=$BUD_LEDGER
  cp "$SCALEGUARD_SOURCE_DIR/configs/catalog.ini" "$RQ_TMP/"
  add_accounts sgb-rq
  write_policy
  export SETTINGS=$SCALEGUARD_DEV_DIR/etc/job_submit_scaleguard.conf
  cp "$SETTINGS" "$RQ_TMP/settings.orig"
  cp "$SLURM_CONF" "$RQ_TMP/slurm.conf.orig"
  sed -i "s|^policy=.*|policy=$RQ_TMP/policy.ini|" "$SETTINGS"
  # The dev cluster loads prep/scaleguard (scripts/dev-cluster/up, as install.sh configures it).
  # RQ_WITHOUT_PREP=1: without it (main before issue 36 class 4), to see the test fail.
  if [ -n "${RQ_WITHOUT_PREP:-}" ]; then
    sed -i '/^PrEpPlugins=/d' "$SLURM_CONF"
  else
    grep -q '^PrEpPlugins=script,scaleguard$' "$SLURM_CONF" || echo "PrEpPlugins=script,scaleguard" >> "$SLURM_CONF"
  fi
  restart_slurmctld
}

teardown_file() {
  [ -n "${RQ_TMP:-}" ] || return 0
  scancel --quiet --name=sg-rq 2>/dev/null || true
  wait_no_running_jobs
  cp "$RQ_TMP/settings.orig" "$SETTINGS"
  cp "$RQ_TMP/slurm.conf.orig" "$SLURM_CONF"
  restart_slurmctld
  resume_nodes
  rm -rf "$RQ_TMP"
}

setup() {
  [ -z "$RQ_SKIP" ] || skip "$RQ_SKIP"
  cluster_env
  cd "$RQ_TMP"
}

@test "prep/scaleguard is loaded beside job_submit/scaleguard (one .so, one budget Gate)" {
  run scontrol show config
  assert_output --regexp 'PrEpPlugins += script,scaleguard'
  run grep -c "job_submit/scaleguard: policy $RQ_TMP/policy.ini" "$SCALEGUARD_DEV_DIR/log/slurmctld.log"
  assert_success
}

@test "a job its owner requeues after the budget is used up does not run again, and says why; it runs once there is room" {
  sync_ledger
  # 8 GPUs x 10 min = 1.33 GPU-hours of the 2; it runs.
  run user_sbatch -J sg-rq -A sgb-rq --parsable --requeue --gpus=8 --time=10 -o /dev/null --wrap 'sleep 600'
  assert_success
  local job; job=$(parsed_job_id)
  [ "$(wait_state "$job" RUNNING)" = RUNNING ] || fail "job $job did not start"
  # The rest of the budget: a held job of 4 GPUs x 10 min (0.67 GPU-hours): 2 of 2.
  run user_sbatch -J sg-rq -A sgb-rq -H --parsable --gpus=4 --time=10 -o /dev/null --wrap true
  assert_success
  local filler; filler=$(parsed_job_id)
  # A fresh identical submission is refused with the numbers...
  run user_sbatch -J sg-rq -A sgb-rq --requeue --gpus=8 --time=10 -o /dev/null --wrap 'sleep 600'
  assert_failure
  assert_output --partial "budget rq"
  assert_output --partial "does not fit"
  # ...and so is the same job's next run after its owner requeues it.
  run as_user "$RQ_TMP" scontrol requeue "$job"
  assert_success
  start_requeued "$job"
  sleep 3
  run squeue -h -j "$job" -o '%T|%r'
  assert_output "PENDING|job requeued in held state"
  run scontrol show job "$job"
  assert_output --partial "Comment=scaleguard: new run refused: budget rq"
  assert_output --partial "this new run of the job (8 GPUs x 0:10:00, 1.33 GPU-hours)"
  assert_output --partial "does not fit"
  run grep "prep/scaleguard: JobId=$job run 2 .* refused, requeued and held" "$SCALEGUARD_DEV_DIR/log/slurmctld.log"
  assert_success
  # Held, it stays held: no loop of starts (the next check needs the owner's release).
  sleep 3
  run squeue -h -j "$job" -o '%T'
  assert_output PENDING
  # Room again: the filler goes; the sync counts the requeued job's own lien (1.33 of 2), which
  # is this run's, not a second charge. Released, it runs, and our text leaves its Comment.
  scancel "$filler"
  sync_ledger
  run as_user "$RQ_TMP" scontrol release "$job"
  assert_success
  start_requeued "$job"
  [ "$(wait_state "$job" RUNNING)" = RUNNING ] || fail "job $job did not run again: $(scontrol show job "$job" | grep -E 'Reason|Comment')"
  run grep -E "prep/scaleguard: JobId=$job run [0-9]+ .* fits its budgets" "$SCALEGUARD_DEV_DIR/log/slurmctld.log"
  assert_success
  run scontrol show job "$job"
  refute_output --partial "new run refused"
  scancel "$job"
}

# Review of class 4 (hostile user): an update the owner makes while the requeued job waits was
# taken as the budgets holding the new run (the Gate's record of the update, judged after the
# requeue, carried the ledger's amount for the *old* run), so the next run started free, and
# the account could take another job on the old run's commitment before the next sync.
@test "an update between its owner's requeue and the next run does not make the run free" {
  sync_ledger
  run user_sbatch -J sg-rq -A sgb-rq --parsable --requeue --gpus=8 --time=10 -o /dev/null --wrap 'sleep 600'
  assert_success
  local job; job=$(parsed_job_id)
  [ "$(wait_state "$job" RUNNING)" = RUNNING ] || fail "job $job did not start"
  sync_ledger   # counts the running job: committed 1.33 of 2
  # 4 GPUs x 9 min (0.6 GPU-hours): 1.93 of 2, the rest (30 s of 8 GPUs) for what the previous
  # test's three runs of its job used (sacct's whole seconds: 0 s each seen on 22.05, 1 s for two
  # of them on 25.11.7), which made "exactly full" refuse this filler there.
  run user_sbatch -J sg-rq -A sgb-rq -H --parsable --gpus=4 --time=9 -o /dev/null --wrap true
  assert_success
  local filler; filler=$(parsed_job_id)
  run as_user "$RQ_TMP" scontrol requeue "$job"
  assert_success
  local i
  for ((i = 0; i < 1500; i++)); do
    [ "$(squeue -h -j "$job" -o %T)" = PENDING ] && break
    sleep 0.2
  done
  # The owner's update of the waiting job (nothing grows: its one node).
  run as_user "$RQ_TMP" scontrol update job="$job" NumNodes=1
  assert_success
  start_requeued "$job"
  sleep 3
  run squeue -h -j "$job" -o '%T|%r'
  assert_output "PENDING|job requeued in held state"
  run grep "prep/scaleguard: JobId=$job run 2 .* refused, requeued and held" "$SCALEGUARD_DEV_DIR/log/slurmctld.log"
  assert_success
  scancel "$job" "$filler"
}
