#!/usr/bin/env bats
# job_submit/scaleguard's policy lifecycle in slurmctld: a changed policy file takes effect
# without a restart (here: a rule switched to `rewrite`, which cuts a job's GPUs), a broken
# change is logged with file and line while the last good policy stays in force, and a broken
# policy at start (a key this plugin does not know) lets slurmctld start, failing closed for the
# partitions the file names. Works on a copy of configs/; restores the cluster.

load helpers

setup_file() {
  cluster_env
  resume_nodes   # an earlier test file may have provoked a drain
  export POL_TMP=$(user_dir)
  cp "$SCALEGUARD_SOURCE_DIR/configs/policy.ini" "$SCALEGUARD_SOURCE_DIR/configs/catalog.ini" "$POL_TMP/"
  export SETTINGS=$SCALEGUARD_DEV_DIR/etc/job_submit_scaleguard.conf
  cp "$SETTINGS" "$POL_TMP/settings.orig"
  sed -i "s|^policy=.*|policy=$POL_TMP/policy.ini|" "$SETTINGS"
  restart_slurmctld
}

teardown_file() {
  scancel --quiet --name=sg-pol 2>/dev/null || true
  cp "$POL_TMP/settings.orig" "$SETTINGS"
  restart_slurmctld
  rm -rf "$POL_TMP"
}

setup() {
  cluster_env
  cd "$POL_TMP"
}

# Submits (held) until the answer matches $1: the plugin looks at the file at most once a
# second, so a change shows within a few submissions. Bounded: 50 tries.
submit_until() {
  local pattern=$1 i; shift
  for ((i = 0; i < 50; i++)); do
    run sbatch -J sg-pol -H "$@" --wrap true
    [[ $output =~ $pattern ]] && return 0
    sleep 0.2
  done
  fail "no submission matched '$pattern'; last: $output"
}

@test "the copied policy refuses 8 GPUs for 1 hour" {
  run sbatch -J sg-pol -H --gpus=8 --wrap true
  assert_failure
  assert_output --partial 'distributed_min_gpu_hours'
}

@test "a changed policy takes effect without a restart: the job is cut to one GPU" {
  sed -i 's/^distributed_min_gpu_hours *=.*/distributed_min_gpu_hours = 100 rewrite/' "$POL_TMP/policy.ini"
  submit_until 'job rewritten' --parsable --gpus=8
  assert_success
  assert_output --regexp 'job rewritten \(GPUs=1'
  job_id=$(parsed_job_id)
  run job_field "$job_id" TresPerJob
  assert_output --regexp '^gres[:/]gpu:1$'
  run grep -F "reloaded policy $POL_TMP/policy.ini" "$SCALEGUARD_DEV_DIR/log/slurmctld.log"
  assert_success
}

@test "a broken change is logged with file and line; the last good policy stays" {
  echo 'distributed_min_gpu_hours = lots reject' >> "$POL_TMP/policy.ini"
  local line
  line=$(wc -l < "$POL_TMP/policy.ini")
  local log=$SCALEGUARD_DEV_DIR/log/slurmctld.log i
  for ((i = 0; i < 50; i++)); do
    run sbatch -J sg-pol -H --gpus=8 --wrap true
    grep -q "policy reload failed.*$POL_TMP/policy.ini:$line" "$log" && break
    sleep 0.2
  done
  run grep "policy reload failed, keeping the last good policy: $POL_TMP/policy.ini:$line" "$log"
  assert_success
  # Still the last good policy (rewrite), not the broken one and not the original.
  run sbatch -J sg-pol -H --gpus=8 --wrap true
  assert_success
  assert_output --regexp 'job rewritten \(GPUs=1'
}

