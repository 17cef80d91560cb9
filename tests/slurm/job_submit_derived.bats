#!/usr/bin/env bats
# Issue 25, classes 1 to 4 and 10, as the non-root test user with max_job_gpu_hours = 150 reject:
# GPUs Slurm derives after job_submit (--ntasks-per-gpu), open node ranges in updates, GRES
# counts in Slurm's own grammar (gpu:a100=8, kb/kib/... suffixes, zero-count entries) and het
# job updates; the partition a reservation gives after job_submit. Each shape got past the cap before. Works on a copy of configs/ with an audit
# file; restores the cluster's policy afterwards.

load helpers

setup_file() {
  cluster_env
  resume_nodes
  export DV_TMP=$(user_dir)
  cp "$SCALEGUARD_SOURCE_DIR/configs/policy.ini" "$SCALEGUARD_SOURCE_DIR/configs/catalog.ini" "$DV_TMP/"
  sed -i -e 's/^max_job_gpu_hours *=.*/max_job_gpu_hours = 150 reject/' \
    -e "s|^# audit_file = .*|audit_file = $DV_TMP/audit.jsonl|" "$DV_TMP/policy.ini"
  export SETTINGS=$SCALEGUARD_DEV_DIR/etc/job_submit_scaleguard.conf
  cp "$SETTINGS" "$DV_TMP/settings.orig"
  sed -i "s|^policy=.*|policy=$DV_TMP/policy.ini|" "$SETTINGS"
  restart_slurmctld
  printf '#!/bin/sh\ntrue\n' > "$DV_TMP/job.sh"
  chmod 755 "$DV_TMP/job.sh"
}

teardown_file() {
  scancel --quiet --name=sg-dv 2>/dev/null || true
  sleep 1; scontrol delete reservation=sg-dv-spot 2>/dev/null || true
  cp "$DV_TMP/settings.orig" "$SETTINGS"
  restart_slurmctld
  rm -rf "$DV_TMP"
}

setup() {
  cluster_env
  cd "$DV_TMP"
}

# user_sbatch ARGS...: held submission as the test user (nothing starts), in gpu-spot (its
# distributed_min/single_gpu rules only warn, so the cap is what refuses).
user_sbatch() {
  as_user "$DV_TMP" sbatch -J sg-dv -H -p gpu-spot "$@"
}

capped() {
  assert_failure
  assert_output --partial 'max_job_gpu_hours'
  assert_output --partial 'Batch job submission failed: Access/permission denied'
}

# The GPUs Slurm allocated job $1 (JOB_GRES of `scontrol show job -d`): released, run, ended.
# Pending, a GPU count Slurm derives shows nowhere (TRES lacks gres/gpu without accounting).
slurm_gpus() {
  scontrol release "$1"
  wait_job "$1" 60 >/dev/null
  scontrol show job -d "$1" | tr -s ' ' '\n' | sed -n 's/^JOB_GRES=gpu:a100://p' | head -n 1
}

# update_open_nodes JOB MIN: an update with max_nodes = INFINITE, as `scontrol update
# NumNodes=MIN-` sends it from 23.02 on; 22.05's scontrol refuses "1-" itself, but any user
# can send the same message through libslurm (slurm_update_job), as this helper does.
update_open_nodes() {
  if slurm_at_least 23.02; then
    as_user "$DV_TMP" scontrol update jobid="$1" NumNodes="$2-"
    return
  fi
  if [ ! -x "$DV_TMP/open_nodes" ]; then
    printf '%s\n' '#include <stdio.h>' '#include <stdlib.h>' '#include <slurm/slurm.h>' \
      'int main(int c, char **v) { job_desc_msg_t d; slurm_init_job_desc_msg(&d);' \
      '  d.job_id = atoi(v[1]); d.min_nodes = atoi(v[2]); d.max_nodes = INFINITE;' \
      '  if (slurm_update_job(&d)) { slurm_perror("update"); return 1; } return 0; }' > "$DV_TMP/open_nodes.c"
    cc -o "$DV_TMP/open_nodes" "$DV_TMP/open_nodes.c" -lslurm
  fi
  as_user "$DV_TMP" "$DV_TMP/open_nodes" "$1" "$2"
}

