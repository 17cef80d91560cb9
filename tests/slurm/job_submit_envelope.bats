#!/usr/bin/env bats
# Enforcement judges what Slurm will grant, not what the request literally says. With the cap
# tightened to max_job_gpu_hours = 150 (and max_array_gpu_hours = 150), each request shape
# below got past it before the envelope (commit 64fc95c); as the non-root test user, each is
# now refused, or accepted with bounds written into the job that Slurm then shows. Works on a
# copy of configs/ with an audit file; restores the cluster's policy afterwards.

load helpers

setup_file() {
  cluster_env
  resume_nodes
  export EV_TMP=$(user_dir)
  cp "$SCALEGUARD_SOURCE_DIR/configs/policy.ini" "$SCALEGUARD_SOURCE_DIR/configs/catalog.ini" "$EV_TMP/"
  sed -i -e 's/^max_job_gpu_hours *=.*/max_job_gpu_hours = 150 reject/' \
    -e 's/^max_array_gpu_hours *=.*/max_array_gpu_hours = 150 reject/' \
    -e "s|^# audit_file = .*|audit_file = $EV_TMP/audit.jsonl|" "$EV_TMP/policy.ini"
  export SETTINGS=$SCALEGUARD_DEV_DIR/etc/job_submit_scaleguard.conf
  cp "$SETTINGS" "$EV_TMP/settings.orig"
  sed -i "s|^policy=.*|policy=$EV_TMP/policy.ini|" "$SETTINGS"
  restart_slurmctld
  printf '#!/bin/sh\ntrue\n' > "$EV_TMP/job.sh"
  chmod 755 "$EV_TMP/job.sh"
}

teardown_file() {
  scancel --quiet --name=sg-ev 2>/dev/null || true
  cp "$EV_TMP/settings.orig" "$SETTINGS"
  restart_slurmctld
  rm -rf "$EV_TMP"
}

setup() {
  cluster_env
  cd "$EV_TMP"
}

# user_sbatch ARGS...: held submission as the test user (nothing starts).
user_sbatch() {
  as_user "$EV_TMP" sbatch -J sg-ev -H "$@"
}

capped() {
  assert_failure
  assert_output --partial 'max_job_gpu_hours'
  assert_output --partial 'Batch job submission failed: Access/permission denied'
}

@test "a node range is judged at its maximum" {
  # 1-4 nodes x 8 GPUs x 10 h: judged at 1 node (80 GPU-hours) before; the partition has 2 nodes.
  run user_sbatch -N 1-4 --gpus-per-node=8 -t 10:00:00 --wrap true
  capped
  assert_output --partial 'up to 2 nodes (1-4)'
}

@test "derived counts: tasks from nodes x tasks per node x GPUs per task, GPUs per socket, node lists" {
  run user_sbatch -N 2 --ntasks-per-node=8 --gpus-per-task=1 -t 10:00:00 --wrap true
  capped
  run user_sbatch -N 2 --sockets-per-node=2 --gpus-per-socket=4 -t 10:00:00 --wrap true
  capped
  run user_sbatch -w 'gpu-st-p4d-[1-2]' --gpus-per-node=8 -t 10:00:00 --wrap true
  capped
  # Tasks without --nodes may spread one per node: the node count is bounded in the job.
  run user_sbatch --parsable -n 2 --gpus-per-node=4 -t 10:00:00 -p gpu-spot --wrap true
  assert_success
  job_id=$(parsed_job_id)
  run job_field "$job_id" NumNodes
  assert_output --regexp '^1-2$|^2$'
}

@test "--exclusive without a GPU request is judged as every GPU of its nodes" {
  run user_sbatch -N 1 --exclusive -t 20:00:00 --wrap true
  capped
  assert_output --partial '--exclusive: all 8 GPUs'
}

