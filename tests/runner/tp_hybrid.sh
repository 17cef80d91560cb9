#!/usr/bin/env bash
# Tensor parallel and ZeRO combined on 4 ranks (oversubscribed): tp=2 x dp=2 with ZeRO-1,
# tp=2 x pp=2 and pp=2 x dp=2 with ZeRO-1, each trains what 1 process trains accumulating the same two micro-batches
# (loss at every step within 1e-5; tp x dp also the final parameters).
source "$(dirname "$0")/lib.sh"
fortunes_tokens tokens.bin
args=(train --verbose --data tokens.bin --model gpt --n-embd 32 --n-head 4 --n-layer 2 --seq-len 32 --steps 12
      --global-batch 8 --seed 7 --threads 1 --log-every 1 --quiet)
"$run" "${args[@]}" --micro-batch 4 --metrics one.jsonl --dump-params one.bin
same_losses() {  # NAME FILE
  /usr/bin/python3 - one.jsonl "$2" <<'PY' || fail "$1: losses differ from a single process"
import json, sys
rows = [[r for r in map(json.loads, open(p)) if "loss" in r and not r.get("final")] for p in sys.argv[1:]]
assert len(rows[0]) == len(rows[1]) == 12, "step counts differ"
worst = max(abs(a["loss"] - b["loss"]) for a, b in zip(*rows))
print(f"max abs loss diff over 12 steps: {worst:.2e}")
sys.exit(0 if worst <= 1e-5 else 1)
PY
}
mpi 4 "${args[@]}" --tp 2 --dp 2 --zero 1 --metrics tpdp.jsonl --dump-params tpdp.bin 2> tpdp.log ||
  { cat tpdp.log; fail "tp=2 x dp=2 zero=1 failed"; }
grep -q "tp=2, ZeRO-1" tpdp.log || fail "tp x dp: the run does not say tp=2 with ZeRO-1"
same_losses "tp=2 x dp=2 zero=1" tpdp.jsonl
"$here/compare_params.py" one.bin tpdp.bin 1e-5 || fail "tp=2 x dp=2 zero=1: parameters differ from a single process"
mpi 4 "${args[@]}" --tp 2 --pp 2 --micro-batches 2 --metrics tppp.jsonl 2> tppp.log ||
  { cat tppp.log; fail "tp=2 x pp=2 failed"; }
same_losses "tp=2 x pp=2" tppp.jsonl
# ZeRO-1 on pipeline stages (untied head: the tied one is refused with pp and ZeRO).
"$run" "${args[@]}" --untied-head --micro-batch 4 --metrics one.jsonl
mpi 4 "${args[@]}" --untied-head --pp 2 --dp 2 --zero 1 --metrics ppdp.jsonl 2> ppdp.log ||
  { cat ppdp.log; fail "pp=2 x dp=2 zero=1 failed"; }
same_losses "pp=2 x dp=2 zero=1" ppdp.jsonl
echo "tp=2 x dp=2 (ZeRO-1), tp=2 x pp=2 and pp=2 x dp=2 (ZeRO-1) equal a single process (final loss $(final_field tpdp.jsonl loss))"