@test "class 1: --ntasks-per-gpu without a GPU request is judged at the GPUs Slurm derives" {
  # -n 8 --ntasks-per-gpu=1: slurmctld creates gres/gpu:8 after job_submit; 8 x 20 h = 160.
  # Before: judged as no GPUs and accepted.
  run user_sbatch -n 8 --ntasks-per-gpu=1 -t 20:00:00 --wrap true
  capped
  # Without -n, Slurm sets ntasks = nodes x N: -N 2 --ntasks-per-gpu=4 derives 2 GPUs; 2 x 80 h.
  run user_sbatch -N 2 --ntasks-per-gpu=4 -t 80:00:00 --wrap true
  capped
  # 8 tasks / 2 per GPU = 4 GPUs x 20 h = 80: accepted, and Slurm indeed gives it 4 GPUs.
  run user_sbatch --parsable -n 8 --ntasks-per-gpu=2 -t 20:00:00 --wrap true
  assert_success
  job_id=$(parsed_job_id)
  run job_comment "$job_id"
  assert_output --regexp '\[sg=.*gj=4;.*tpg=2'
  run slurm_gpus "$job_id"
  assert_output 4
}

@test "class 1: a later NumTasks= re-derives the GPUs and is judged" {
  # 2 tasks, 1 per GPU: 2 GPUs x 20 h = 40. NumTasks=8 makes Slurm derive 8 GPUs: 160.
  run user_sbatch --parsable -n 2 --ntasks-per-gpu=1 -t 20:00:00 --wrap true
  assert_success
  job_id=$(parsed_job_id)
  run as_user "$DV_TMP" scontrol update jobid="$job_id" NumTasks=8
  assert_failure
  if slurm_at_least 23.02; then assert_output --partial '[max_job_gpu_hours]'; fi
  run job_field "$job_id" NumTasks
  assert_output 2
  # 6 tasks: 6 GPUs x 20 h = 120, within the cap. 23.11 and later derive 6 GPUs again; 22.05
  # keeps the 2 it derived at submission: at most what was judged either way.
  run as_user "$DV_TMP" scontrol update jobid="$job_id" NumTasks=6
  assert_success
  # Seen live 2026-12-05/06: 23.11.11 kept 2 as well; 25.11.7 holds the job as BadConstraints
  # after this update (it never starts; ReqTRES without gres/gpu, or gres/gpu=2 with accounting).
  # Either way Slurm never holds more than the 6 the plugin judged.
  scontrol release "$job_id"
  local i state reason
  for ((i = 0; i < 300; i++)); do
    state=$(job_field "$job_id" JobState) reason=$(job_field "$job_id" Reason)
    [ "$state" = COMPLETED ] || [ "$reason" = BadConstraints ] && break
    sleep 0.2
  done
  if [ "$reason" = BadConstraints ]; then
    # Never started; what it still asks for (ReqTRES shows gres/gpu only where accounting tracks
    # it: 25.11.7 with accounting keeps gres/gpu=2) is within what was judged.
    local held
    held=$(job_field "$job_id" ReqTRES | tr ',' '\n' | sed -n 's|^gres/gpu=||p' | head -n 1)
    [ "${held:-0}" -le 6 ] || fail "job $job_id holds gres/gpu=$held, more than the 6 judged"
  else
    assert_equal "$state" COMPLETED
    run bash -c "scontrol show job -d $job_id | tr -s ' ' '\\n' | sed -n 's/^JOB_GRES=gpu:a100://p' | head -n 1"
    assert_output --regexp '^[26]$'
  fi
}

@test "class 2: NumNodes=1- (an open range) is judged at the partition's nodes" {
  # 1 node x 8 GPUs x 10 h = 80; NumNodes=1- lets Slurm give both nodes: 160.
  # Before: max_nodes = INFINITE was read as unset and the update accepted.
  run user_sbatch --parsable -N 1 --gpus-per-node=8 -t 10:00:00 --wrap true
  assert_success
  job_id=$(parsed_job_id)
  run update_open_nodes "$job_id" 1
  # Refused by the plugin, or (23.11 scontrol, exit 0) already by the client; the node count
  # below is what shows no open range was granted.
  [ "$status" -ne 0 ] || [[ "$output" == *"less than minimum node count"* ]] || fail "open range accepted: $output"
  run job_field "$job_id" NumNodes
  assert_output --regexp '^1(-1)?$'
  # A job whose GPUs do not grow with its nodes (--gpus=2 in all) may take an open range.
  run user_sbatch --parsable --gpus=2 -t 10:00:00 --wrap true
  assert_success
  job_id=$(parsed_job_id)
  run update_open_nodes "$job_id" 1
  assert_success
}

