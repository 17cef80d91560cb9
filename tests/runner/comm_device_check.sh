#!/usr/bin/env bash
# Every tensor handed to a communicator is on the training device (issue 15 item 1). The
# NCCL backend refuses host tensors, so a host-made tensor in a collective aborts every
# tp, pp or ZeRO run on GPUs at its first step; SCALEGUARD_CHECK_COMM=1 wraps the
# communicators in the same refusal on CPU CI (a CPU run moves only float32 tensors from
# the training device; host-made double scalars, int64 sizes and text bytes are refused,
# see runner/src/comm/comm.h). Cases: the gradient-norm reduction over the tp group, the pp
# group and the ZeRO-1 shard group, and pp's end-of-run parameter gather for the checksum
# and --dump-params. Before the fix the first case died with
#   communicator device check (SCALEGUARD_CHECK_COMM): all_reduce got a Double CPU tensor ...
source "$(dirname "$0")/lib.sh"
fortunes_tokens tokens.bin
export SCALEGUARD_CHECK_COMM=1
common=(train --data tokens.bin --model gpt --n-embd 32 --n-head 4 --n-layer 2 --seq-len 32 --steps 3
        --global-batch 8 --seed 5 --threads 1 --log-every 1 --quiet --grad-clip 0.5)
check() {  # NAME ARGS...
  local name=$1; shift
  mpi 2 "${common[@]}" "$@" --metrics "$name.jsonl" --dump-params "$name.bin" 2> "$name.log" ||
    { cat "$name.log"; fail "$name: a communicator got a tensor that is not on the training device"; }
  grep -q "communicator device check on" "$name.log" || { cat "$name.log"; fail "$name: the check was not on"; }
  ! grep -q "WARNING" "$name.log" || { grep WARNING "$name.log"; fail "$name: ranks disagree"; }
  [ -n "$(final_field "$name.jsonl" params_checksum)" ] || fail "$name: no final checksum"
  # The clip saw a gradient norm (over every group) and reported it.
  jq -se '[.[] | select(.step and (.final | not)) | .grad_norm] | length == 3 and all(. > 0)' "$name.jsonl" \
    >/dev/null || fail "$name: grad_norm missing"
  echo "$name: every collective took training-device tensors; checksum $(final_field "$name.jsonl" params_checksum)"
}
check tp2 --tp 2
check pp2 --pp 2 --micro-batches 2
check zero1 --zero 1
