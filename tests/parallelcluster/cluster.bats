#!/usr/bin/env bats
# A live cluster from the ParallelCluster-shaped layout (pc.bash): install.sh --role head and
# --role compute (no scaleguard-run: the compute role warns and goes on), then
# scripts/dev-cluster/up runs slurmctld and two slurmd (gpu-od-st-p4d-1, gpu-spot-st-p4d-1)
# from ParallelCluster's slurm.conf, its includes and the CustomSlurmSettings of
# configs/parallelcluster/cluster.yaml. The core scenarios: a job over the GPU-hour cap is
# refused with the reason, a training job is accepted with its plan in AdminComment, tasks get
# the SCALEGUARD_* environment from the SPANK plugin, a spot job is made requeueable and
# requeues.

load pc
load ../slurm/helpers

setup_file() {
  pc_layout
  # The shipped policy with a GPU-hour cap a test job can exceed (installed with --policy).
  sed 's/^max_job_gpu_hours = .*/max_job_gpu_hours = 500 reject/' \
    "$SCALEGUARD_SOURCE_DIR/configs/policy.ini" > "$PC_WORK/policy.ini"
  cp "$SCALEGUARD_SOURCE_DIR/configs/catalog.ini" "$PC_WORK/catalog.ini"
  pc_install head --policy "$PC_WORK/policy.ini" > "$PC_WORK/install-head.log" 2>&1 ||
    { cat "$PC_WORK/install-head.log" >&2; return 1; }
  pc_install compute > "$PC_WORK/install-compute.log" 2>&1 ||
    { cat "$PC_WORK/install-compute.log" >&2; return 1; }
  pc_cluster_env
  "$SCALEGUARD_SOURCE_DIR/scripts/dev-cluster/up" > "$PC_WORK/up.log" 2>&1 ||
    { cat "$PC_WORK/up.log" >&2; return 1; }
  export PC_TMP=$(user_dir)
}

teardown_file() {
  pc_cluster_env
  "$SCALEGUARD_SOURCE_DIR/scripts/dev-cluster/down" > /dev/null 2>&1 || true
  rm -rf "$PC_TMP"
}

setup() {
  pc_cluster_env
  cluster_env
  cd "$PC_TMP"
}

@test "the cluster runs ParallelCluster's configuration with both plugins" {
  run cat "$PC_WORK/install-compute.log"
  assert_output --regexp "WARNING: .*scaleguard-run not found"
  run scontrol show config
  assert_output --regexp "JobSubmitPlugins +\= scaleguard"
  assert_output --regexp "PrologFlags +\= Alloc"
  run sinfo -h -o '%P %N %T'
  assert_line "gpu-od* gpu-od-st-p4d-1 idle"
  assert_line "gpu-spot gpu-spot-st-p4d-1 idle"
  run sbatch --help
  assert_output --partial "--train-model"
}

@test "a job over the GPU-hour cap is refused with the reason" {
  run as_user "$PC_TMP" sbatch -p gpu-od --gpus=8 --time=3-0 --wrap true
  assert_failure
  assert_output --partial "max_job_gpu_hours"
  refute_output --partial "Submitted batch job"
}

@test "a training job is accepted; its plan is in AdminComment and in the batch step's environment" {
  run as_user "$PC_TMP" sbatch --parsable -p gpu-od -o "$PC_TMP/single.out" --gpus=1 --time=1-06:00:00 \
    --train-model=350M --train-tokens=1.2B \
    --wrap 'echo strategy=$SCALEGUARD_STRATEGY gpus=$SCALEGUARD_GPUS nodes=$SCALEGUARD_NODES'
  assert_success
  job_id=$(parsed_job_id)
  run job_comment "$job_id"
  assert_output --regexp '^scaleguard: (accept|warn).*single gpus=1 nodes=1'
  run wait_job "$job_id"
  assert_output COMPLETED
  run cat "$PC_TMP/single.out"
  assert_output 'strategy=single gpus=1 nodes=1'
}

@test "srun tasks get the SCALEGUARD_* environment from the SPANK plugin" {
  run as_user "$PC_TMP" srun -p gpu-od -n1 --gpus=1 --time=3:00:00 --train-model=350M \
    --train-single-gpu-hours=2 bash -c 'env | grep ^SCALEGUARD_ | sort'
  assert_success
  assert_line "SCALEGUARD_STRATEGY=single"
  assert_line "SCALEGUARD_GPUS=1"
  assert_line --regexp "^SCALEGUARD_NCCL_PROFILE=.+"
}

@test "a spot job is made requeueable with a warning signal, and requeues" {
  run as_user "$PC_TMP" sbatch --parsable -p gpu-spot --gpus=1 --time=1:00:00 -o /dev/null --wrap 'sleep 300'
  assert_success
  job_id=$(parsed_job_id)
  [ "$(job_field "$job_id" Requeue)" = 1 ] || fail "Requeue=$(job_field "$job_id" Requeue)"
  local i
  for ((i = 0; i < 100; i++)); do [ "$(job_field "$job_id" JobState)" = RUNNING ] && break; sleep 0.2; done
  [ "$(job_field "$job_id" JobState)" = RUNNING ] || fail "job $job_id not running: $(job_field "$job_id" JobState)"
  scontrol requeue "$job_id"
  for ((i = 0; i < 150; i++)); do [ "$(job_field "$job_id" Restarts)" = 1 ] && break; sleep 0.2; done
  [ "$(job_field "$job_id" Restarts)" = 1 ] || fail "job $job_id not requeued: $(scontrol show job "$job_id")"
  run job_comment "$job_id"
  assert_output --regexp '^scaleguard: '
  scancel "$job_id"
}
