#!/usr/bin/env bash
# Grids the runner cannot form fail on every rank with a clear message, never a hang:
# each case runs real ranks under a timeout and checks every rank's exit code.
source "$(dirname "$0")/lib.sh"
# mpirun must not kill the other ranks when the first one exits non-zero (it then exits 0
# itself): each rank's own exit code is what this test checks.
export OMPI_MCA_orte_abort_on_non_zero_status=0
"$run" prep --input /usr/share/games/fortunes/fortunes --output good.bin
gpt=(train --data good.bin --n-embd 16 --n-head 2 --seq-len 16 --global-batch 8 --steps 2
     --threads 1 --quiet)

# expect_failure NAME N PATTERN ARGS...: N ranks exit non-zero and stderr matches PATTERN.
expect_failure() {
  local name=$1 n=$2 pattern=$3; shift 3
  rm -f rc.*
  local status=0
  mpi_rc "$n" rc "$@" > "$name.log" 2>&1 || status=$?
  [ "$status" -ne 124 ] || fail "$name: timed out (hang)"
  for ((r = 0; r < n; r++)); do
    [ -f "rc.$r" ] || fail "$name: rank $r did not exit by itself"
    [ "$(cat "rc.$r")" -ne 0 ] || fail "$name: rank $r exited 0"
  done
  grep -qE "$pattern" "$name.log" || { cat "$name.log"; fail "$name: no message matching '$pattern'"; }
  echo "$name: $(grep -m1 -E "$pattern" "$name.log")"
}

expect_failure not_multiple 2 "2 ranks cannot form a grid of tp=1 x pp=3" "${gpt[@]}" --n-layer 3 --pp 3
expect_failure product 4 "the plan says dp=1 x tp=1 x pp=2 = 2 ranks, but 4 were launched" "${gpt[@]}" --n-layer 2 --pp 2 \
  --dp 1
SCALEGUARD_PP=3 expect_failure env_plan 4 "4 ranks cannot form a grid of tp=1 x pp=3" "${gpt[@]}" --n-layer 3
expect_failure too_few_blocks 2 "pp=2 stages need at least as many blocks, but n-layer=1" "${gpt[@]}" --n-layer 1 --pp 2
expect_failure mlp 2 "pipeline parallel \(pp=2\) needs the gpt or llama model, not mlp" "${gpt[@]}" --n-layer 2 --model mlp --pp 2
expect_failure degree 2 "tp >= 1, pp >= 1" "${gpt[@]}" --n-layer 2 --pp 0
expect_failure schedule 2 "schedule must be 1f1b or gpipe, not 'zigzag'" "${gpt[@]}" --n-layer 2 --pp 2 --schedule zigzag
expect_failure micro_batches 2 "micro-batches 3 does not divide the per-rank batch 8" "${gpt[@]}" --n-layer 2 --pp 2 --micro-batches 3
expect_failure both 2 "micro-batches 2 x micro-batch 2 != the per-rank batch 8" "${gpt[@]}" --n-layer 2 --pp 2 --micro-batches 2 \
  --micro-batch 2
