#!/usr/bin/env bats
# job_submit/scaleguard on the live dev cluster: the decision matrix of real submissions
# (sbatch, srun, salloc, --test-only, a non-root user), with and without --train-* intent.
# Numbers in messages come from the planner and configs/policy.ini; these tests check the
# decision, the rule that made it and where the plan lands.

load helpers

setup_file() {
  cluster_env
  resume_nodes   # an earlier test file may have provoked a drain
  export JS_TMP=$(user_dir)
  # The warning-signal job (last test) takes ~30 s of slurmctld's time-limit passes: start it
  # now on one GPU of node 1 so the other tests run meanwhile.
  cat > "$JS_TMP/trap.sh" <<'SCRIPT'
#!/bin/bash
trap 'echo got-USR1; exit 0' USR1
for i in $(seq 110); do sleep 1; done
echo no-signal
SCRIPT
  sbatch -J sg-js -p gpu-spot -w gpu-st-p4d-1 --gpus=1 --time=2 -o "$JS_TMP/trap.out" \
    "$JS_TMP/trap.sh" > "$JS_TMP/trap.submit" 2>&1
}

teardown_file() {
  scancel --quiet --user=root --name=sg-js 2>/dev/null || true
  rm -rf "$JS_TMP"
}

setup() {
  cluster_env
  cd "$JS_TMP"
}

# The seed scenario: a 350M-parameter model, tokens chosen so one GPU needs about 11 hours.
intent=(--train-model=350M --train-tokens=1.2B)

@test "350M on 8 GPUs is refused with the single-GPU cost comparison" {
  require_spank
  run sbatch -J sg-js --gpus=8 "${intent[@]}" --wrap true
  assert_failure
  assert_output --partial 'distributed_min_gpu_hours'
  assert_output --regexp 'single GPU [0-9.]+ h for ~\$[0-9,]+ on spot .* vs 8 GPUs [0-9.]+ h for ~\$[0-9,]+ .*: use 1 GPU'
  assert_output --partial 'Batch job submission failed: Access/permission denied'
  refute_output --partial 'Submitted batch job'
}

@test "the same training on 1 GPU is accepted; the plan is in the comment and the job's environment" {
  require_spank
  run sbatch --parsable -J sg-js -o "$JS_TMP/single.out" --gpus=1 --time=12:00:00 "${intent[@]}" \
    --wrap 'echo strategy=$SCALEGUARD_STRATEGY gpus=$SCALEGUARD_GPUS nodes=$SCALEGUARD_NODES'
  assert_success
  assert_output --regexp 'scaleguard: accept'
  job_id=$(parsed_job_id)
  run job_comment "$job_id"
  assert_output --regexp '^scaleguard: accept.*single gpus=1 nodes=1'
  run wait_job "$job_id"
  assert_output COMPLETED
  run cat "$JS_TMP/single.out"
  assert_output 'strategy=single gpus=1 nodes=1'
}

@test "--train-eval-every/--train-eval-tokens: the evaluations count in the plan, and the record keeps them" {
  require_spank
  # The 12 h that cover the training alone do not cover it with an evaluation every 100 steps.
  run sbatch --parsable -J sg-js -H --gpus=1 --time=12:00:00 "${intent[@]}" --wrap true
  assert_success
  assert_output --regexp 'scaleguard: accept'
  scancel "$(parsed_job_id)"
  run sbatch --parsable -J sg-js -H --gpus=1 --time=12:00:00 "${intent[@]}" \
    --train-eval-every=100 --train-eval-tokens=20M --wrap true
  assert_success
  assert_output --partial 'scaleguard: warn [time_limit_fits]'
  job_id=$(parsed_job_id)
  # The record an update is judged against carries the cadence ('+' is stored as %2B).
  run job_comment "$job_id"
  assert_output --regexp '^scaleguard: warn \[time_limit_fits\]: single gpus=1 '
  assert_output --partial ';ev=100;evt=2e%2B07'
  scancel "$job_id"
  run sbatch -J sg-js -H --gpus=1 "${intent[@]}" --train-eval-every=100 --wrap true
  assert_failure
  assert_output --partial '--train-eval-every and --train-eval-tokens go together'
}

