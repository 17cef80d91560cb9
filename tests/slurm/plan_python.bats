#!/usr/bin/env bats
# A user's own PyTorch script under the plan (issue 26 item 6): the SPANK plugin writes the
# plan as JSON ($SCALEGUARD_PLAN_FILE, in <plan_dir>/<job>.user, the job's user's, 0700),
# exports torchelastic's and Accelerate's variables, and scripts/examples/plan_train.py
# builds DDP / ZeRO-1 / a pipeline from it with torch.distributed (gloo) over two nodes.
load helpers

setup_file() { cluster_env; }
setup() {
  cluster_env
  work=$(user_dir)
  chmod 755 "$work"
  plans=$SCALEGUARD_DEV_DIR/plans
  example=$SCALEGUARD_SOURCE_DIR/scripts/examples/plan_train.py
}
teardown() { rm -rf "$work"; }

needs_plan() {
  grep -q '^JobSubmitPlugins=scaleguard' "$SLURM_CONF" || skip "dev cluster runs without job_submit/scaleguard"
  /usr/bin/python3 -c 'import torch.distributed' 2>/dev/null || skip "python3-torch is not installed"
}

# A two-node job planned with strategy $1 (350M on 2 GPUs: the planner gives ddp dp=2,
# zero dp=2 ZeRO-1, pipeline pp=2), run as the test user; its output in $work/out.
planned_job() {
  local strategy=$1; shift
  run as_user "$work" timeout "$SBATCH_WAIT_S" sbatch --wait -N2 --ntasks-per-node=1 --gpus-per-node=1 \
    --time=3:00:00 --train-model=350M --train-strategy="$strategy" --train-single-gpu-hours=200 \
    -o "$work/out" --wrap "$*"
  # On failure bats shows what was printed: the job's own output says why it failed.
  [ "$status" -eq 0 ] || { echo "job output:"; cat "$work/out"; }
  assert_success
  run cat "$work/out"
}

@test "ddp plan: the example takes DDP over 2 nodes from the plan file and the replicas agree" {
  needs_plan
  planned_job ddp "srun /usr/bin/python3 $example --steps 3"
  assert_line --partial "plan ddp-tp1-pp1-dp2-zero0-mb2 from $plans/"
  assert_line --regexp "strategy=ddp pp=1 dp=2 tp=1 zero=0 mesh=ppxdpxtp micro_batch=2 accumulation=[0-9]+ bucket_mb=25 .*restart_count=0 torchelastic_run=[0-9]+"
  assert_line --regexp "^rank 0 on .*\(gpu-st-p4d-1\): pp_rank=0 dp_rank=0 tp_rank=0$"
  assert_line --regexp "^rank 1 on .*\(gpu-st-p4d-2\): pp_rank=0 dp_rank=1 tp_rank=0$"
  assert_line --regexp "^layout: DDP over dp=2, bucket_cap_mb=25, [0-9]+ micro-batches of 2 per step$"
  assert_line --regexp "^step 2 loss [0-9.]+ \(pp_rank 0\)$"
  assert_line "replicas agree: True"
}

@test "zero plan: ZeRO-1 over 2 nodes (FSDP where this torch has it)" {
  needs_plan
  planned_job zero "srun /usr/bin/python3 $example --steps 2"
  assert_line --regexp "strategy=zero pp=1 dp=2 tp=1 zero=1 "
  assert_line --regexp "^layout: (DDP \+ ZeroRedundancyOptimizer \(ZeRO-1\)|FSDP) over dp=2"
  assert_line --regexp "^step 1 loss [0-9.]+ \(pp_rank 0\)$"
}

@test "pipeline plan: two stages on two nodes, the last one computes the loss" {
  needs_plan
  planned_job pipeline "srun /usr/bin/python3 $example --steps 2"
  assert_line --regexp "strategy=pipeline pp=2 dp=1 tp=1 zero=0 "
  assert_line --regexp "^rank 1 on .*\(gpu-st-p4d-2\): pp_rank=1 dp_rank=0 tp_rank=0$"
  assert_line --regexp "^layout: pipeline \(GPipe\): 2 stages x [0-9]+ micro-batches of 2, gradients all-reduced over dp=1$"
  assert_line --regexp "^step 1 loss [0-9.]+ \(pp_rank 1\)$"
}

