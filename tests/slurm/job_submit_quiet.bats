#!/usr/bin/env bats
# Issue 25, class 11: failures that were quiet. A policy file with a future mtime is loaded (and
# the log says so); a partition the policy names but Slurm lacks is logged; an audit file a user
# pre-created in a shared directory is not written (logged); --core-spec under
# AllowSpecResourcesUsage is read as the whole node it gets; a message a job_submit plugin before
# this one left for the user (job_submit/lua's slurm.user_msg) is kept, not overwritten (and
# leaked). Works on a copy of configs/ and of slurm.conf; restores both afterwards.

load helpers

setup_file() {
  cluster_env
  resume_nodes
  export QT_TMP=$(user_dir)
  chmod 755 "$QT_TMP"
  # A shared directory (1777) where the audit file will be: the user gets there first.
  export SHARED=$QT_TMP/shared
  mkdir -p "$SHARED"
  chmod 1777 "$SHARED"
  as_user "$QT_TMP" sh -c "umask 000; : > '$SHARED/audit.jsonl'"
  cp "$SCALEGUARD_SOURCE_DIR/configs/policy.ini" "$SCALEGUARD_SOURCE_DIR/configs/catalog.ini" "$QT_TMP/"
  sed -i -e 's/^max_job_gpu_hours *=.*/max_job_gpu_hours = 150 reject/' \
    -e "s|^# audit_file = .*|audit_file = $SHARED/audit.jsonl|" "$QT_TMP/policy.ini"
  export SETTINGS=$SCALEGUARD_DEV_DIR/etc/job_submit_scaleguard.conf
  export CONF=$SCALEGUARD_DEV_DIR/etc/slurm.conf
  cp "$SETTINGS" "$QT_TMP/settings.orig"
  cp "$CONF" "$QT_TMP/slurm.conf.orig"
  sed -i "s|^policy=.*|policy=$QT_TMP/policy.ini|" "$SETTINGS"
  echo 'AllowSpecResourcesUsage=yes' >> "$CONF"
  # job_submit/lua first, where this Slurm has it (Debian's 22.05; the release builds lack lua).
  if [ -f "$(sed -n 's/^PluginDir=//p' "$CONF" | cut -d: -f1)/job_submit_lua.so" ]; then
    cat > "$SCALEGUARD_DEV_DIR/etc/job_submit.lua" <<'EOF'
function slurm_job_submit(job_desc, part_list, submit_uid)
  slurm.user_msg("site note: lua ran first")
  return slurm.SUCCESS
end
function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end
EOF
    sed -i 's/^JobSubmitPlugins=scaleguard$/JobSubmitPlugins=lua,scaleguard/' "$CONF"
  fi
  restart_slurmctld
}

teardown_file() {
  scancel --quiet --name=sg-qt 2>/dev/null || true
  cp "$QT_TMP/settings.orig" "$SETTINGS"
  cp "$QT_TMP/slurm.conf.orig" "$CONF"
  rm -f "$SCALEGUARD_DEV_DIR/etc/job_submit.lua"
  restart_slurmctld
  rm -rf "$QT_TMP"
}

setup() {
  cluster_env
  cd "$QT_TMP"
}

user_sbatch() {
  as_user "$QT_TMP" sbatch -J sg-qt -H "$@"
}

log() { cat "$SCALEGUARD_DEV_DIR/log/slurmctld.log"; }

@test "class 11: an audit file a user pre-created is not written, and the log says so" {
  run user_sbatch --parsable --gpus=1 -t 60 --wrap true
  assert_success
  # Before: the decision was appended to the user's file (he could then edit it).
  [ ! -s "$SHARED/audit.jsonl" ]
  run log
  assert_output --partial "cannot append to audit file $SHARED/audit.jsonl: not a single-linked regular file owned by root or SlurmUser"
}

@test "class 11: --core-spec under AllowSpecResourcesUsage is judged as the whole node" {
  # 1 GPU x 20 h = 20 GPU-hours; but Slurm gives a --core-spec job its whole node (8 GPUs):
  # 160 GPU-hours > 150. Before: accepted as 1 GPU.
  run user_sbatch --gpus=1 --core-spec=1 -t 20:00:00 --wrap true
  assert_failure
  assert_output --partial 'max_job_gpu_hours'
  # Without --core-spec the same job is accepted (the test can tell).
  run user_sbatch --parsable --gpus=1 -t 20:00:00 --wrap true
  assert_success
}

@test "class 11: a message job_submit/lua left for the user is kept (not overwritten)" {
  grep -q '^JobSubmitPlugins=lua,scaleguard' "$CONF" || skip "no job_submit_lua.so in this Slurm's PluginDir"
  run user_sbatch --parsable --gpus=1 -t 60 --wrap true
  assert_success
  assert_output --partial 'site note: lua ran first'
  assert_output --partial 'scaleguard:'
  run user_sbatch --gpus=8 -t 3-00:00:00 --wrap true
  assert_failure
  assert_output --partial 'site note: lua ran first'
  assert_output --partial 'max_job_gpu_hours'
}

@test "class 11: a policy file with a future mtime is loaded, and the log says so" {
  sed -i 's/^max_job_gpu_hours *=.*/max_job_gpu_hours = 10 reject/' "$QT_TMP/policy.ini"
  touch -d '+1 hour' "$QT_TMP/policy.ini"
  # Before: never loaded (it "changed less than 2 s ago" for an hour), nothing logged.
  local i
  for ((i = 0; i < 20; i++)); do
    run user_sbatch --gpus=1 -t 20:00:00 --wrap true
    [ "$status" -ne 0 ] && break
    scancel --quiet --name=sg-qt
    sleep 1
  done
  assert_failure
  assert_output --partial 'max_job_gpu_hours'
  run log
  assert_output --regexp "policy $QT_TMP/policy.ini or its catalog has a modification time [0-9]+ s in the future"
  touch -d '-5 seconds' "$QT_TMP/policy.ini"
}

@test "class 11: a partition the policy names but Slurm lacks is logged" {
  printf '[partition gpu-typo]\ninstance = p4d.24xlarge\n' >> "$QT_TMP/policy.ini"
  touch -d '-5 seconds' "$QT_TMP/policy.ini"
  # Checked at the first submission after the reload (under the partition lock job_submit holds).
  local i
  for ((i = 0; i < 20; i++)); do
    user_sbatch --gpus=1 -t 60 --wrap true >/dev/null 2>&1 || true
    log | grep -q "names partition 'gpu-typo'" && break
    sleep 1
  done
  # Before: the reload was logged, the partition nowhere.
  run log
  assert_output --partial "reloaded policy $QT_TMP/policy.ini"
  assert_output --partial "policy $QT_TMP/policy.ini names partition 'gpu-typo', which Slurm does not have"
  refute_output --partial "names partition 'gpu-od'"
}
