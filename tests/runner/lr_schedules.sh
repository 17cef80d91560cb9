#!/usr/bin/env bash
# Learning-rate schedules in real runs on 2 ranks, read back from the CSV and JSON metrics.
# For each of constant, linear, cosine and wsd, with the decay horizon (16 steps) given
# apart from --steps:
#  1. an uninterrupted 16-step run (--lr-decay-steps 16) logs, at every step, the closed
#     form computed here in Python (not from the runner's code);
#  2. a run of --steps 8 with the horizon as tokens (--lr-decay-tokens 4096 = 16 steps of
#     8 x 32 tokens) that saves at its end, then the same job extended to --steps 16 from
#     its checkpoint (as a requeue with a larger --steps does) log exactly the uninterrupted
#     run's learning rate and loss at every step, and its final params_checksum.
# Then the default (no schedule option) is still warm-up + cosine to the floor at --steps,
# and extending such a run from its checkpoint notes that its schedule changed.
source "$(dirname "$0")/lib.sh"
fortunes_tokens tokens.bin
common=(train --data tokens.bin --model gpt --n-layer 1 --n-embd 32 --n-head 4 --seq-len 32 --global-batch 8
        --micro-batch 4 --lr 3e-3 --min-lr-ratio 0.1 --warmup 3 --lr-wsd-decay-fraction 0.25 --seed 5 --threads 1
        --log-every 1 --quiet)

# lrs CSV: "step lr" per training row.
lrs() { /usr/bin/python3 -c 'import csv,sys
for r in csv.DictReader(open(sys.argv[1])):
    if r["lr"]: print(r["step"], r["lr"])' "$1"; }

# closed_form KIND H: "step lr" for steps 1..H+2 (1-based as logged: step k ran with lr(k-1)).
closed_form() { /usr/bin/python3 - "$1" "$2" <<'PY'
import math, sys
kind, H = sys.argv[1], int(sys.argv[2])
lr, lo, W, D = 3e-3, 3e-3 * 0.1, 3, round(0.25 * H)
for k in range(1, H + 3):
    s = k - 1
    if s < W: v = lr * (s + 1) / W
    elif kind == "constant": v = lr
    elif kind == "wsd": v = lr if s < H - D else lo + (lr - lo) * (1 - min(1, (s - (H - D) + 1) / D))
    else:
        p = min(1, (s - W) / (H - W - 1))
        v = lo + (lr - lo) * (1 - p) if kind == "linear" else lo + 0.5 * (lr - lo) * (1 + math.cos(math.pi * p))
    print(k, repr(v))
PY
}

# same_within FILE_A FILE_B: the same steps, each lr equal to 1e-12 relative.
same_within() { /usr/bin/python3 - "$1" "$2" <<'PY'
import sys
a, b = ({int(s): float(v) for s, v in (l.split() for l in open(p))} for p in sys.argv[1:])
bad = [s for s in a if s not in b or abs(a[s] - b[s]) > 1e-12 * abs(b[s])]
sys.exit(f"steps {bad}: {[(a[s], b.get(s)) for s in bad]}" if bad else 0)
PY
}

for kind in constant linear cosine wsd; do
  mpi 2 "${common[@]}" --lr-schedule "$kind" --lr-decay-steps 16 --steps 16 --metrics "$kind-ref.jsonl" \
    --metrics-csv "$kind-ref.csv" 2> "$kind-ref.log" || { cat "$kind-ref.log"; fail "$kind: uninterrupted run failed"; }
  lrs "$kind-ref.csv" > "$kind-ref.lr"
  [ "$(wc -l < "$kind-ref.lr")" = 16 ] || { cat "$kind-ref.csv"; fail "$kind: expected 16 logged steps"; }
  closed_form "$kind" 16 > "$kind-closed.all"   # not through head: python's exit flush would hit a closed pipe
  head -16 "$kind-closed.all" > "$kind-closed.lr"
  same_within "$kind-ref.lr" "$kind-closed.lr" || { paste "$kind-ref.lr" "$kind-closed.lr"; fail "$kind: not the closed form"; }

  mpi 2 "${common[@]}" --lr-schedule "$kind" --lr-decay-tokens 4096 --steps 8 --metrics "$kind-a.jsonl" \
    --metrics-csv "$kind-a.csv" --ckpt-dir "$kind-ck" --ckpt-every 8 2> "$kind-a.log" ||
    { cat "$kind-a.log"; fail "$kind: first 8 steps failed"; }
  mpi 2 "${common[@]}" --lr-schedule "$kind" --lr-decay-steps 16 --steps 16 --metrics "$kind-b.jsonl" \
    --metrics-csv "$kind-b.csv" --ckpt-dir "$kind-ck" --ckpt-every 100 2> "$kind-b.log" ||
    { cat "$kind-b.log"; fail "$kind: extended run failed"; }
  grep -qF "resumed from step-00000008" "$kind-b.log" || { cat "$kind-b.log"; fail "$kind: the extended run did not resume"; }
  { lrs "$kind-a.csv"; lrs "$kind-b.csv"; } > "$kind-ab.lr"
  diff "$kind-ref.lr" "$kind-ab.lr" || fail "$kind: the interrupted and extended run's learning rates differ from the uninterrupted run's"
  expect_same_run "$kind-ref.jsonl" "$kind-b.jsonl"
  same_losses "$kind-ref.jsonl" "$kind-a.jsonl" || fail "$kind: the first 8 steps' losses differ"
  echo "PASS $kind: closed form at 16 steps; 8 steps (horizon in tokens) + extended to 16 = uninterrupted, lr and loss"
done

# Nothing given: warm-up then cosine to the floor at the last of --steps (as before this option).
mpi 2 "${common[@]}" --steps 12 --metrics-csv default.csv 2> default.log || { cat default.log; fail "default run failed"; }
lrs default.csv > default.lr
closed_form cosine 12 > default-closed.all
head -12 default-closed.all > default-closed.lr
same_within default.lr default-closed.lr || { paste default.lr default-closed.lr; fail "the default schedule changed"; }
# Extending such a run changes its horizon: the resumed run says so.
mpi 2 "${common[@]}" --steps 12 --ckpt-dir default-ck --ckpt-every 12 2> default-a.log || { cat default-a.log; fail "default run with checkpoints failed"; }
mpi 2 "${common[@]}" --steps 20 --ckpt-dir default-ck 2> default-b.log || { cat default-b.log; fail "default run extended failed"; }
grep -qF "note: the learning-rate schedule changed since this checkpoint: step 12 ran at lr 0.0003," default-b.log ||
  { cat default-b.log; fail "extending a run without a horizon did not note the changed schedule"; }
grep -q "schedule changed" "cosine-b.log" && fail "a run extended with its horizon noted a changed schedule"
echo "PASS default: warm-up + cosine over --steps; extending it notes the changed schedule"

# Bad schedule options fail before training, naming the option.
for bad in "--lr-schedule step" "--lr-decay-steps 10 --lr-decay-tokens 1M" "--lr-decay-tokens lots" \
           "--lr-wsd-decay-fraction 0"; do
  read -r -a args <<< "$bad"
  if "$run" "${common[@]}" --steps 2 "${args[@]}" > bad.log 2>&1; then fail "'$bad' was accepted"; fi
  grep -q "${args[0]#--}" bad.log || { cat bad.log; fail "'$bad': the error does not name ${args[0]}"; }
done
echo "PASS bad schedule options refused"