@test "a policy edited in place is never read half-written; the finished file takes effect" {
  local log=$SCALEGUARD_DEV_DIR/log/slurmctld.log from i
  from=$(( $(wc -l < "$log") + 1 ))
  cp "$SCALEGUARD_SOURCE_DIR/configs/policy.ini" "$POL_TMP/full.ini"
  sed -i 's/^distributed_min_gpu_hours *=.*/distributed_min_gpu_hours = 100 warn/' "$POL_TMP/full.ini"
  # An editor half-way through writing the file (cut inside [rules]: a broken policy) while
  # jobs arrive: the plugin checks at most once a second and would have loaded it.
  # Jobs arrive for 0.8 s (well under the plugin's 2 s settle time), then the write completes.
  # After 1.1 s without submissions the first job in the window makes the plugin look.
  local t0
  sleep 1.1
  t0=$(date +%s%N)
  head -c 1800 "$POL_TMP/full.ini" > "$POL_TMP/policy.ini"
  while (( $(date +%s%N) - t0 < 800000000 )); do
    sbatch -J sg-pol -H --gpus=8 --wrap true >/dev/null 2>&1 || true
    sleep 0.1
  done
  cp "$POL_TMP/full.ini" "$POL_TMP/policy.ini"
  submit_until 'warning' --gpus=8
  run bash -c "tail -n +$from '$log' | grep -c 'policy reload failed'"
  assert_output 0
}

# Issue 40: a policy written for a newer plugin (a key this one does not know) never stops
# slurmctld nor leaves it refusing work silently.
@test "a key this plugin does not know: the reload keeps the last good policy; after a restart slurmctld runs and refuses only the file's partitions; the log names file:line and key" {
  local log=$SCALEGUARD_DEV_DIR/log/slurmctld.log from i
  # The last good policy: the original without [partition gpu-spot], which is then ungoverned.
  sed '/^\[partition gpu-spot\]/,/^\[partition gpu-h100\]/{/^\[partition gpu-h100\]/!d}' \
    "$SCALEGUARD_SOURCE_DIR/configs/policy.ini" > "$POL_TMP/good.ini"
  cp "$POL_TMP/good.ini" "$POL_TMP/policy.ini"
  submit_until 'submission failed' --gpus=8
  assert_output --partial 'distributed_min_gpu_hours'
  run scaleguard policy check "$POL_TMP/policy.ini" --plugin-version
  assert_success
  assert_output --regexp "installed plugin .*job_submit_scaleguard.so \(scaleguard [0-9.]+\): loads $POL_TMP/policy.ini"
  assert_output --regexp 'plugin running in slurmctld \(pid [0-9]+\): the installed file'
  # A newer release's key, on line 1.
  sed -i '1i future_knob = on' "$POL_TMP/policy.ini"
  run scaleguard policy check "$POL_TMP/policy.ini" --plugin-version
  assert_failure
  assert_output --partial "unknown key 'future_knob'"
  from=$(( $(wc -l < "$log") + 1 ))
  for ((i = 0; i < 50; i++)); do
    run sbatch -J sg-pol -H --gpus=8 --wrap true
    tail -n +"$from" "$log" | grep -q 'policy reload failed' && break
    sleep 0.2
  done
  run grep -F "policy reload failed, keeping the last good policy: $POL_TMP/policy.ini:1: future_knob: unknown key 'future_knob'" "$log"
  assert_success
  run sbatch -J sg-pol -H --gpus=8 --wrap true   # the last good policy still judges
  assert_failure
  assert_output --partial 'distributed_min_gpu_hours'
  # A restart with no good policy: slurmctld starts; the log names the key and what is refused.
  from=$(( $(wc -l < "$log") + 1 ))
  restart_slurmctld
  assert_slurmctld_alive
  run bash -c "tail -n +$from '$log'"
  assert_output --partial "cannot load the policy: $POL_TMP/policy.ini:1: future_knob: unknown key 'future_knob'"
  assert_output --partial 'NO POLICY IN FORCE: jobs in its partitions gpu-od, gpu-h100 are refused'
  refute_output --partial 'fatal'
  run sbatch -J sg-pol -H --gpus=1 --wrap true   # the default partition, gpu-od: governed
  assert_failure
  assert_output --partial "the site policy cannot be loaded ($POL_TMP/policy.ini:1: future_knob: unknown key 'future_knob'"
  run sbatch -J sg-pol -H -p gpu-spot --gpus=8 --wrap true   # not in the file: passes unjudged
  assert_success
  # Fixed: loaded again without a restart, and judged.
  cp "$POL_TMP/good.ini" "$POL_TMP/policy.ini"
  submit_until 'reject: .*distributed_min_gpu_hours' --gpus=8
  run grep -F "loaded (jobs are judged again) policy $POL_TMP/policy.ini" "$log"
  assert_success
}