@test "a large model gets a multi-node plan in the comment, the batch script and every task" {
  require_spank
  # 7 GPUs per node: one GPU of node 1 runs the warning-signal job meanwhile.
  run sbatch --parsable -J sg-js -o "$JS_TMP/large.out" -N2 --gpus-per-node=7 --time=7-0 \
    --train-model=llama2-7b --train-tokens=300B \
    --wrap 'srun -N2 -n2 -l bash -c "echo \$SLURMD_NODENAME nodes=\$SCALEGUARD_NODES gpus=\$SCALEGUARD_GPUS strategy=\$SCALEGUARD_STRATEGY"'
  assert_success
  job_id=$(parsed_job_id)
  run job_comment "$job_id"
  assert_output --regexp 'gpus=14 nodes=2'
  run wait_job "$job_id"
  assert_output COMPLETED
  run cat "$JS_TMP/large.out"
  assert_output --regexp '0: gpu-st-p4d-1 nodes=2 gpus=14 strategy=[a-z]+'
  assert_output --regexp '1: gpu-st-p4d-2 nodes=2 gpus=14 strategy=[a-z]+'
}

@test "--train-spare-nodes: the plan is for the nodes less the spares, the job holds and is charged every node" {
  require_spank
  # 7 GPUs per node, as above: node 1 runs the warning-signal job meanwhile.
  run sbatch --parsable -J sg-js -o "$JS_TMP/spare.out" -N2 --gpus-per-node=7 --time=3-0 \
    --train-model=1B --train-tokens=10B --train-spare-nodes=1 \
    --wrap 'srun -N2 -n2 -l bash -c "echo \$SLURMD_NODENAME nodes=\$SCALEGUARD_NODES gpus=\$SCALEGUARD_GPUS spares=\$SCALEGUARD_SPARE_NODES"'
  assert_success
  # The message prices the spare node's idle share and the whole allocation.
  assert_output --regexp 'on 7 GPUs .* \+ 1 spare node \(7 GPUs\)'
  assert_output --regexp 'Spares: 1 node \(7 GPUs\) held idle .*: \+[0-9.,]+ GPU-hours, ~\$[0-9,]+ on-demand; the job holds 14 GPUs'
  job_id=$(parsed_job_id)
  run job_comment "$job_id"
  assert_output --regexp '[a-z]+ gpus=7 nodes=1 .* spares=1'
  assert_output --partial ';sp=1'
  run job_field "$job_id" NumNodes
  assert_output --regexp '^2'
  # Slurm holds both nodes' GPUs (what the ledger and budgets count): 7 on each of the 2 nodes
  # (TresPerNode reads gres:gpu:7 on 22.05, gres/gpu:7 on 23.11+, where TRES is ReqTRES).
  run job_field "$job_id" TresPerNode
  assert_output --regexp '^gres[:/]gpu:7$'
  run wait_job "$job_id"
  assert_output COMPLETED
  run cat "$JS_TMP/spare.out"
  assert_output --regexp '0: gpu-st-p4d-1 nodes=1 gpus=7 spares=1'
  assert_output --regexp '1: gpu-st-p4d-2 nodes=1 gpus=7 spares=1'
  # Spares that leave no node to train on are refused.
  run sbatch -J sg-js -H -N1 --gpus-per-node=7 --time=3-0 --train-model=1B --train-tokens=10B \
    --train-spare-nodes=1 --wrap true
  assert_failure
  assert_output --partial '1 spare node of a job of 1 node leaves none to train on'
}

@test "a raw request that must checkpoint is rewritten: requeue and USR1 before the limit" {
  run sbatch --parsable -J sg-js -H --gpus=8 --time=2-00:00:00 --no-requeue --wrap true
  assert_success
  assert_output --regexp 'job rewritten \(requeue, signal=B:USR1@[0-9]+\)'
  assert_output --partial 'checkpoint_required_gpu_hours'
  job_id=$(parsed_job_id)
  run job_field "$job_id" Requeue
  assert_output 1
  scancel "$job_id"
}

@test "jobs without --train-* options are judged on GPUs x time (--gpus, --gres, --gpus-per-node)" {
  run sbatch -J sg-js -H --gpus=8 --wrap true
  assert_failure
  assert_output --regexp '8 GPU\(s\) x 1 h = 8 GPU-hours'
  assert_output --partial 'distributed_min_gpu_hours'
  run sbatch -J sg-js -H --gres=gpu:a100:8 --wrap true
  assert_failure
  assert_output --partial 'distributed_min_gpu_hours'
  run sbatch -J sg-js -H -N2 --gpus-per-node=4 --wrap true
  assert_failure
  assert_output --partial 'distributed_min_gpu_hours'
  run sbatch --parsable -J sg-js -H --gpus=1 --time=4:00:00 --wrap true
  assert_success
  assert_output --partial 'scaleguard: accept'
  scancel "$(parsed_job_id)"
}

