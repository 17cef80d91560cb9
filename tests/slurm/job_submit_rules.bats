#!/usr/bin/env bats
# Issue 25, classes 5, 6, 7 and 9, as the non-root test user on the dev cluster: rules that
# would stop each other, partition lists, runs of a requeued job, and updates of a job whose
# record an admin touched or that was judged in shadow mode. Works on a copy of configs/ with
# an audit file; restores the cluster's policy afterwards.

load helpers

setup_file() {
  cluster_env
  resume_nodes
  export RU_TMP=$(user_dir)
  cp "$SCALEGUARD_SOURCE_DIR/configs/policy.ini" "$SCALEGUARD_SOURCE_DIR/configs/catalog.ini" "$RU_TMP/"
  # max_job_gpu_hours cuts (rewrite); the array cap refuses; gpu-spot cuts at 50 GPU-hours.
  sed -i -e 's/^max_job_gpu_hours *=.*/max_job_gpu_hours = 150 rewrite/' \
    -e 's/^max_array_gpu_hours *=.*/max_array_gpu_hours = 1000 reject/' \
    -e "s|^# audit_file = .*|audit_file = $RU_TMP/audit.jsonl|" \
    -e 's/^\[partition gpu-spot\]/[partition gpu-spot]\nmax_job_gpu_hours = 50 rewrite/' "$RU_TMP/policy.ini"
  export SETTINGS=$SCALEGUARD_DEV_DIR/etc/job_submit_scaleguard.conf
  cp "$SETTINGS" "$RU_TMP/settings.orig"
  sed -i "s|^policy=.*|policy=$RU_TMP/policy.ini|" "$SETTINGS"
  # The SPANK plugin on the nodes reads max_job_runs from its own policy= (plugstack.conf,
  # read by each slurmstepd): the same copy.
  sed -i 's/^max_job_runs *=.*/max_job_runs = 2/' "$RU_TMP/policy.ini"
  export PLUGSTACK=$SCALEGUARD_DEV_DIR/etc/plugstack.conf
  cp "$PLUGSTACK" "$RU_TMP/plugstack.orig"
  sed -i "s| policy=[^ ]*| policy=$RU_TMP/policy.ini|" "$PLUGSTACK"
  restart_slurmctld
}

teardown_file() {
  scancel --quiet --name=sg-ru 2>/dev/null || true
  cp "$RU_TMP/settings.orig" "$SETTINGS"
  cp "$RU_TMP/plugstack.orig" "$PLUGSTACK"
  restart_slurmctld
  rm -rf "$RU_TMP"
}

setup() {
  cluster_env
  cd "$RU_TMP"
}

# user_sbatch ARGS...: held submission as the test user (nothing starts).
user_sbatch() {
  as_user "$RU_TMP" sbatch -J sg-ru -H "$@"
}

# policy_mode enforce|shadow: switch the policy and wait until slurmctld judges with it.
policy_mode() {
  sed -i "s/^mode = .*/mode = $1/" "$RU_TMP/policy.ini"
  touch -d '-5 seconds' "$RU_TMP/policy.ini"
}

@test "class 5: a job cap that cuts does not stop the array cap (1000 x 8 GPUs x 2 days)" {
  # max_job_gpu_hours cuts each element to 150 GPU-hours; 1000 elements are still 150,000 GPU-
  # hours > max_array_gpu_hours 1000. Before: decide returned after the cut, the array was accepted.
  run user_sbatch --array=0-999 -N 1 --gpus-per-node=8 -t 2-00:00:00 --wrap true
  assert_failure
  assert_output --partial 'max_job_gpu_hours'
  assert_output --partial 'max_array_gpu_hours'
  assert_output --partial 'Access/permission denied'
  # One element alone is cut to the cap (150 / 8 GPUs = 18:45:00), not refused.
  run user_sbatch --parsable -N 1 --gpus-per-node=8 -t 2-00:00:00 --wrap true
  assert_success
  job_id=$(parsed_job_id)
  run job_field "$job_id" TimeLimit
  assert_output 18:45:00
}

@test "class 6: a partition list carries a later partition's time cut and spot's requeue" {
  # 1 GPU x 72 h: gpu-od accepts it as it is; gpu-spot cuts it to 50 GPU-hours and must
  # checkpoint (requeue + USR1). Before: only gpu-od's (no) changes were applied.
  run user_sbatch --parsable -p gpu-od,gpu-spot --gpus=1 -t 3-00:00:00 --wrap true
  assert_success
  job_id=$(parsed_job_id)
  run job_field "$job_id" TimeLimit
  assert_output 2-02:00:00
  run job_field "$job_id" Requeue
  assert_output 1
  run job_field "$job_id" Partition
  assert_output gpu-od,gpu-spot
}

