#!/usr/bin/env bash
# Tensor parallel (Megatron) on 2 ranks trains what 1 process trains: the same loss and
# gradient norm at every step and the same final parameters (max abs diff <= 1e-5; only
# the order of float sums in the split matrix products and the vocabulary-parallel
# cross-entropy's log-sum-exp differ). Tied and untied heads.
source "$(dirname "$0")/lib.sh"
fortunes_tokens tokens.bin
for head in tied untied; do
  untied=false; [ "$head" = untied ] && untied=true
  args=(train --verbose --data tokens.bin --model gpt --n-embd 32 --n-head 4 --n-layer 2 --seq-len 32 --untied-head "$untied"
        --steps 20 --global-batch 8 --seed 7 --threads 1 --log-every 1 --quiet)
  "$run" "${args[@]}" --metrics one.jsonl --dump-params one.bin
  mpi 2 "${args[@]}" --tp 2 --metrics tp2.jsonl --dump-params tp2.bin 2> tp2.log || { cat tp2.log; fail "$head: tp=2 run failed"; }
  grep -q "tp=2" tp2.log || fail "$head: the run does not say it used tp=2"
  # Megatron's vocabulary parallel: each rank holds half the embedding / head rows and
  # computes half the logits; the loss comes from all-reduced max, sum-exp and target logit.
  grep -qF "vocab-parallel embedding, head and cross-entropy: 128 of 256 logits per rank" tp2.log ||
    { cat tp2.log; fail "$head: tp=2 did not use the vocabulary-parallel embedding and loss"; }
  ! grep -q "WARNING" tp2.log || { grep WARNING tp2.log; fail "$head: ranks disagree"; }
  # The dump gathers the tp slices: the whole model, equal to the single process's.
  "$here/compare_params.py" one.bin tp2.bin 1e-5 || fail "$head: tp=2 parameters differ from a single process"
  [ "$(grep -c '"step"' tp2.jsonl)" -eq 21 ] || fail "$head: expected 20 step lines + final in the metrics"
  /usr/bin/python3 - one.jsonl tp2.jsonl <<'PY' || fail "$head: tp=2 differs from a single process"
import json, sys
rows = [[r for r in map(json.loads, open(p)) if "loss" in r and not r.get("final")] for p in sys.argv[1:]]
assert len(rows[0]) == len(rows[1]) == 20, "step counts differ"
loss = max(abs(a["loss"] - b["loss"]) for a, b in zip(*rows))
norm = max(abs(a["grad_norm"] - b["grad_norm"]) for a, b in zip(*rows))
print(f"max abs diff over 20 steps: loss {loss:.2e}, grad_norm {norm:.2e}")
# grad_norm is printed with 5 decimals: its rounding alone may differ by 1e-5.
sys.exit(0 if loss <= 1e-5 and norm <= 2e-5 else 1)
PY
  # The loss must move, or equality would prove nothing.
  first=$(grep -m1 -o '"loss":[^,]*' tp2.jsonl | cut -d: -f2); last=$(final_field tp2.jsonl loss)
  /usr/bin/python3 -c "import sys; sys.exit(0 if $last < $first - 0.5 else 1)" || fail "$head: loss did not fall ($first -> $last)"
  echo "$head: loss $first -> $last with tp=2, equal to a single process"
done
