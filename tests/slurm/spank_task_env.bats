#!/usr/bin/env bats
# scaleguard SPANK plugin, compute side: every task gets rank and rendezvous variables, the
# plan, and the NCCL/EFA profile of its own node (gpu-st-p4d-1 sees the fake EFA tree in
# tests/slurm/data/sysfs/, gpu-st-p4d-2 none); a variable the user set is never changed.
load helpers

setup_file() { cluster_env; }
# A node's NodeAddr as slurmctld reports it (127.0.0.1 on the loopback dev cluster: its node names do
# not resolve, so MASTER_ADDR must be this address).
node_addr() { scontrol show node "$1" | tr ' ' '\n' | sed -n 's/^NodeAddr=//p'; }
setup() {
  cluster_env
  work=$(user_dir)
  efa_lib=$SCALEGUARD_SOURCE_DIR/tests/slurm/data/sysfs/gpu-st-p4d-1/opt/amazon/ofi-nccl/lib
}
teardown() {
  [ -z "${plan_job:-}" ] || scancel "$plan_job"   # a job a failed check left waiting
  rm -rf "$work"
}

# Prints "PROCID NAME=VALUE ..." for the named variables, one task per line, sorted.
show='for v in RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT SLURMD_NODENAME \
  FI_PROVIDER FI_EFA_USE_DEVICE_RDMA FI_EFA_FORK_SAFE NCCL_NET NCCL_IB_DISABLE NCCL_BUFFSIZE \
  NCCL_P2P_NET_CHUNKSIZE NCCL_SOCKET_IFNAME NCCL_TUNER_PLUGIN LD_LIBRARY_PATH SCALEGUARD_NCCL_PROFILE \
  SCALEGUARD_EFA_DEVICES SCALEGUARD_INSTANCE_TYPE SCALEGUARD_OFI_NCCL_VERSION SCALEGUARD_STRATEGY SCALEGUARD_TP; do
  printf "%s %s=%s\n" "$SLURM_PROCID" "$v" "${!v-unset}"; done'

@test "srun over two nodes: ranks, world size, first node and job-derived port" {
  run srun -N2 --ntasks-per-node=2 bash -c "$show"
  assert_success
  local job port
  job=$(sed -n 's/.*MASTER_PORT=//p' <<<"$output" | head -n1)
  for t in 0 1 2 3; do
    assert_line "$t RANK=$t"
    assert_line "$t LOCAL_RANK=$((t % 2))"
    assert_line "$t WORLD_SIZE=4"
    assert_line "$t LOCAL_WORLD_SIZE=2"
    assert_line "$t MASTER_ADDR=$(node_addr gpu-st-p4d-1)"
    assert_line "$t MASTER_PORT=$job"
  done
  (( job >= 20000 && job < 30000 ))
}

@test "MASTER_ADDR:MASTER_PORT reaches rank 0 from the other node" {
  run srun -N2 -n2 --time=5 python3 "$SCALEGUARD_SOURCE_DIR/tests/slurm/data/rendezvous.py"
  assert_success
  assert_line "rank 0 got: rank 1 on gpu-st-p4d-2"
}

@test "the job prolog saves the job's nodes' addresses once per node (no slurmctld query per task)" {
  # Both slurmd of the dev cluster run the prolog at once into one plan_dir: repeat, so a
  # race between them (a shared temporary file) fails here rather than draining a node.
  # (The tasks run as root here: the file is root's, mode 600.)
  for i in 1 2 3 4 5; do
    run srun -N2 -n2 bash -c 'cat "$SCALEGUARD_DEV_DIR/plans/$SLURM_JOB_ID.addr"'
    assert_success
    assert_equal "$(grep -c "^gpu-st-p4d-1 $(node_addr gpu-st-p4d-1)\$" <<<"$output")" 2
    assert_equal "$(grep -c "^gpu-st-p4d-2 $(node_addr gpu-st-p4d-2)\$" <<<"$output")" 2
  done
  run sinfo -h -N -t drain,drng,down -o '%N %E'
  assert_output ""
}

@test "a step on a subset of the job's nodes gets its own first node's address" {
  run timeout "$SBATCH_WAIT_S" sbatch --wait -N2 -o "$work/out" --wrap 'srun -N1 -n1 -w gpu-st-p4d-2 printenv MASTER_ADDR'
  assert_success
  run cat "$work/out"
  assert_output "$(node_addr gpu-st-p4d-2)"
}

# Node-information requests slurmctld has served (sdiag counts RPCs per message type; the old
# prolog's slurm_load_node_single was one REQUEST_NODE_INFO_SINGLE per node and job).
node_info_rpcs() {
  sdiag | grep -E '^\s*REQUEST_NODE_INFO(_SINGLE)?\s' | grep -oE 'count:[0-9]+' | cut -d: -f2 |
    awk '{ n += $1 } END { print n + 0 }'
}

