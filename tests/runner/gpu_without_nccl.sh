#!/usr/bin/env bash
# A GPU node and a scaleguard-run that cannot use its GPUs (built without the NCCL backend,
# or a LibTorch that does not see the GPU): device=auto must fail on every rank with a
# clear message instead of training on the CPU while the node's GPUs idle (issue 15 item
# 3). --device cpu still trains on the CPU on purpose, and CUDA_VISIBLE_DEVICES=NoDevFiles
# (Slurm's value for a job without GPUs) hides the device nodes. The node's GPU is a fake
# device node: SCALEGUARD_DEVICE_NODE_DIR replaces /dev for the probe (runner/src/launch/launch.h).
# Before the fix the auto case trained on the CPU and exited 0 ("device cpu" in its log).
source "$(dirname "$0")/lib.sh"
fortunes_tokens tokens.bin
mkdir nodes && touch nodes/nvidiactl nodes/nvidia0 nodes/nvidia1
export SCALEGUARD_DEVICE_NODE_DIR=$work/nodes
args=(train --data tokens.bin --model gpt --n-embd 16 --n-head 2 --n-layer 1 --seq-len 16 --steps 2
      --global-batch 4 --seed 1 --threads 1 --quiet)
rc=0
mpi_rc 2 auto "${args[@]}" 2> auto.log || rc=$?
[ "$rc" -ne 124 ] || { cat auto.log; fail "device=auto on a GPU node hung"; }
for r in 0 1; do
  [ "$(cat auto.$r 2>/dev/null)" = 1 ] || { cat auto.log; fail "device=auto: rank $r exited $(cat auto.$r 2>/dev/null), expected 1"; }
done
grep -q "a GPU is visible ($work/nodes/nvidia0 exists)" auto.log || { cat auto.log; fail "device=auto: no clear message"; }
grep -q -- "--device cpu" auto.log || { cat auto.log; fail "device=auto: the message does not say how to train on the CPU"; }
! grep -q "^step \|done:" auto.log || { cat auto.log; fail "device=auto trained anyway"; }
echo "device=auto on a GPU node without a usable GPU backend: every rank exits 1:"
grep "a GPU is visible" auto.log
# On purpose on the CPU: trains.
mpi 2 "${args[@]}" --device cpu 2> cpu.log || { cat cpu.log; fail "--device cpu failed on a GPU node"; }
grep -qE "ranks? on [0-9]+ nodes?, cpu," cpu.log && grep -q "done:" cpu.log || { cat cpu.log; fail "--device cpu did not train"; }
# GPUs hidden from the job: auto means the CPU.
CUDA_VISIBLE_DEVICES=NoDevFiles mpi 2 "${args[@]}" 2> hidden.log ||
  { cat hidden.log; fail "CUDA_VISIBLE_DEVICES=NoDevFiles: device=auto failed"; }
