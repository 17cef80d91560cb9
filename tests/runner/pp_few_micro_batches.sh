#!/usr/bin/env bash
# Fewer micro-batches than stages (M < P) and an M that is not a multiple of P: pp=4 on 4
# ranks with M = 1 and M = 3, both schedules. Every stage's warm-up is then cut short by M;
# the run must neither hang (the runs are under a timeout) nor change the result: per-step
# losses equal one process running the same micro-batches (<= 1e-5). Last, the stage split
# weighs the head.
source "$(dirname "$0")/lib.sh"
fortunes_tokens tokens.bin
common=(train --verbose --data tokens.bin --model gpt --n-layer 4 --n-embd 16 --n-head 2 --seq-len 16
        --steps 4 --seed 3 --threads 1 --log-every 1 --quiet)
max_loss_diff() { /usr/bin/python3 -c '
import json, sys
def losses(path):
    return [r["loss"] for r in map(json.loads, open(path)) if "step" in r and "final" not in r]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert len(a) == len(b) == 4, (len(a), len(b))
print(max(abs(x - y) for x, y in zip(a, b)))' "$1" "$2"; }
for m in 1 3; do
  "$run" "${common[@]}" --global-batch $((2 * m)) --micro-batch 2 --metrics "one-$m.jsonl" 2> "one-$m.log"
  for schedule in 1f1b gpipe; do
    name=m$m-$schedule
    mpi 4 "${common[@]}" --global-batch $((2 * m)) --pp 4 --micro-batches "$m" --schedule "$schedule" \
      --metrics "$name.jsonl" 2> "$name.log" || { cat "$name.log"; fail "$name: run failed or hung"; }
    diff=$(max_loss_diff "one-$m.jsonl" "$name.jsonl")
    /usr/bin/python3 -c "import sys; sys.exit(0 if $diff <= 1e-5 else 1)" || fail "$name: losses differ by $diff"
    echo "$name: pp=4, $m micro-batch(es): max loss diff $diff vs 1 process"
  done
done
# The split counts the head: at C=16, T=16, V=256 it costs 2CV+V = 8448 FLOPs per token, more
# than a block (24C^2+4TC = 7168), so with pp=2 the last stage gets 1 block of 4, not 2.
mpi 2 "${common[@]}" --global-batch 2 --pp 2 2> split.log || { cat split.log; fail "pp=2 run failed"; }
grep -q "blocks per stage: \[0,3) \[3,4)" split.log || { grep pipeline split.log; fail "split ignores the head's cost"; }
