#!/usr/bin/env bash
# ZeRO stage 1 on 2 ranks (reduce-scatter of the gradients, AdamW on each rank's shard,
# all-gather of the parameters) trains what plain data parallel trains on 2 ranks: the
# same loss at every step and the same final parameters (max abs diff <= 1e-5; only the
# summation order of the gradient norm differs). Cases: one bucket; one bucket per
# parameter with odd sizes (hidden 127: buckets padded to a multiple of dp); no overlap.
source "$(dirname "$0")/lib.sh"
fortunes_tokens tokens.bin
check() {  # NAME ARGS...
  local name=$1; shift
  local args=(train --data tokens.bin --steps 20 --global-batch 8 --seed 7 --threads 1 --log-every 1 --quiet "$@")
  mpi 2 "${args[@]}" --metrics dp.jsonl --dump-params dp.bin
  mpi 2 "${args[@]}" --zero 1 --metrics zero.jsonl --dump-params zero.bin 2> zero.log || { cat zero.log; fail "$name: zero=1 failed"; }
  grep -q "ZeRO-1" zero.log || { cat zero.log; fail "$name: the run does not say it sharded the optimizer"; }
  "$here/compare_params.py" dp.bin zero.bin 1e-5 || fail "$name: ZeRO-1 parameters differ from data parallel"
  /usr/bin/python3 - dp.jsonl zero.jsonl <<'PY' || fail "$name: ZeRO-1 losses differ from data parallel"
import json, sys
rows = [[r for r in map(json.loads, open(p)) if "loss" in r and not r.get("final")] for p in sys.argv[1:]]
assert len(rows[0]) == len(rows[1]) == 20, "step counts differ"
worst = max(abs(a["loss"] - b["loss"]) for a, b in zip(*rows))
print(f"max abs loss diff over 20 steps: {worst:.2e}")
sys.exit(0 if worst <= 1e-5 else 1)
PY
  echo "$name: ZeRO-1 equals data parallel (final loss $(final_field zero.jsonl loss))"
}
check gpt --model gpt --n-embd 32 --n-layer 2 --seq-len 32
check mlp_odd_buckets --model mlp --n-embd 16 --hidden 127 --seq-len 16 --bucket-mb 0
check gpt_no_overlap --model gpt --n-embd 32 --n-layer 1 --seq-len 32 --no-overlap
