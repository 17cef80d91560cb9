#!/usr/bin/env bash
# Layouts the model cannot take fail on every rank with a clear message, never a hang:
# tp not dividing n-head, the MLP model with tensor parallel, a ZeRO stage that does not
# exist, ZeRO-3 with pipeline stages, ZeRO-1 with pipeline stages and a tied head, checkpoints of a tp or ZeRO run (the
# writer does not handle slices and shards yet).
source "$(dirname "$0")/lib.sh"
"$run" prep --input /usr/share/games/fortunes/fortunes --output good.bin
small=(--data good.bin --n-embd 24 --hidden 16 --seq-len 16 --global-batch 4 --steps 2 --threads 1 --quiet)

expect_failure() {  # NAME RANKS PATTERN ARGS...
  local name=$1 n=$2 pattern=$3; shift 3
  rm -f rc.*
  local status=0
  mpi_rc "$n" rc "$@" > "$name.log" 2>&1 || status=$?
  [ "$status" -ne 124 ] || fail "$name: timed out (hang)"
  [ "$status" -ne 0 ] || fail "$name: mpirun exited 0"
  for r in $(seq 0 $((n - 1))); do
    [ -f "rc.$r" ] || fail "$name: rank $r did not exit by itself"
    [ "$(cat "rc.$r")" -ne 0 ] || fail "$name: rank $r exited 0"
  done
  grep -qE "$pattern" "$name.log" || { cat "$name.log"; fail "$name: no message matching '$pattern'"; }
  echo "$name: $(grep -m1 -E "$pattern" "$name.log")"
}

expect_failure tp_heads 2 "tp=2 does not divide n-head=3" train --model gpt --n-head 3 --tp 2 "${small[@]}"
expect_failure mlp_tp 2 "tensor parallel.*needs the gpt or llama model" train --model mlp --tp 2 "${small[@]}"
expect_failure zero_stage 2 "zero=4: ZeRO stages are 0, 1, 2 and 3" train --model gpt --n-head 4 --zero 4 "${small[@]}"
expect_failure zero3_pp 2 "ZeRO-3 with pipeline stages \(pp=2\) is not implemented" \
  train --model gpt --n-head 4 --n-layer 2 --pp 2 --zero 3 --untied-head "${small[@]}"
expect_failure zero_pp_tied 2 "ZeRO-1 with pipeline stages \(pp=2\) needs --untied-head" \
  train --model gpt --n-head 4 --n-layer 2 --pp 2 --zero 1 "${small[@]}"
expect_failure zero_negative 2 "zero >= 0" train --model gpt --n-head 4 --zero -1 "${small[@]}"
