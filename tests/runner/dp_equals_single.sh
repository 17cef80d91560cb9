#!/usr/bin/env bash
# Data parallel on 2 ranks trains exactly what 1 rank trains with the same global batch.
# The single rank accumulates the same two micro-batches (global-batch 8 = 2 x 4), so the
# only difference is who adds the two gradients: float addition of two values is
# commutative, so the parameters must agree to <= 1e-6 (in practice bit for bit).
source "$(dirname "$0")/lib.sh"
fortunes_tokens tokens.bin
for model in gpt mlp; do
  args=(train --data tokens.bin --model "$model" --n-embd 32 --n-layer 1 --seq-len 32 --hidden 128
        --steps 20 --global-batch 8 --seed 7 --threads 1 --log-every 1 --quiet)
  "$run" "${args[@]}" --micro-batch 4 --metrics one.jsonl --dump-params one.bin
  mpi 2 "${args[@]}" --metrics two.jsonl --dump-params two.bin
  [ "$(grep -c '"step"' two.jsonl)" -eq 21 ] || fail "$model: expected 20 step lines + final in the metrics"
  "$here/compare_params.py" one.bin two.bin 1e-6 || fail "$model: 2 ranks differ from 1 rank"
  # The per-step losses agree too.
  diff <(grep -o '"loss":[^,]*' one.jsonl) <(grep -o '"loss":[^,]*' two.jsonl) || fail "$model: losses differ"
  echo "$model: 1 rank $(final_field one.jsonl params_checksum), 2 ranks $(final_field two.jsonl params_checksum)"
done