@test "a training intent never loosens the cap" {
  require_spank
  # The plan predicts a few hours, but the job may hold 16 GPUs for 3 days.
  run user_sbatch --gpus=16 -t 3-0 --train-model=7B --train-tokens=1B --wrap true
  capped
  assert_output --partial '16 GPUs x 72 h'
}

@test "a partition list is judged in every partition and rewritten to those that accept" {
  # gpu-spot only warns below 100 GPU-hours; gpu-od refuses.
  run user_sbatch --parsable -p gpu-od,gpu-spot --gpus=8 -t 1:00:00 --wrap true
  assert_success
  assert_output --partial 'Partition list rewritten to gpu-spot'
  job_id=$(parsed_job_id)
  run job_field "$job_id" Partition
  assert_output gpu-spot
  run user_sbatch -p gpu-spot,gpu-od --gpus=8 -t 19:00:00 --wrap true
  capped
  assert_output --partial 'refused in every partition listed'
}

@test "no time limit is written into the job; UNLIMITED is judged at the partition's maximum" {
  run user_sbatch --parsable --gpus=1 --wrap true
  assert_success
  assert_output --partial 'time limit set to 60 min'
  job_id=$(parsed_job_id)
  run job_field "$job_id" TimeLimit
  assert_output 01:00:00
  # UNLIMITED in a partition whose max_time is 7 days: 168 GPU-hours on one GPU.
  run user_sbatch --gpus=1 -t UNLIMITED --wrap true
  capped
}

@test "a het job's components are summed" {
  # 80 + 80 GPU-hours: each component alone passed before.
  run user_sbatch -p gpu-spot --gpus=8 -t 10:00:00 : -p gpu-spot --gpus=8 -t 10:00:00 "$EV_TMP/job.sh"
  capped
  assert_output --partial 'het job components 0-0'
  run user_sbatch -p gpu-spot --gpus=8 -t 9:00:00 : -p gpu-spot --gpus=8 -t 9:00:00 "$EV_TMP/job.sh"
  assert_success
}

@test "a job array's elements are summed under max_array_gpu_hours" {
  run user_sbatch -p gpu-spot --array=0-99%2 --gpus=8 -t 1:00:00 --wrap true
  assert_failure
  assert_output --partial 'max_array_gpu_hours'
  assert_output --partial '100 array elements'
}

@test "counts Slurm reads differently: gpu:1k is 1,024 GPUs, not a type" {
  run user_sbatch -N 2 --gres=gpu:1k -t 10:00:00 --wrap true
  capped
  run user_sbatch --gres=gpu:+8 --wrap true
  assert_failure
  assert_output --partial 'a count Slurm would read differently'
}

@test "updates: raising nodes, GPUs or time past the cap is refused; root is trusted" {
  # 1 node x 8 GPUs x 10 h = 80 GPU-hours; 2 nodes = 160 > the cap of 150.
  run user_sbatch --parsable -N 1 --gpus-per-node=8 -t 10:00:00 -p gpu-spot --wrap true
  assert_success
  job_id=$(parsed_job_id)
  run job_comment "$job_id"
  assert_output --regexp '\[sg=sg-[0-9]+-[0-9]+;.*gn=8'
  run as_user "$EV_TMP" scontrol update jobid="$job_id" NumNodes=2
  assert_failure
  # 23.02+ hand job_modify an err_msg: the user reads the reason (22.05: slurmctld's log only).
  if slurm_at_least 23.02; then assert_output --partial '[max_job_gpu_hours]'; fi
  run job_field "$job_id" NumNodes
  assert_output --regexp '^1(-1)?$'
  run as_user "$EV_TMP" scontrol update jobid="$job_id" TimeLimit=20:00:00
  assert_failure
  run job_field "$job_id" TimeLimit
  assert_output 10:00:00
  # Lowering the time, then raising the nodes: judged against the largest judged before.
  run as_user "$EV_TMP" scontrol update jobid="$job_id" TimeLimit=5:00:00
  assert_success
  run as_user "$EV_TMP" scontrol update jobid="$job_id" NumNodes=2
  assert_failure
  uid=$(id -u "$SCALEGUARD_TEST_USER")
  run grep -E "decision sg-[0-9-]+ event=update job=$job_id uid=$uid .*action=reject rules=.*max_job_gpu_hours" \
    "$SCALEGUARD_DEV_DIR/log/slurmctld.log"
  assert_success
  run scontrol update jobid="$job_id" TimeLimit=20:00:00
  assert_success
}