# A job under the cap: 8 GPUs x 13 h = 104 GPU-hours, with the checkpoint signal the policy
# requires from 100 GPU-hours on; 20 h would be 160 > 150.
held_job() {
  run user_sbatch --parsable -N 1 --gpus-per-node=8 --requeue --signal=B:USR1@300 -t 13:00:00 --wrap true
  assert_success
  job_id=$(parsed_job_id)
}

@test "class 9: an admin replacing AdminComment keeps the record; the user's update is still judged" {
  held_job
  scontrol update jobid="$job_id" AdminComment="ticket 42"
  run job_comment "$job_id"
  assert_output --regexp '^ticket 42 \| scaleguard: .*\[sg=sg-[^]]*;t=780(;|\])'
  # Before: the record was gone and the update was accepted unjudged.
  run as_user "$RU_TMP" scontrol update jobid="$job_id" TimeLimit=20:00:00
  assert_failure
  run job_field "$job_id" TimeLimit
  assert_output 13:00:00
  # An admin note with a stray "[sg=" (after the record, or a cut one) does not hide it.
  scontrol update jobid="$job_id" AdminComment="see [sg=old; and [sg=x;gj=zz]"
  run as_user "$RU_TMP" scontrol update jobid="$job_id" TimeLimit=20:00:00
  assert_failure
  run job_field "$job_id" TimeLimit
  assert_output 13:00:00
}

@test "class 9: a trusted user's update refreshes the record" {
  held_job
  scontrol update jobid="$job_id" TimeLimit=19:00:00   # root: not judged (152 GPU-hours)
  run job_comment "$job_id"
  assert_output --regexp '\[sg=sg-[^]]*;t=1140(;|\])'
  # The user's next growth update is judged on the 19 h the job now has: 152 > 150.
  # Before: judged on the stale 13 h record and accepted.
  run as_user "$RU_TMP" scontrol update jobid="$job_id" NumTasks=2
  assert_failure
  run grep -E "update of job $job_id by uid [0-9]+ refused" "$SCALEGUARD_DEV_DIR/log/slurmctld.log"
  assert_success
}

@test "class 9: a job judged in shadow mode has its updates judged after the switch to enforce" {
  policy_mode shadow
  local i comment
  for ((i = 0; i < 40; i++)); do   # until slurmctld judges in shadow: the record is bare
    held_job
    comment=$(job_comment "$job_id")
    [[ $comment == "[sg="* ]] && break
    scancel "$job_id"
    sleep 0.3
  done
  assert_regex "$comment" '^\[sg=sg-[^]]*\]$'
  policy_mode enforce
  for ((i = 0; i < 40; i++)); do   # until enforced again: the array of class 5 is refused
    user_sbatch --array=0-999 -N 1 --gpus-per-node=8 -t 2-00:00:00 --wrap true >/dev/null 2>&1 || break
    sleep 0.3
  done
  # Before: no record, the update was accepted unjudged (8 x 20 h = 160 > 150).
  run as_user "$RU_TMP" scontrol update jobid="$job_id" TimeLimit=20:00:00
  assert_failure
  run job_field "$job_id" TimeLimit
  assert_output 13:00:00
}

# requeue_and_run JOB: the owner requeues the (finished) job, started at once (start_requeued);
# prints the state it ends in.
requeue_and_run() {
  as_user "$RU_TMP" scontrol requeue "$1" || return 1
  start_requeued "$1" || return 1
  wait_job "$1" 120
}

@test "class 7: a requeued job runs at most max_job_runs times over its life" {
  # max_job_runs = 2: the owner requeues a completed job twice; the third run ends FAILED
  # before its script runs. Before: every requeue ran the script again.
  rm -f "$RU_TMP/runs.txt"
  run as_user "$RU_TMP" sbatch --parsable -J sg-ru --requeue --gpus=1 -t 10:00 -o "$RU_TMP/run-%j.out" \
    --wrap "echo ran >> $RU_TMP/runs.txt"
  assert_success
  job_id=$(parsed_job_id)
  run wait_job "$job_id" 120
  assert_output COMPLETED
  run requeue_and_run "$job_id"
  assert_output COMPLETED
  run requeue_and_run "$job_id"
  assert_output FAILED
  run wc -l < "$RU_TMP/runs.txt"
  assert_output 2
  run job_field "$job_id" Restarts
  assert_output 2
  run cat "$RU_TMP/run-$job_id.out"   # the user's reason, in the job's own output
  assert_output --partial "scaleguard: job $job_id: run 3 refused: the policy allows 2 runs of one job (max_job_runs)"
  run grep -c "job $job_id: run 2 (max_job_runs 2)" "$SCALEGUARD_DEV_DIR"/log/slurmd-gpu-st-p4d-1.log \
    "$SCALEGUARD_DEV_DIR"/log/slurmd-gpu-st-p4d-2.log
  assert_output --partial ':1'   # each run is counted in the node's log
}

@test "rules: slurmctld is alive after every shape" {
  assert_slurmctld_alive
}