@test "srun: refused with the reason, accepted with the plan line" {
  run srun -J sg-js --gpus=8 true
  assert_failure
  assert_output --partial 'srun: error: scaleguard:'
  assert_output --partial 'distributed_min_gpu_hours'
  run srun -J sg-js --gpus=1 true
  assert_success
  assert_output --partial 'srun: scaleguard: accept'
}

@test "salloc: refused with the reason, accepted with the plan line" {
  run salloc -J sg-js --gpus=8 true
  assert_failure
  assert_output --partial 'salloc: error: scaleguard:'
  run salloc -J sg-js --gpus=1 true
  assert_success
  assert_output --partial 'salloc: scaleguard: accept'
}

@test "sbatch --test-only shows the decision and submits nothing" {
  before=$(squeue -h -t all | wc -l)
  run sbatch -J sg-js --test-only --gpus=8 --wrap true
  assert_failure
  assert_output --partial 'distributed_min_gpu_hours'
  run sbatch -J sg-js --test-only --gpus=1 --wrap true
  assert_success
  assert_output --partial 'sbatch: scaleguard: accept'
  assert_output --regexp 'to start at'
  assert_equal "$(squeue -h -t all | wc -l)" "$before"
}

@test "a non-root user's submissions are judged the same way" {
  run as_user "$JS_TMP" sbatch -J sg-js --gpus=8 --wrap true
  assert_failure
  assert_output --partial 'distributed_min_gpu_hours'
  run as_user "$JS_TMP" sbatch --parsable -J sg-js -o /dev/null --gpus=1 --wrap 'id -un'
  assert_success
  assert_output --partial 'scaleguard: accept'
  job_id=$(parsed_job_id)
  run job_field "$job_id" UserId
  assert_output --regexp "^$SCALEGUARD_TEST_USER\("
  run job_comment "$job_id"
  assert_output --regexp '^scaleguard: accept'
}

@test "scontrol update: a user's changed GPU request is judged again; root is trusted" {
  # With the checkpoint signal from the start: 2 GPUs for 3 days below are >= 100 GPU-hours,
  # which makes checkpointing due, and an update cannot add the signal (job_submit_envelope.bats).
  run as_user "$JS_TMP" sbatch --parsable -J sg-js -H --gpus=1 --requeue --signal=B:USR1@300 --wrap true
  assert_success
  job_id=$(parsed_job_id)
  run as_user "$JS_TMP" scontrol update jobid="$job_id" TresPerJob=gres:gpu:8
  assert_failure
  assert_output --partial 'Access/permission denied'
  # 23.02+ pass job_modify an err_msg that reaches the user (22.05 has none: the log only).
  if slurm_at_least 23.02; then
    assert_output --partial 'scaleguard: reject'
    assert_output --partial 'distributed_min_gpu_hours'
  fi
  run job_field "$job_id" TresPerJob
  assert_output --regexp '^gres[:/]gpu:1$'
  uid=$(id -u "$SCALEGUARD_TEST_USER")
  run grep "update of job $job_id by uid $uid refused: .*distributed_min_gpu_hours" "$SCALEGUARD_DEV_DIR/log/slurmctld.log"
  assert_success
  # Enough GPU-hours for two GPUs: allowed.
  run as_user "$JS_TMP" scontrol update jobid="$job_id" TresPerJob=gres:gpu:2 TimeLimit=3-0
  assert_success
  run job_field "$job_id" TresPerJob
  assert_output --regexp '^gres[:/]gpu:2$'
  # root (and SlurmUser, and the policy's trusted_users) change jobs unjudged.
  run scontrol update jobid="$job_id" TresPerJob=gres:gpu:8
  assert_success
  scancel "$job_id"
}

@test "the rewritten warning signal reaches the batch script (spot partition)" {
  # On spot capacity every job must checkpoint; with a 2-minute limit the USR1 that the
  # rewrite asked for (300 s before the end) is due at once: slurmctld sends it on its next
  # time-limit pass (every 30 s). Submitted in setup_file.
  run cat "$JS_TMP/trap.submit"
  assert_output --partial 'signal=B:USR1'
  job_id=$(grep -o 'Submitted batch job [0-9]*' "$JS_TMP/trap.submit" | grep -o '[0-9]*$')
  run wait_job "$job_id" 150
  assert_output COMPLETED
  run cat "$JS_TMP/trap.out"
  assert_output got-USR1
}