@test "the plan's variables for torchelastic/Lightning and Accelerate, per task" {
  needs_plan
  planned_job ddp 'srun bash -c '\''for v in TORCHELASTIC_RUN_ID TORCHELASTIC_RESTART_COUNT GROUP_RANK \
    ACCELERATE_USE_PARALLELISM_CONFIG PARALLELISM_CONFIG_DP_REPLICATE_SIZE PARALLELISM_CONFIG_DP_SHARD_SIZE \
    PARALLELISM_CONFIG_TP_SIZE PARALLELISM_CONFIG_CP_SIZE ACCELERATE_GRADIENT_ACCUMULATION_STEPS; do
    echo "$SLURM_PROCID $v=${!v-unset}"; done; echo "$SLURM_PROCID job=$SLURM_JOB_ID"'\'''
  local job
  job=$(sed -n 's/^0 job=//p' <<<"$output")
  for t in 0 1; do
    assert_line "$t TORCHELASTIC_RUN_ID=$job"
    assert_line "$t TORCHELASTIC_RESTART_COUNT=0"
    assert_line "$t GROUP_RANK=$t"
    assert_line "$t ACCELERATE_USE_PARALLELISM_CONFIG=true"
    assert_line "$t PARALLELISM_CONFIG_DP_REPLICATE_SIZE=2"
    assert_line "$t PARALLELISM_CONFIG_DP_SHARD_SIZE=1"
    assert_line "$t PARALLELISM_CONFIG_TP_SIZE=1"
    assert_line "$t PARALLELISM_CONFIG_CP_SIZE=1"
    assert_line --regexp "^$t ACCELERATE_GRADIENT_ACCUMULATION_STEPS=[1-9][0-9]*$"
  done
}

@test "the plan file is the job's user's, in a 0700 directory nobody else reads; a planted symlink is replaced, not followed; the epilog removes it" {
  needs_plan
  echo "victim" > "$work/victim"
  chown "$SCALEGUARD_TEST_USER" "$work/victim"
  # The batch script's step shows the file; the user then points plan.json at its own file;
  # the next step's tasks write the plan again: the link is replaced, the victim untouched.
  cat > "$work/job.sh" <<EOF
#!/bin/bash
echo "FILE=\$SCALEGUARD_PLAN_FILE"
stat -c "%U %a %F" "\$(dirname "\$SCALEGUARD_PLAN_FILE")" "\$SCALEGUARD_PLAN_FILE"
ln -sf "$work/victim" "\$SCALEGUARD_PLAN_FILE"
srun -N2 -n2 bash -c 'stat -c "%F" "\$SCALEGUARD_PLAN_FILE"; head -c 1 "\$SCALEGUARD_PLAN_FILE"; echo'
EOF
  chmod 755 "$work/job.sh"
  run as_user "$work" timeout "$SBATCH_WAIT_S" sbatch --wait -N2 --ntasks-per-node=1 --gpus-per-node=1 \
    --time=3:00:00 --train-model=350M --train-strategy=ddp --train-single-gpu-hours=200 -o "$work/out" "$work/job.sh"
  assert_success
  run cat "$work/out"
  assert_line "$SCALEGUARD_TEST_USER 700 directory"
  assert_line "$SCALEGUARD_TEST_USER 600 regular file"
  assert_line --regexp "^FILE=$plans/[0-9]+\.user/plan\.json$"
  assert_equal "$(grep -c '^regular file$' <<<"$output")" 2
  assert_equal "$(grep -c '^{$' <<<"$output")" 2
  run cat "$work/victim"
  assert_output "victim"
  # The epilog removed the directory (with the user's files in it).
  local i
  for ((i = 0; i < 50; i++)); do [ -z "$(ls "$plans")" ] && break; sleep 0.2; done
  run ls "$plans"
  assert_output ""
}

@test "another user cannot read a running job's plan file" {
  needs_plan
  local other=sgother
  id "$other" >/dev/null 2>&1 || useradd --no-create-home --shell /bin/bash "$other"
  run as_user "$work" sbatch --parsable -N2 --ntasks-per-node=1 --gpus-per-node=1 --time=3:00:00 \
    --train-model=350M --train-strategy=ddp --train-single-gpu-hours=200 -o "$work/out" \
    --wrap "srun -N1 -n1 printenv SCALEGUARD_PLAN_FILE > $work/path; for i in \$(seq 600); do [ -e $work/done ] && break; sleep 0.1; done"
  assert_success
  local id i
  id=$(tail -n1 <<<"$output" | cut -d';' -f1)
  for ((i = 0; i < 300; i++)); do [ -s "$work/path" ] && break; sleep 0.1; done
  local file
  file=$(cat "$work/path")
  run runuser -u "$other" -- cat "$file"
  local other_status=$status other_output=$output
  run runuser -u "$SCALEGUARD_TEST_USER" -- head -c 1 "$file"
  touch "$work/done"   # (the job gives up waiting after 60 s when a check above failed)
  assert_output "{"
  [ "$other_status" -ne 0 ]
  [[ $other_output == *"Permission denied"* ]]
  run wait_job "$id"
  assert_output COMPLETED
}