@test "MASTER_ADDR needs no slurmctld RPC: node-info requests do not grow across multi-node jobs" {
  local before after
  before=$(node_info_rpcs)
  # Nothing between the two counts may ask for nodes itself (sinfo, scontrol show node).
  run as_user "$work" srun -N2 -n2 printenv MASTER_ADDR
  assert_success
  local srun_output=$output
  run as_user "$work" timeout "$SBATCH_WAIT_S" sbatch --wait -N2 -o "$work/out" \
    --wrap 'srun -N2 -n2 printenv MASTER_ADDR; srun -N1 -n1 -w gpu-st-p4d-2 printenv MASTER_ADDR'
  assert_success
  after=$(node_info_rpcs)
  assert_equal "$after" "$before"
  # ... and the addresses are still the nodes' NodeAddr.
  output=$srun_output
  assert_equal "$(grep -c "^$(node_addr gpu-st-p4d-1)\$" <<<"$output")" 2
  run cat "$work/out"
  assert_output "$(printf '%s\n' "$(node_addr gpu-st-p4d-1)" "$(node_addr gpu-st-p4d-1)" "$(node_addr gpu-st-p4d-2)")"
}

@test "MASTER_PORT is 20000 + job id mod 10000" {
  run timeout "$SBATCH_WAIT_S" sbatch --wait -o "$work/out" --wrap 'echo "$SLURM_JOB_ID $MASTER_PORT"'
  assert_success
  read -r id port < "$work/out"
  [ "$port" = "$((20000 + id % 10000))" ]
}

@test "NCCL/EFA profile per node: EFA tree on gpu-st-p4d-1, TCP on gpu-st-p4d-2" {
  run srun -N2 -n2 bash -c "$show"
  assert_success
  assert_line "0 SLURMD_NODENAME=gpu-st-p4d-1"
  assert_line "0 SCALEGUARD_NCCL_PROFILE=efa-v2"
  assert_line "0 SCALEGUARD_EFA_DEVICES=2"
  assert_line "0 SCALEGUARD_INSTANCE_TYPE=p4d.24xlarge"
  # libnccl-net-ofi.so: aws-ofi-nccl >= 1.15.0, which needs none of the legacy variables and
  # sets its own tuner; NCCL must use the plugin or fail; p4d gets the plugin's buffer sizes.
  assert_line "0 SCALEGUARD_OFI_NCCL_VERSION=>=1.15.0"
  assert_line "0 NCCL_NET=AWS Libfabric"
  assert_line "0 FI_PROVIDER=unset"
  assert_line "0 FI_EFA_USE_DEVICE_RDMA=unset"
  assert_line "0 FI_EFA_FORK_SAFE=unset"
  assert_line "0 NCCL_BUFFSIZE=8388608"
  assert_line "0 NCCL_P2P_NET_CHUNKSIZE=524288"
  assert_line "0 NCCL_TUNER_PLUGIN=unset"
  assert_line "0 LD_LIBRARY_PATH=$efa_lib"
  assert_line "1 SLURMD_NODENAME=gpu-st-p4d-2"
  assert_line "1 SCALEGUARD_NCCL_PROFILE=tcp-v1"
  assert_line "1 SCALEGUARD_EFA_DEVICES=0"
  assert_line "1 NCCL_IB_DISABLE=1"
  assert_line "1 FI_PROVIDER=unset"
  assert_line "1 NCCL_NET=unset"
  assert_line "1 NCCL_TUNER_PLUGIN=unset"
  assert_line "1 SCALEGUARD_INSTANCE_TYPE=unset"
}

@test "values the user set are kept; LD_LIBRARY_PATH is prepended to" {
  NCCL_NET=Socket NCCL_BUFFSIZE=4096 NCCL_SOCKET_IFNAME=eth9 RANK=42 LD_LIBRARY_PATH=/opt/mine \
    run srun -w gpu-st-p4d-1 -n1 bash -c "$show"
  assert_success
  assert_line "0 NCCL_NET=Socket"
  assert_line "0 NCCL_BUFFSIZE=4096"
  assert_line "0 NCCL_SOCKET_IFNAME=eth9"
  assert_line "0 RANK=42"
  assert_line "0 LD_LIBRARY_PATH=$efa_lib:/opt/mine"
  assert_line "0 NCCL_P2P_NET_CHUNKSIZE=524288"   # not set by the user: the profile's value
}

