#!/usr/bin/env bats
# The sbatch templates run as plain bash with srun/scontrol stand-ins: real signals reach the
# batch shell, which must forward them to the training step and requeue on exit code 85.

bats_load_library_path=/usr/lib/bats
load "$bats_load_library_path/bats-support/load"
load "$bats_load_library_path/bats-assert/load"

setup() {
  : "${SCALEGUARD_SOURCE_DIR:?}"
  bin=$BATS_TEST_TMPDIR/bin
  mkdir -p "$bin"
  log=$BATS_TEST_TMPDIR/log
  export SLURM_JOB_ID=4242 SLURM_JOB_NAME=train HOME=$BATS_TEST_TMPDIR
  unset SCALEGUARD_CKPT_DIR
  # scontrol stand-in: records what it was asked.
  printf '#!/bin/sh\necho "scontrol $*" >> "%s"\n' "$log" > "$bin/scontrol"
  chmod +x "$bin/scontrol"
  export PATH="$bin:$PATH"
}

# A failed test must not leave the stand-in's sleep behind (it would hold bats' output open).
teardown() {
  [ -f "$BATS_TEST_TMPDIR/sleeper.pid" ] && kill "$(cat "$BATS_TEST_TMPDIR/sleeper.pid")" 2>/dev/null
  return 0
}

# srun stand-in: records argv, says it is ready, then behaves like the runner: on USR1 or
# TERM it "checkpoints" and exits 85; without a signal it exits with $FAKE_RC.
fake_srun() {
  cat > "$bin/srun" <<EOF2
#!/bin/bash
echo "srun \$*" >> "$log"
[ -n "\${FAKE_RC:-}" ] && exit "\$FAKE_RC"
sleep 300 & sleeper=\$!
echo \$sleeper > "$BATS_TEST_TMPDIR/sleeper.pid"
trap 'echo "step got USR1" >> "$log"; kill \$sleeper; exit 85' USR1
trap 'echo "step got TERM" >> "$log"; kill \$sleeper; exit 85' TERM
touch "$BATS_TEST_TMPDIR/ready"
wait \$sleeper
EOF2
  chmod +x "$bin/srun"
}

# Starts train.sbatch in the background, waits until the step runs, sends SIGNAL, waits.
run_with_signal() {  # run_with_signal SIGNAL
  "$SCALEGUARD_SOURCE_DIR/scripts/sbatch/train.sbatch" cfg.ini /ckpt/x --steps=5 > "$BATS_TEST_TMPDIR/out" 2>&1 &
  local pid=$!
  while [ ! -e "$BATS_TEST_TMPDIR/ready" ]; do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -s "$1" "$pid"
  wait "$pid"
}

@test "train.sbatch forwards USR1 to the step and requeues when it checkpointed" {
  fake_srun
  run run_with_signal USR1
  assert_success
  run cat "$log"
  assert_line --index 0 "srun --mpi=pmix --kill-on-bad-exit=1 scaleguard-run train --config cfg.ini --ckpt-dir /ckpt/x --steps=5"
  assert_line "step got USR1"
  assert_line "scontrol requeue 4242"
  run cat "$BATS_TEST_TMPDIR/out"
  assert_output --partial "checkpoint written, requeueing job 4242"
}

@test "train.sbatch forwards TERM (preemption, scancel) the same way" {
  fake_srun
  run run_with_signal TERM
  assert_success
  run cat "$log"
  assert_line "step got TERM"
  assert_line "scontrol requeue 4242"
}

@test "train.sbatch passes the step's failure through and does not requeue" {
  fake_srun
  FAKE_RC=3 run "$SCALEGUARD_SOURCE_DIR/scripts/sbatch/train.sbatch" cfg.ini
  assert_failure 3
  assert_output --partial "training step exited with 3"
  run cat "$log"
  assert_line --index 0 "srun --mpi=pmix --kill-on-bad-exit=1 scaleguard-run train --config cfg.ini --ckpt-dir $BATS_TEST_TMPDIR/ckpt/train"
  refute_output --partial "requeue"
}

@test "train.sbatch restarts in-job on exit 86, then requeues, a bounded number of times" {
  fake_srun
  SLURM_RESTART_COUNT=2 FAKE_RC=86 run "$SCALEGUARD_SOURCE_DIR/scripts/sbatch/train.sbatch" cfg.ini
  assert_success
  assert_output --partial "in-job restart 3 of 3"
  refute_output --partial "in-job restart 4"
  assert_output --partial "(exit 86) after 3 in-job restarts, requeueing job 4242"
  run cat "$log"
  assert_equal "$(grep -c '^srun ' "$log")" 4
  assert_line "scontrol requeue 4242"
  rm "$log"
  SCALEGUARD_INJOB_RESTARTS=0 SLURM_RESTART_COUNT=0 FAKE_RC=87 run "$SCALEGUARD_SOURCE_DIR/scripts/sbatch/train.sbatch" cfg.ini
  assert_success
  refute_output --partial "in-job restart 1"
  assert_output --partial "(exit 87) after 0 in-job restarts, requeueing job 4242"
  rm "$log"
  SLURM_RESTART_COUNT=3 FAKE_RC=86 run "$SCALEGUARD_SOURCE_DIR/scripts/sbatch/train.sbatch" cfg.ini
  assert_failure 86
  assert_output --partial "not requeueing"
  run cat "$log"
  refute_output --partial "requeue"
}

@test "train.sbatch without a config is a usage error" {
  run "$SCALEGUARD_SOURCE_DIR/scripts/sbatch/train.sbatch"
  assert_failure
  assert_output --partial "usage: sbatch train.sbatch CONFIG.ini"
}

@test "sweep.sbatch gives each array task its own value" {
  printf '#!/bin/sh\necho "srun $*" >> "%s"\n' "$log" > "$bin/srun"
  chmod +x "$bin/srun"
  SLURM_ARRAY_JOB_ID=77 SLURM_ARRAY_TASK_ID=2 run "$SCALEGUARD_SOURCE_DIR/scripts/sbatch/sweep.sbatch" cfg.ini --lr 1e-4 3e-4 1e-3 3e-3
  assert_success
  run cat "$log"
  assert_output "srun scaleguard-run train --config cfg.ini --ckpt-dir $BATS_TEST_TMPDIR/ckpt/77_2 --lr 1e-3"
  SLURM_ARRAY_JOB_ID=77 SLURM_ARRAY_TASK_ID=4 run "$SCALEGUARD_SOURCE_DIR/scripts/sbatch/sweep.sbatch" cfg.ini --lr 1e-4 3e-4 1e-3 3e-3
  assert_failure 2
  assert_output --partial "task 4 has no value: 4 values given, use --array=0-3%4"
  run "$SCALEGUARD_SOURCE_DIR/scripts/sbatch/sweep.sbatch" cfg.ini --lr 1
  assert_failure
  assert_output --partial "must run as an array task"
}

@test "the templates ask Slurm for requeue, the USR1 warning and the throttle" {
  run grep -x -e '#SBATCH --requeue' -e '#SBATCH --signal=B:USR1@120' "$SCALEGUARD_SOURCE_DIR/scripts/sbatch/train.sbatch"
  assert_equal "${#lines[@]}" 2
  run grep -x '#SBATCH --array=0-3%4' "$SCALEGUARD_SOURCE_DIR/scripts/sbatch/sweep.sbatch"
  assert_success
}
