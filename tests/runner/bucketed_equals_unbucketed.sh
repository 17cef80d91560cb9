#!/usr/bin/env bash
# Gradients all-reduced bucket by bucket from autograd hooks (overlapping backward) give
# the same parameters as one all-reduce per parameter after backward.
source "$(dirname "$0")/lib.sh"
fortunes_tokens tokens.bin
args=(train --data tokens.bin --model gpt --n-embd 32 --n-layer 2 --seq-len 32 --steps 20
      --global-batch 8 --seed 3 --threads 1 --quiet --log-every 1)
# 0.01 MB buckets: several buckets even for this small model, so the hooks really launch
# some of them before backward ends.
mpi 2 "${args[@]}" --bucket-mb 0.01 --metrics overlap.jsonl --dump-params overlap.bin
mpi 2 "${args[@]}" --bucket-mb 0 --no-overlap --metrics plain.jsonl --dump-params plain.bin
"$here/compare_params.py" overlap.bin plain.bin 0 || fail "bucketed overlap differs from unbucketed"
[ "$(final_field overlap.jsonl params_checksum)" = "$(final_field plain.jsonl params_checksum)" ] ||
  fail "checksums differ"
