#!/usr/bin/env bash
# Pipeline parallel trains what one process trains with the same micro-batches: pp=2 on 2
# ranks and pp=4 on 4 ranks (oversubscribed), each schedule (1F1B, GPipe). The single
# process accumulates the same 4 micro-batches of 2; the pipeline runs them as M=4
# micro-batches through its stages. Per-step losses must agree to <= 1e-5 and the final
# parameters (gathered from every stage) to <= 1e-5.
source "$(dirname "$0")/lib.sh"
fortunes_tokens tokens.bin
common=(train --verbose --data tokens.bin --model gpt --n-layer 4 --n-embd 32 --n-head 4 --seq-len 32
        --steps 12 --global-batch 8 --seed 11 --threads 1 --log-every 1 --quiet)
"$run" "${common[@]}" --micro-batch 2 --metrics one.jsonl --dump-params one.bin 2> one.log

# losses FILE: "step loss" per step line.
losses() { /usr/bin/python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if "step" in r and "final" not in r: print(r["step"], r["loss"])' "$1"; }
max_loss_diff() { /usr/bin/python3 -c '
import sys
a = [l.split() for l in open(sys.argv[1])]; b = [l.split() for l in open(sys.argv[2])]
assert len(a) == len(b) == 12, (len(a), len(b))
assert all(x[0] == y[0] for x, y in zip(a, b))
print(max(abs(float(x[1]) - float(y[1])) for x, y in zip(a, b)))' "$1" "$2"; }
losses one.jsonl > one.loss

for pp in 2 4; do
  for schedule in 1f1b gpipe; do
    name=pp$pp-$schedule
    mpi "$pp" "${common[@]}" --pp "$pp" --micro-batches 4 --schedule "$schedule" \
      --metrics "$name.jsonl" --dump-params "$name.bin" 2> "$name.log" || { cat "$name.log"; fail "$name: run failed"; }
    grep -q "pipeline pp=$pp x dp=1 x tp=1, schedule $schedule" "$name.log" || fail "$name: no pipeline line"
    losses "$name.jsonl" > "$name.loss"
    diff=$(max_loss_diff one.loss "$name.loss")
    /usr/bin/python3 -c "import sys; sys.exit(0 if $diff <= 1e-5 else 1)" || fail "$name: losses differ by $diff"
    "$here/compare_params.py" one.bin "$name.bin" 1e-5 || fail "$name: parameters differ from 1 process"
    # The first line says what ran; every step line carries a bubble in (0, 1).
    head -1 "$name.jsonl" | jq -e ".run.pp == $pp and .run.dp == 1 and .run.micro_batches == 4 and
      .run.micro_batch == 2 and .run.world == $pp and .run.params == $(head -1 one.jsonl | jq .run.params)" >/dev/null \
      || fail "$name: run line: $(head -1 "$name.jsonl")"
    jq -se '[.[] | select(.step and (.final | not)) | .bubble_fraction] | length == 12 and all(. > 0 and . < 1)' \
      "$name.jsonl" >/dev/null || fail "$name: bubble_fraction missing or outside (0, 1)"
    echo "$name: max loss diff $diff vs 1 process; checksums $(final_field one.jsonl params_checksum)" \
         "$(final_field "$name.jsonl" params_checksum)"
  done
done
# Without pipeline stages there is no bubble.
jq -se '[.[] | select(.step and (.final | not)) | .bubble_fraction] | all(. == 0)' one.jsonl >/dev/null \
  || fail "1 process: bubble_fraction should be 0"
