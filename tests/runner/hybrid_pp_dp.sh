#!/usr/bin/env bash
# A 2x2 grid: pp=2 stages x dp=2 replicas on 4 ranks (oversubscribed). World ranks 0,1 are
# stage 0 (dp 0, 1), ranks 2,3 stage 1. The grid trains what one process trains with the
# same micro-batches (<= 1e-5 per step), the plan can come from SCALEGUARD_* like the SPANK
# plugin exports it, and on the fortunes corpus the loss falls.
source "$(dirname "$0")/lib.sh"
fortunes_tokens tokens.bin
common=(train --verbose --data tokens.bin --model gpt --n-layer 2 --n-embd 32 --n-head 4 --seq-len 32
        --global-batch 8 --seed 5 --threads 1 --log-every 1 --quiet --lr 3e-3 --warmup 5)
"$run" "${common[@]}" --steps 40 --micro-batch 2 --metrics one.jsonl 2> one.log
SCALEGUARD_STRATEGY=hybrid SCALEGUARD_PP=2 SCALEGUARD_DP=2 SCALEGUARD_MICRO_BATCH=2 \
  mpi 4 "${common[@]}" --steps 40 --metrics grid.jsonl 2> grid.log || { cat grid.log; fail "2x2 grid run failed"; }
grep -q "pipeline pp=2 x dp=2 x tp=1, schedule 1f1b" grid.log || fail "no 2x2 grid in the log"
head -1 grid.jsonl | jq -e '.run.pp == 2 and .run.dp == 2 and .run.world == 4 and .run.micro_batches == 2' \
  >/dev/null || fail "run line: $(head -1 grid.jsonl)"
/usr/bin/python3 - one.jsonl grid.jsonl <<'PY' || fail "2x2 grid differs from 1 process or did not learn"
import json, sys
def steps(path):
    return [r for r in map(json.loads, open(path)) if "step" in r and "final" not in r]
one, grid = steps(sys.argv[1]), steps(sys.argv[2])
assert len(one) == len(grid) == 40, (len(one), len(grid))
diff = max(abs(a["loss"] - b["loss"]) for a, b in zip(one, grid))
first, last = grid[0]["loss"], sum(r["loss"] for r in grid[-5:]) / 5
print(f"2x2 grid: max loss diff vs 1 process {diff:.2e}; loss {first:.3f} -> {last:.3f} (mean of last 5)")
sys.exit(0 if diff <= 1e-5 and last < 0.8 * first else 1)
PY
grep -q 'differ from rank 0' grid.log && fail "replicas diverged" || true