@test "class 3: GRES counts as Slurm reads them: gpu:a100=8, multi-letter suffixes" {
  # gpu:a100=8 is 8 GPUs of type a100 per node: 2 x 8 x 10 h = 160 (before: one GPU of type 'a100=8').
  run user_sbatch -N 2 --gres=gpu:a100=8 -t 10:00:00 --wrap true
  capped
  run user_sbatch --parsable -N 1 --gres=gpu:a100=8 -t 10:00:00 --wrap true
  assert_success
  job_id=$(parsed_job_id)
  run job_comment "$job_id"
  assert_output --regexp '\[sg=.*gn=8;'
  # 23.11 and later run it with 8 GPUs; 22.05's slurmctld reads a type 'a100=8' that no node
  # has (the job never starts): judging 8 is the most either grants.
  if slurm_at_least 23.11; then
    run slurm_gpus "$job_id"
    assert_output 8
  fi
  # 1kb is 1,000 GPUs, 1KiB 1,024: all 16 GPUs of the partition x 10 h = 160 (before: one GPU
  # of type '1kb', accepted by the plugin and handed to Slurm).
  run user_sbatch --gpus=1kb -t 10:00:00 --wrap true
  capped
  run user_sbatch -N 2 --gpus-per-node=1KiB -t 10:00:00 --wrap true
  capped
}

@test "class 3: a zero-count typed entry does not hide a later entry's type" {
  # Slurm drops gpu:a100:0; the job asks for v100s, which gpu-spot does not have.
  # Before: judged as a100 (the zero entry's type) and handed to Slurm.
  run user_sbatch --gpus=a100:0 --gpus-per-node=v100:2 -t 1:00:00 --wrap true
  assert_failure
  assert_output --partial "not 'v100'"
}

@test "class 4: a het leader's TimeLimit update is judged on the sum of the components" {
  # 8 + 8 GPUs x 5 h = 80. TimeLimit=10:00:00 on the leader applies to both: 160 > 150,
  # although each component alone (80) is within the cap. Before: each judged alone, accepted.
  run user_sbatch --parsable --gpus=8 -t 5:00:00 : -p gpu-spot --gpus=8 -t 5:00:00 "$DV_TMP/job.sh"
  assert_success
  job_id=$(parsed_job_id)
  run job_comment "$job_id"
  assert_output --regexp '\[sg=.*;h=1'
  run as_user "$DV_TMP" scontrol update jobid="$job_id" TimeLimit=10:00:00
  assert_failure
  run job_field "$job_id" TimeLimit
  assert_output 05:00:00
  run job_field "$((job_id + 1))" TimeLimit
  assert_output 05:00:00
  # One component alone to 9 h: 40 + 72 = 112, accepted; then the leader to 9 h: 144, accepted.
  run as_user "$DV_TMP" scontrol update jobid="$job_id+1" TimeLimit=9:00:00
  assert_success
  run as_user "$DV_TMP" scontrol update jobid="$job_id" TimeLimit=9:00:00
  assert_success
  run job_field "$job_id" TimeLimit
  assert_output 09:00:00
  # Component 1 named by its own job id, to 10 h: 72 + 80 = 152, refused.
  run as_user "$DV_TMP" scontrol update jobid="$((job_id + 1))" TimeLimit=10:00:00
  assert_failure
  run job_field "$((job_id + 1))" TimeLimit
  assert_output 09:00:00
  assert_slurmctld_alive
}

@test "class 10: --reservation without -p is judged in every partition, not the default's alone" {
  # gpu-od (the default) allows 1000 GPU-hours, gpu-spot keeps the 150 cap. A reservation on
  # gpu-spot: Slurm puts a job without -p there after job_submit. Before, the plugin judged the
  # default partition only: 8 GPUs x 20 h = 160 was accepted and ran in gpu-spot over its cap.
  sed -i '/^\[partition gpu-od\]/a max_job_gpu_hours = 1000 reject' "$DV_TMP/policy.ini"
  restart_slurmctld
  run scontrol create reservation=sg-dv-spot StartTime=now Duration=120 Users=sguser \
    PartitionName=gpu-spot Nodes=ALL Flags=IGNORE_JOBS
  assert_success
  # 1 GPU x 2 h: accepted; Slurm takes gpu-spot, and the spot rules (requeue, USR1) hold.
  run as_user "$DV_TMP" sbatch -J sg-dv -H --parsable --reservation=sg-dv-spot --gpus=1 -t 2:00:00 --wrap true
  assert_success
  job_id=$(parsed_job_id)
  run job_field "$job_id" Partition
  assert_output gpu-spot
  run job_comment "$job_id"
  assert_output --partial ';rq=1;sig=300;p=gpu-od%2Cgpu-spot'
  # 160 GPU-hours: gpu-spot refuses, so the job is kept out of it (rewritten to gpu-od) or
  # refused; it never lands in gpu-spot.
  run as_user "$DV_TMP" sbatch -J sg-dv -H --parsable --reservation=sg-dv-spot --gpus=8 -t 20:00:00 --wrap true
  if [ "$status" -eq 0 ]; then
    job_id=$(parsed_job_id)
    run job_field "$job_id" Partition
    assert_output gpu-od
  else
    assert_output --partial '--reservation without --partition'
  fi
  sed -i '/^max_job_gpu_hours = 1000 reject$/d' "$DV_TMP/policy.ini"
  scancel --quiet --name=sg-dv
  for ((i = 0; i < 50; i++)); do scontrol delete reservation=sg-dv-spot 2>/dev/null && break; sleep 0.2; done
  restart_slurmctld
}