@test "updates: crossing checkpoint_required needs the USR1 signal an update cannot add; requeue stays on" {
  # 1 GPU x 90 h = 90 GPU-hours on-demand: below checkpoint_required (100), so the submission
  # sets no requeue or signal. 110 h = 110 GPU-hours makes checkpointing due, and Slurm
  # applies no warning signal from an update: the update is refused, with the way out.
  run user_sbatch --parsable --gpus=1 -t 90:00:00 -p gpu-od --wrap true
  assert_success
  job_id=$(parsed_job_id)
  run as_user "$EV_TMP" scontrol update jobid="$job_id" TimeLimit=110:00:00
  assert_failure
  if slurm_at_least 23.02; then assert_output --partial 'resubmit with --requeue --signal=B:USR1@300'; fi
  run job_field "$job_id" TimeLimit
  assert_output 3-18:00:00
  run grep -E "decision sg-[0-9-]+ event=update job=$job_id .*action=reject rules=.*checkpoint_required_gpu_hours" \
    "$SCALEGUARD_DEV_DIR/log/slurmctld.log"
  assert_success
  # Submitted with the signal, the same update passes, and the record keeps what the job has.
  run user_sbatch --parsable --gpus=1 -t 90:00:00 -p gpu-od --requeue --signal=B:USR1@300 --wrap true
  assert_success
  job_id=$(parsed_job_id)
  run as_user "$EV_TMP" scontrol update jobid="$job_id" TimeLimit=110:00:00
  assert_success
  run job_field "$job_id" TimeLimit
  assert_output 4-14:00:00
  run job_comment "$job_id"
  assert_output --regexp '\[sg=sg-[0-9]+-[0-9]+;.*rq=1;sig=300'
  # Now that it must checkpoint, requeue cannot be turned off.
  run as_user "$EV_TMP" scontrol update jobid="$job_id" Requeue=0
  assert_failure
  if slurm_at_least 23.02; then assert_output --partial 'requeue cannot be turned off'; fi
  run job_field "$job_id" Requeue
  assert_output 1
}

@test "updates: a job that was not judged cannot be moved into a governed partition" {
  # Jobs outside the policy's partitions carry no record; moving one in is a new submission.
  run user_sbatch --parsable --gpus=1 -t 1:00:00 --wrap true
  job_id=$(parsed_job_id)
  scontrol update jobid="$job_id" AdminComment=
  run as_user "$EV_TMP" scontrol update jobid="$job_id" Partition=gpu-spot
  assert_failure
  run job_field "$job_id" Partition
  assert_output gpu-od
}

@test "the plan goes to AdminComment: a user's Comment is untouched and cannot forge it" {
  # 980 bytes: near Slurm's 1,024-byte limit, which an appended plan used to push it over.
  long=$(printf 'x%.0s' $(seq 1 950))
  run user_sbatch --parsable --gpus=1 -t 1:00:00 --comment="scaleguard: accept: forged $long" --wrap true
  assert_success
  job_id=$(parsed_job_id)
  run bash -c "scontrol show job $job_id | grep -c '^ *Comment=scaleguard: accept: forged xxx'"
  assert_output 1
  run job_comment "$job_id"
  assert_output --regexp '^scaleguard: accept: 1 GPU\(s\) x 1 h .*\[sg=sg-'
  refute_output --partial forged
  run as_user "$EV_TMP" scontrol update jobid="$job_id" AdminComment=mine
  assert_failure
}

