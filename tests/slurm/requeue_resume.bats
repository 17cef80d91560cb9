#!/usr/bin/env bats
# Preemption on the live dev cluster (issue 5's must-show): scripts/sbatch/train.sbatch runs
# scaleguard-run on both nodes (srun --mpi=pmix); USR1 reaches the batch shell as Slurm's
# --signal=B:USR1@N would send it; the shell forwards it, every rank saves a checkpoint and
# exits 85, the script requeues the job, and the second run resumes from the checkpoint and
# ends with the same params_checksum as an uninterrupted run of the same training.

load helpers

# Small and quick per step, but enough steps that the signal lands mid-training.
train=(--data tokens.bin --model gpt --n-embd 32 --n-layer 1 --seq-len 32 --global-batch 8
       --steps 300 --threads 1 --log-every 1 --seed 7
       --strategy ddp --dp 0 --tp 1 --pp 1 --zero 0 --micro-batch 0)

setup_file() {
  cluster_env
  resume_nodes
  export RQ_BIN=$SCALEGUARD_BUILD_DIR/runner/scaleguard-run
  [ -x "$RQ_BIN" ] || skip "scaleguard-run not built in $SCALEGUARD_BUILD_DIR"
  [[ $("$RQ_BIN" train --help) == *--ckpt-dir* ]] || skip "scaleguard-run has no --ckpt-dir yet"
  export RQ_TMP=$(user_dir)
  cd "$RQ_TMP"
  export RQ_SINCE=$(date +%Y-%m-%dT%H:%M:%S)
  "$RQ_BIN" prep --input /usr/share/games/fortunes/fortunes --output tokens.bin
  # train.sbatch takes a config file: an empty one, the options come on its command line.
  : > empty.ini
  # The uninterrupted reference, on the same two nodes.
  srun --mpi=pmix -N2 -n2 --time=10 "$RQ_BIN" train "${train[@]}" --metrics ref.jsonl \
    > ref.out 2>&1 || { cat ref.out >&2; return 1; }
}

teardown_file() {
  scancel --quiet --name=sg-rq 2>/dev/null || true
  rm -rf "$RQ_TMP"
}

setup() {
  cluster_env
  cd "$RQ_TMP"
}

# True when slurmctld stores jobs in slurmdbd (scripts/dev-cluster/accounting).
accounting_on() {
  [[ $(scontrol show config) =~ AccountingStorageType\ +=\ accounting_storage/slurmdbd ]]
}

final_checksum() {  # final_checksum METRICS.jsonl
  grep '"final":true' "$1" | tail -n 1 | jq -r .params_checksum
}

@test "USR1 to the batch shell: checkpoint, exit 85, requeue, resume, same final checksum" {
  local ref i
  ref=$(final_checksum ref.jsonl)
  [[ $ref =~ ^[0-9a-f]+$ ]] || fail "no params_checksum in the reference run: $(cat ref.out)"

  # A spot job (the policy turns on requeue and the warning signal there), one rank per node.
  run sbatch --parsable -J sg-rq -p gpu-spot -N2 --ntasks-per-node=1 --gpus-per-node=1 \
    -o "$RQ_TMP/job.out" "$SCALEGUARD_SOURCE_DIR/scripts/sbatch/train.sbatch" empty.ini \
    "$RQ_TMP/ckpt" "${train[@]}" --ckpt-every 100 --metrics "$RQ_TMP/job.jsonl"
  assert_success
  job_id=$(parsed_job_id)
  [ -n "$job_id" ] || fail "no job id: $output"
  echo "$job_id" > job.id

  # Signal once training runs (rank 0 has logged a step): the ranks' handlers are installed.
  for ((i = 0; i < 1500; i++)); do
    [ -s job.jsonl ] && break
    [ "$(squeue -h -j "$job_id" -o %T)" = "" ] && break
    sleep 0.2
  done
  [ -s job.jsonl ] || fail "training never logged a step: $(cat job.out)"
  run scancel --signal=USR1 --batch "$job_id"
  assert_success

  # The script requeues the job; start it without Slurm's requeue delay.
  run start_requeued "$job_id"
  assert_success
  run wait_job "$job_id" 300
  assert_output COMPLETED

  run cat job.out
  assert_output --partial 'got SIGUSR1, forwarding to the training step'
  assert_output --partial "checkpoint written, requeueing job $job_id"
  assert_output --regexp "job $job_id run 2 on"
  assert_output --regexp 'resumed from step-0*[1-9][0-9]*'
  # The stop happened mid-training: the saved step is before the last one.
  local resumed
  resumed=$(grep -o 'resumed from step-[0-9]*' job.out | head -n 1 | sed 's/.*step-0*//')
  [ "$resumed" -lt 300 ] || fail "resumed at step $resumed: the signal came after training ended"
  run job_field "$job_id" Restarts
  assert_output 1

  run final_checksum job.jsonl
  assert_output "$ref"
}

@test "the report counts the run stopped after its checkpoint as interrupted, not wasted" {
  accounting_on || skip "the dev cluster has no accounting (slurmdbd)"
  [ -s job.id ] || skip "the requeue test did not submit a job"
  local id i states
  id=$(cat job.id)
  # Records reach slurmdbd asynchronously: wait for both runs.
  for ((i = 0; i < 300; i++)); do
    states=$(sacct -n -X -D -P -j "$id" -o State | paste -sd,)
    [ "$states" = REQUEUED,COMPLETED ] && break
    sleep 0.2
  done
  assert_equal "$states" REQUEUED,COMPLETED
  # The first run's training step exited 85 (checkpoint written): sacct has it.
  run sacct -n -D -P -j "$id" -o JobID,ExitCode
  assert_line "$id.0|85:0"
  run scaleguard report --since "$RQ_SINCE" --until "$(date -d '+1 sec' +%Y-%m-%dT%H:%M:%S)" --json
  assert_success
  run jq -r --arg id "$id" '.jobs[] | select(.job_id == $id) | "\(.runs) \(.gpus) \(.wasted_gpu_hours) \(.gpu_hours > 0)"' <<<"$output"
  assert_output "2 2 0 true"
}