@test "class 10: a partition's Alternate= is judged too (Slurm sends the job there while it is drained)" {
  # gpu-od allows 1000 GPU-hours, its Alternate=gpu-spot keeps the 150 cap. Before, a job for
  # gpu-od was judged there only: 8 GPUs x 20 h = 160 was accepted, and while gpu-od is drained
  # slurmctld moves it to gpu-spot (job_mgr.c, _alt_part_test), over that partition's cap.
  local conf=$SCALEGUARD_DEV_DIR/etc/slurm.conf
  cp "$conf" "$DV_TMP/slurm.conf.orig"
  sed -i 's/^\(PartitionName=gpu-od .*\)$/\1 Alternate=gpu-spot/' "$conf"
  sed -i '/^\[partition gpu-od\]/a max_job_gpu_hours = 1000 reject' "$DV_TMP/policy.ini"
  restart_slurmctld
  run scontrol show partition gpu-od
  assert_output --partial 'Alternate=gpu-spot'
  run as_user "$DV_TMP" sbatch -J sg-dv -H --parsable -p gpu-od --gpus=8 -t 20:00:00 --wrap true
  local refused=$status out=$output
  # 1 GPU x 2 h: accepted in gpu-od, with gpu-spot's rules too (requeue and USR1).
  run as_user "$DV_TMP" sbatch -J sg-dv -H --parsable -p gpu-od --gpus=1 -t 2:00:00 --wrap true
  local small=$status small_out=$output small_comment='' small_part=''
  if [ "$small" -eq 0 ]; then
    small_comment=$(job_comment "$(parsed_job_id)") small_part=$(job_field "$(parsed_job_id)" Partition)
  fi
  # An update is judged with the alternates too: 8 GPUs x 13 h (104 GPU-hours), then 20 h (160:
  # within gpu-od's 1000, over gpu-spot's 150).
  run as_user "$DV_TMP" sbatch -J sg-dv -H --parsable -p gpu-od --gpus=8 -t 13:00:00 --wrap true
  local grow=$status grow_out=$output grown='' grow_id='' grow_limit=''
  if [ "$grow" -eq 0 ]; then
    grow_id=$(parsed_job_id)
    as_user "$DV_TMP" scontrol update jobid="$grow_id" TimeLimit=20:00:00 && grown=yes
    grow_limit=$(job_field "$grow_id" TimeLimit)
  fi
  cp "$DV_TMP/slurm.conf.orig" "$conf"
  sed -i '/^max_job_gpu_hours = 1000 reject$/d' "$DV_TMP/policy.ini"
  scancel --quiet --name=sg-dv
  restart_slurmctld
  resume_nodes
  [ "$refused" -ne 0 ] || { echo "accepted: $out"; false; }
  [[ $out == *'Alternate=gpu-spot'*'max_job_gpu_hours'* ]] || { echo "$out"; false; }
  [ "$small" -eq 0 ] || { echo "$small_out"; false; }
  assert_equal "$small_part" gpu-od
  # The record keeps the partition asked for; the alternates are looked up again at each update.
  [[ $small_comment == *';rq=1;sig=300;p=gpu-od]'* ]] || { echo "$small_comment"; false; }
  [ "$grow" -eq 0 ] || { echo "$grow_out"; false; }
  [ -z "$grown" ] || { echo "the update to 160 GPU-hours was accepted"; false; }
  assert_equal "$grow_limit" 13:00:00
}
