#!/usr/bin/env bats
# The dev cluster itself (scripts/dev-cluster/up): ParallelCluster-like nodes and partitions,
# fake GPUs, jobs across both nodes, MPI across both nodes, a non-root user.

load helpers

setup_file() {
  cluster_env
  resume_nodes   # an earlier test file may have provoked a drain
  wait_no_running_jobs   # nor leave its jobs running: these tests expect idle nodes
  export CLUSTER_TMP=$(user_dir)
  mpicc -o "$CLUSTER_TMP/allreduce" "$BATS_TEST_DIRNAME/data/mpi_allreduce.c"
  chmod a+rx "$CLUSTER_TMP/allreduce"
}

teardown_file() {
  rm -rf "$CLUSTER_TMP"
}

setup() {
  cluster_env
}

@test "two idle p4d nodes with 8 fake A100s and EFA features" {
  run sinfo -h -N -p gpu-od -o '%N %T %G %f'
  assert_success
  assert_line 'gpu-st-p4d-1 idle gpu:a100:8 p4d.24xlarge,efa'
  assert_line 'gpu-st-p4d-2 idle gpu:a100:8 p4d.24xlarge,efa'
}

@test "partitions gpu-od (default) and gpu-spot span both nodes" {
  run sinfo -h -o '%P %D %N'
  assert_success
  assert_line 'gpu-od* 2 gpu-st-p4d-[1-2]'
  assert_line 'gpu-spot 2 gpu-st-p4d-[1-2]'
}

@test "slurmctld runs job_submit/scaleguard with the configured policy" {
  run scontrol show config
  assert_line --regexp '^JobSubmitPlugins +=.*scaleguard'
  run grep 'job_submit/scaleguard: policy ' "$SCALEGUARD_DEV_DIR/log/slurmctld.log"
  assert_success
}

@test "slurmctld with job_submit/scaleguard and prep/scaleguard exits 0 on SIGTERM (no abort, no core)" {
  # slurmctld exits without calling the plugins' fini(): anything the plugin's static
  # destructors stop (a joinable std::thread) aborts it at every shutdown. A foreground
  # slurmctld is this shell's child, so its exit status is seen.
  local pid i rc
  pid=$(cat "$SCALEGUARD_DEV_DIR/run/slurmctld.pid")
  kill -TERM "$pid"
  for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  slurmctld -D -f "$SLURM_CONF" >"$CLUSTER_TMP/slurmctld-fg.out" 2>&1 &
  local fg=$!
  for ((i = 0; i < 100; i++)); do scontrol ping 2>/dev/null | grep -q 'is UP' && break; sleep 0.1; done
  sleep 1.5   # the budget ledger thread's first pass (1 s)
  kill -TERM "$fg"
  rc=0
  wait "$fg" || rc=$?
  restart_slurmctld
  ((i < 100)) || fail "the foreground slurmctld did not answer: $(tail -n 5 "$CLUSTER_TMP/slurmctld-fg.out")"
  grep -q 'job_submit/scaleguard: policy ' "$CLUSTER_TMP/slurmctld-fg.out" "$SCALEGUARD_DEV_DIR/log/slurmctld.log" ||
    fail "the plugin was not loaded"
  [ "$rc" -eq 0 ] || fail "slurmctld exited $rc on SIGTERM (134: aborted)"
}

@test "slurmstepd's socket paths fit in 108 bytes for any job id, whatever the checkout path" {
  # <SlurmdSpoolDir>/<node>_<job id>.<step>: a batch step is 4294967291, job ids reach 7
  # digits. Under a long state directory the batch launch failed at job 100 and held the job.
  run scontrol show config
  spool=$(sed -n 's/^SlurmdSpoolDir *= *//p' <<<"$output")
  [ -n "$spool" ]
  for node in $(sinfo -h -N -o %N | sort -u); do
    path=${spool//%n/$node}/${node}_9999999.4294967291
    echo "$path (${#path} bytes)"
    [ "${#path}" -le 107 ]
    [ -d "${spool//%n/$node}" ]
  done
}

@test "a 2-node job gets GPUs on both nodes" {
  # 4 GPUs for 2 days: enough GPU-hours for the policy to allow several GPUs.
  run srun -N2 -n2 --gpus-per-node=2 --time=2-0 -l bash -c 'echo $SLURMD_NODENAME gpus=$CUDA_VISIBLE_DEVICES'
  assert_success
  assert_output --partial 'gpu-st-p4d-1 gpus=0,1'
  assert_output --partial 'gpu-st-p4d-2 gpus=0,1'
}

@test "MPI all-reduce across both fake nodes with srun --mpi=pmix" {
  run srun --mpi=pmix -N2 -n4 "$CLUSTER_TMP/allreduce"
  assert_success
  # Ranks 0..3 each contribute rank+1: every rank must see 10.
  assert_equal "$(grep -c 'sum=10 size=4' <<<"$output")" 4
}

@test "the non-root test user runs jobs on both nodes" {
  run as_user "$CLUSTER_TMP" srun -N2 -n2 -l id -un
  assert_success
  assert_line "0: $SCALEGUARD_TEST_USER"
  assert_line "1: $SCALEGUARD_TEST_USER"
}

@test "each node has its own Open MPI shared-memory directory" {
  run srun -N2 -n2 -l printenv OMPI_MCA_btl_vader_backing_directory
  assert_success
  assert_output --partial "$SCALEGUARD_DEV_DIR/shm/gpu-st-p4d-1"
  assert_output --partial "$SCALEGUARD_DEV_DIR/shm/gpu-st-p4d-2"
}

# The fake nodes share the host's cores: Open MPI must yield when idle, or waiting ranks
# starve computing ones (docs/calibration.md); a value the user set wins.
@test "tasks get OMPI_MCA_mpi_yield_when_idle=1 unless the user set it" {
  run srun -N2 -n2 -l printenv OMPI_MCA_mpi_yield_when_idle
  assert_success
  assert_line "0: 1"
  assert_line "1: 1"
  OMPI_MCA_mpi_yield_when_idle=0 run srun -N1 -n1 -l printenv OMPI_MCA_mpi_yield_when_idle
  assert_success
  assert_line "0: 0"
}

@test "sacct records the test user's job with its GPUs, for the user and for root" {
  grep -q '^AccountingStorageType=accounting_storage/slurmdbd' "$SLURM_CONF" ||
    skip "dev cluster brought up with SCALEGUARD_ACCOUNTING=0"
  run as_user "$CLUSTER_TMP" sbatch --parsable --gpus=1 --time=10 --wrap true
  assert_success
  id=$(parsed_job_id)
  assert_equal "$(wait_job "$id")" COMPLETED
  # slurmctld sends the end record to slurmdbd asynchronously: poll (bounded) until it lands.
  for ((i = 0; i < 100; i++)); do
    line=$(sacct -n -X -P -j "$id" --format=User,State,AllocTRES)
    [[ $line == *COMPLETED* ]] && break
    sleep 0.2
  done
  assert_equal "$line" "$SCALEGUARD_TEST_USER|COMPLETED|billing=1,cpu=1,gres/gpu=1,node=1"
  run as_user "$CLUSTER_TMP" sacct -n -X -P -j "$id" --format=JobID,User,State
  assert_success
  assert_output "$id|$SCALEGUARD_TEST_USER|COMPLETED"
}
