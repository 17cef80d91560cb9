#!/usr/bin/env bats
# scaleguard-run started by Slurm: srun --mpi=pmix over both dev-cluster nodes, the plan
# arriving as SCALEGUARD_* environment, and the launcher variables cross-checked with MPI.

load helpers

setup_file() {
  cluster_env
  export RUN_TMP=$(user_dir)
  export RUN_BIN=$SCALEGUARD_BUILD_DIR/runner/scaleguard-run
  # Skipped in setup(): this bats fails a file whose setup_file skips.
  [ -x "$RUN_BIN" ] || return 0
  "$RUN_BIN" prep --input /usr/share/games/fortunes/fortunes --output "$RUN_TMP/tokens.bin"
  chmod -R a+rwX "$RUN_TMP"
}

teardown_file() {
  rm -rf "$RUN_TMP"
}

setup() {
  [ -x "$RUN_BIN" ] || skip "scaleguard-run not built in $SCALEGUARD_BUILD_DIR"
  cluster_env
}

small=(--data tokens.bin --model gpt --n-embd 32 --n-layer 1 --seq-len 32 --global-batch 8 --steps 10
       --threads 1 --log-every 1 --verbose)

@test "data parallel across both nodes with srun -N2 -n2 --mpi=pmix" {
  cd "$RUN_TMP"
  run srun --mpi=pmix -N2 -n2 --time=10 "$RUN_BIN" train "${small[@]}" --metrics m.jsonl
  assert_success
  assert_output --partial 'rank 0/2'
  assert_output --partial 'rank 1/2'
  # The fake nodes have separate shared-memory domains: MPI sees two nodes.
  assert_output --partial 'node 1/2'
  assert_output --partial 'done: 10 steps'
  refute_output --partial 'differ from rank 0'
  run grep -c '"final":true' m.jsonl
  assert_output 1
}

@test "a plan that does not match the launched ranks fails on every rank, no hang" {
  cd "$RUN_TMP"
  SCALEGUARD_STRATEGY=ddp SCALEGUARD_DP=4 run timeout 120 srun --mpi=pmix -N2 -n2 --time=10 "$RUN_BIN" train "${small[@]}"
  assert_failure
  refute [ "$status" -eq 124 ]
  assert_output --partial 'the plan says dp=4'
}