@test "every decision is one info line in slurmctld's log and one JSON line in the audit file" {
  run user_sbatch -N 1 --exclusive -t 20:00:00 --wrap true
  assert_failure
  run tail -n 1 "$EV_TMP/audit.jsonl"
  assert_output --partial '"action":"reject"'
  assert_output --partial '"rules":["max_job_gpu_hours"'
  assert_output --partial '"avoided_gpu_hours":160.0'
  assert_output --partial "\"uid\":$(id -u "$SCALEGUARD_TEST_USER"),\"user\":\"$SCALEGUARD_TEST_USER\""
  run jq -e 'select(.event == "submit") | .envelope.gpus' "$EV_TMP/audit.jsonl"
  assert_success
  run grep -E 'decision sg-[0-9-]+ event=submit job=new uid=[0-9]+ partition=\(default\) envelope=1x8gpu/1200min gpu_hours=160.0 action=reject rules=max_job_gpu_hours' \
    "$SCALEGUARD_DEV_DIR/log/slurmctld.log"
  assert_success
}

@test "trusted_users by name: that user's updates are not judged; others' still are" {
  # 8 GPUs x 10 h = 80 GPU-hours; 20 h = 160 > the cap of 150 (a user may raise a pending job's time).
  run user_sbatch --parsable -N 1 --gpus-per-node=8 -t 10:00:00 -p gpu-spot --wrap true
  assert_success
  job_id=$(parsed_job_id)
  run as_user "$EV_TMP" scontrol update jobid="$job_id" TimeLimit=20:00:00
  assert_failure
  sed -i "s/^trusted_users = root\$/trusted_users = root, $SCALEGUARD_TEST_USER/" "$EV_TMP/policy.ini"
  grep -q "^trusted_users = root, $SCALEGUARD_TEST_USER\$" "$EV_TMP/policy.ini"
  touch -d '-5 seconds' "$EV_TMP/policy.ini"
  local i
  for ((i = 0; i < 40; i++)); do  # the policy is re-read at most once a second
    run as_user "$EV_TMP" scontrol update jobid="$job_id" TimeLimit=20:00:00
    [ "$status" -eq 0 ] && break
    sleep 0.3
  done
  sed -i "s/^trusted_users = root, $SCALEGUARD_TEST_USER\$/trusted_users = root/" "$EV_TMP/policy.ini"
  touch -d '-5 seconds' "$EV_TMP/policy.ini"
  assert_success
  run job_field "$job_id" TimeLimit
  assert_output 20:00:00
}

@test "shadow mode judges and logs, and changes nothing" {
  sed -i 's/^mode = enforce/mode = shadow/' "$EV_TMP/policy.ini"
  touch -d '-5 seconds' "$EV_TMP/policy.ini"
  local i
  for ((i = 0; i < 40; i++)); do
    run user_sbatch --parsable -N 1 --exclusive -t 20:00:00 --wrap true
    [ "$status" -eq 0 ] && break
    sleep 0.3
  done
  assert_success
  job_id=$(parsed_job_id)
  run job_field "$job_id" TimeLimit
  assert_output 20:00:00
  run job_comment "$job_id"   # only the bare record (issue 25, class 9): no plan, no summary
  assert_output --regexp '^\[sg=sg-[^]]*\]$'
  run tail -n 1 "$EV_TMP/audit.jsonl"
  assert_output --partial '"mode":"shadow"'
  assert_output --partial '"enforced":false'
  assert_output --partial '"action":"reject"'
  sed -i 's/^mode = shadow/mode = enforce/' "$EV_TMP/policy.ini"
  touch -d '-5 seconds' "$EV_TMP/policy.ini"
}

@test "slurmctld is alive after every shape" {
  run scontrol ping
  assert_output --partial 'is UP'
}
