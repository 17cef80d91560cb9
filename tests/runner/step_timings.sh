#!/usr/bin/env bash
# The step timer's CPU behaviour (runner/src/timing/step_timer.h) through the interfaces the
# trainer, DDP, tensor parallel, ZeRO-1 and the pipeline record into: every logged step of a
# 2-rank run has step_ms > 0, comm_ms > 0 (the DDP all-reduce, tp's all-reduces, ZeRO's
# all-gather are all timed), comm_ms <= step_ms (they are disjoint intervals inside the step
# on the host) and comm_fraction = comm_ms / step_ms; pp=2 also pipeline_ms > 0 and a bubble
# in [0, 1); one process has no comm. Structural only: no timing thresholds. The same
# checks on a GPU, where the times come from CUDA events, are in scripts/gpu-check.sh.
source "$(dirname "$0")/lib.sh"
fortunes_tokens tokens.bin
common=(train --verbose --data tokens.bin --model gpt --n-layer 2 --n-embd 32 --n-head 4 --seq-len 32 --global-batch 8
        --micro-batch 2 --warmup 0 --seed 5 --threads 1 --log-every 1 --quiet --steps 4)

check() {  # check NAME JQ-CONDITION-ON-EACH-STEP
  jq -se "[.[] | select(.step and (.final | not))] | length == 4 and all($2)" "$1.jsonl" >/dev/null ||
    { cat "$1.jsonl"; fail "$1: step timings fail: $2"; }
}
base='.step_ms > 0 and .comm_ms >= 0 and .comm_ms <= .step_ms and ((.comm_fraction - .comm_ms / .step_ms) | fabs) < 1e-3'
for layout in "" "--tp 2" "--zero 1" "--pp 2"; do
  name=dp$(echo "$layout" | tr -d ' -')
  read -r -a extra <<< "$layout"
  mpi 2 "${common[@]}" "${extra[@]}" --metrics "$name.jsonl" 2> "$name.log" || { cat "$name.log"; fail "$name: run failed"; }
  check "$name" "$base and .comm_ms > 0"
  grep -q "timings.*CUDA events" "$name.log" && fail "$name: a CPU run claims CUDA-event timings"
done
check dppp2 "$base and .pipeline_ms > 0 and .bubble_fraction >= 0 and .bubble_fraction < 1"
mpi 1 "${common[@]}" --metrics one.jsonl 2> one.log || { cat one.log; fail "1 process failed"; }
check one "$base and .comm_ms == 0 and .pipeline_ms == 0 and .bubble_fraction == 0"
echo PASS