@test "batch job: the script is one process; its srun step gets per-task and per-node values" {
  cat > "$work/job.sh" <<EOS
#!/bin/bash
$show
export NCCL_BUFFSIZE=1234
srun bash -c '$(sed "s/'/'\\\\''/g" <<<"$show")' | sed 's/^/step /'
EOS
  run timeout "$SBATCH_WAIT_S" sbatch --wait -N2 --ntasks-per-node=2 -o "$work/out" "$work/job.sh"
  assert_success
  run cat "$work/out"
  assert_line "0 RANK=0"
  assert_line "0 WORLD_SIZE=1"
  assert_line "0 LOCAL_WORLD_SIZE=1"
  assert_line "0 NCCL_NET=AWS Libfabric"
  for t in 0 1 2 3; do
    assert_line "step $t RANK=$t"
    assert_line "step $t WORLD_SIZE=4"
    assert_line "step $t NCCL_BUFFSIZE=1234"     # set by the script: the user's value
  done
  # Inherited from the script on node 1, recomputed on node 2.
  assert_line "step 2 NCCL_NET=unset"
  assert_line "step 2 SCALEGUARD_NCCL_PROFILE=tcp-v1"
  assert_line "step 0 NCCL_NET=AWS Libfabric"
}

needs_job_submit() {
  grep -q '^JobSubmitPlugins=scaleguard' "$SLURM_CONF" || skip "dev cluster runs without job_submit/scaleguard"
}

@test "plan files are root's, mode 600: neither the job's user nor another user reads them" {
  needs_job_submit
  local other=sgother plans=$SCALEGUARD_DEV_DIR/plans
  id "$other" >/dev/null 2>&1 || useradd --no-create-home --shell /bin/bash "$other"
  run as_user "$work" sbatch --parsable -w gpu-st-p4d-1 -o "$work/out" --gpus=1 --time=3:00:00 --train-model=350M \
    --train-single-gpu-hours=2 \
    --wrap "touch $work/started; for i in \$(seq 600); do [ -e $work/done ] && break; sleep 0.1; done; srun -n1 env"
  assert_success
  local id i
  id=$(parsed_job_id)
  plan_job=$id
  for ((i = 0; i < 300; i++)); do [ -e "$work/started" ] && break; sleep 0.1; done
  [ -e "$work/started" ]
  run stat -c '%U %G %a %n' "$plans/$id" "$plans/$id.addr"
  assert_line --index 0 "root root 600 $plans/$id"
  assert_line --index 1 "root root 600 $plans/$id.addr"
  for u in "$SCALEGUARD_TEST_USER" "$other"; do
    runuser -u "$u" -- test -x "$plans"   # the directory is open to them: the files' mode refuses
    run runuser -u "$u" -- cat "$plans/$id" "$plans/$id.addr"
    assert_failure
    assert_output --partial "Permission denied"
    refute_output --partial "SCALEGUARD_"
  done
  touch "$work/done"   # (the job gives up waiting after 60 s when a check above failed)
  run wait_job "$id"
  assert_output COMPLETED
  # The tasks still get the plan and the address: read as root before Slurm drops privileges.
  run cat "$work/out"
  assert_line "SCALEGUARD_STRATEGY=single"
  assert_line "MASTER_ADDR=$(node_addr gpu-st-p4d-1)"
}

@test "a batch job accepted by job_submit/scaleguard carries its plan into the tasks" {
  needs_job_submit
  run timeout "$SBATCH_WAIT_S" sbatch --wait -o "$work/out" --gpus=1 --time=3:00:00 --train-model=350M \
    --train-single-gpu-hours=2 --wrap 'srun -n1 env'
  assert_success
  run cat "$work/out"
  assert_line "SCALEGUARD_STRATEGY=single"
  assert_line "SCALEGUARD_GPUS=1"
}

@test "an srun job gets the plan through the job prolog (PrologFlags=Alloc); user's values win" {
  needs_job_submit
  grep -qi '^PrologFlags=.*alloc' "$SLURM_CONF" ||
    skip "slurm.conf lacks PrologFlags=Alloc: srun jobs' prologs never see the controller's spank env"
  SCALEGUARD_GPUS=5 run srun -n1 --gpus=1 --time=3:00:00 --train-model=350M --train-single-gpu-hours=2 \
    bash -c 'echo "STRATEGY=$SCALEGUARD_STRATEGY GPUS=$SCALEGUARD_GPUS"; ls "$SCALEGUARD_DEV_DIR/plans"'
  assert_success
  assert_line "STRATEGY=single GPUS=5"
  # The epilog removes the job's plan file.
  local i
  for ((i = 0; i < 50; i++)); do [ -z "$(ls "$SCALEGUARD_DEV_DIR/plans")" ] && break; sleep 0.2; done
  [ -z "$(ls "$SCALEGUARD_DEV_DIR/plans")" ]
}
