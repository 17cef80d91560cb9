#!/usr/bin/env bash
# Every sample exactly once per epoch across ranks, and the same stream whatever the rank
# count: the sample log of 2 ranks and of 1 rank map each stream position to the same id.
source "$(dirname "$0")/lib.sh"
# 2001 bytes of real text, seq-len 16: (2001 - 1) / 16 = 125 samples.
head -c 2001 /usr/share/games/fortunes/fortunes > text
"$run" prep --input text --output tokens.bin
args=(train --data tokens.bin --model mlp --n-embd 8 --hidden 16 --seq-len 16 --global-batch 8
      --steps 20 --seed 11 --threads 1 --quiet)
mpi 2 "${args[@]}" --micro-batch 2 --sample-log two       # 2 ranks x 2 micro-batches of 2
"$run" "${args[@]}" --sample-log one                      # 1 rank, 1 micro-batch of 8
/usr/bin/python3 - <<'PY'
import sys
def stream(prefix, ranks, accum, micro, batch=8):
    pos = {}
    for r in range(ranks):
        for line in open(f"{prefix}.rank{r}"):
            step, u, *ids = map(int, line.split())
            assert len(ids) == micro, line
            for j, i in enumerate(ids):
                p = step * batch + (r * accum + u) * micro + j
                assert p not in pos, f"position {p} trained twice"
                pos[p] = i
    return [pos[p] for p in sorted(pos)]
n = 125
two, one = stream("two", 2, 2, 2), stream("one", 1, 1, 8)
assert len(two) == 160 and two == one, "2-rank stream differs from the 1-rank stream"
assert sorted(two[:n]) == list(range(n)), f"epoch 0 is not a permutation of the {n} samples"
rest = two[n:]
assert len(set(rest)) == len(rest), "a sample repeats inside epoch 1"
assert two[:n] != sorted(two[:n]), "the epoch is not shuffled"
assert rest != two[:len(rest)], "epoch 1 repeats epoch 0's order"
print(f"epoch 0: all {n} samples once; epoch 1: {len(rest)} distinct so far; 1 rank == 2 ranks")
PY
