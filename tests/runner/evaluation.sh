#!/usr/bin/env bash
# Evaluation (--eval-data, --eval-every, --eval-tokens): a forward pass over held-out data,
# the cadence `scaleguard plan --eval-every --eval-tokens` prices.
#  1. A GPT on fortunes with the `wisdom` file held out: the held-out loss is logged after
#     steps 10, 20 and 30 only, over --eval-tokens rounded up to whole windows and
#     micro-batches, and falls.
#  2. Evaluating does not change training: the same step losses and final checksum as the
#     same run without it.
#  3. Every layout evaluates the same windows to the same loss: dp=2, ZeRO-3 over dp=2,
#     tp=2, pp=2 (1F1B) and tp=2 x pp=2 within 1e-4 of one process (as their training
#     losses are: the layouts only order float sums differently).
#  4. A dp=2 run stopped at step 6 and resumed logs the uninterrupted run's held-out losses
#     after steps 8 and 12, exactly.
#  5. Bad input fails before training, naming what is wrong.
source "$(dirname "$0")/lib.sh"
mapfile -t corpus < <(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.*' ! -name wisdom | sort)
[ "${#corpus[@]}" -gt 10 ] || fail "no fortunes corpus under /usr/share/games/fortunes (apt-get install fortunes)"
"$run" prep --input "${corpus[@]}" --output train.bin
"$run" prep --input /usr/share/games/fortunes/wisdom --output held.bin

base=(train --verbose --data train.bin --model gpt --n-layer 2 --n-embd 32 --n-head 4 --seq-len 32 --global-batch 8
      --micro-batch 2 --lr 3e-3 --seed 5 --threads 1 --log-every 1 --quiet)
gpt=("${base[@]}" --warmup 2)
evals() {  # evals FILE: "step loss" per evaluation
  /usr/bin/python3 -c 'import json,sys
for r in map(json.loads, open(sys.argv[1])):
    if "eval_loss" in r: print(r["eval_step"], r["eval_loss"], r["eval_tokens"])' "$1"
}

# ---- 1. held-out loss, at the cadence, over the planned tokens ---------------------------
# 1000 tokens = 32 windows of 32 (31.25 rounded up), a whole number of micro-batches of 2.
"$run" "${gpt[@]}" --steps 30 --eval-data held.bin --eval-every 10 --eval-tokens 1000 --metrics m.jsonl 2> m.log ||
  { cat m.log; fail "evaluated run failed"; }
grep -qF "evaluation every 10 steps on the first 32 windows of held.bin (1024 tokens" m.log ||
  { cat m.log; fail "no evaluation start-up line with 32 windows"; }
evals m.jsonl > evals.txt
[ "$(cut -d' ' -f1 evals.txt | tr '\n' ' ')" = "10 20 30 " ] || { cat evals.txt; fail "evaluated after steps other than 10, 20, 30"; }
[ "$(cut -d' ' -f3 evals.txt | sort -u)" = 1024 ] || { cat evals.txt; fail "an evaluation did not read 1024 tokens"; }
read -r _ e10 _ < <(sed -n 1p evals.txt); read -r _ e30 _ < <(sed -n 3p evals.txt)
/usr/bin/python3 -c "import sys; sys.exit(0 if $e30 < $e10 - 0.2 and $e10 < 5.5 else 1)" ||
  fail "held-out loss did not fall: $e10 -> $e30"
echo "PASS held-out loss after steps 10, 20, 30 over 1024 tokens: $e10 -> $e30"

# ---- 2. evaluation leaves training alone ------------------------------------------------
"$run" "${gpt[@]}" --steps 30 --metrics plain.jsonl 2> plain.log || { cat plain.log; fail "plain run failed"; }
same_run plain.jsonl m.jsonl || fail "evaluating changed the training"
echo "PASS the same step losses and params_checksum with and without evaluation"

# ---- 3. every layout, the same held-out loss ----------------------------------------------
# 512 tokens = 16 windows: 8 micro-batches of 2 on one rank, 4 on each of 2 dp ranks.
layout=("${gpt[@]}" --steps 12 --eval-data held.bin --eval-every 4 --eval-tokens 512)
"$run" "${layout[@]}" --metrics one.jsonl 2> one.log || { cat one.log; fail "1 rank failed"; }
check_layout() {  # check_layout NAME RANKS ARGS...
  local name=$1 n=$2; shift 2
  mpi "$n" "${layout[@]}" "$@" --metrics "$name.jsonl" 2> "$name.log" || { cat "$name.log"; fail "$name failed"; }
  /usr/bin/python3 - one.jsonl "$name.jsonl" <<'PY' || fail "$name: held-out losses differ from one process"
import json, sys
ref, got = ({r["eval_step"]: r["eval_loss"] for r in map(json.loads, open(p)) if "eval_loss" in r} for p in sys.argv[1:])
assert sorted(ref) == [4, 8, 12] and sorted(got) == sorted(ref), f"evaluations after {sorted(got)}, want {sorted(ref)}"
diff = max(abs(ref[s] - got[s]) for s in ref)
print(f"{sys.argv[2]}: held-out losses {[round(got[s], 4) for s in sorted(got)]}, max diff to one process {diff:.2e}")
sys.exit(0 if diff <= 1e-4 else 1)
PY
}
check_layout dp2 2
check_layout zero3 2 --zero 3
check_layout tp2 2 --tp 2
check_layout pp2 2 --pp 2
check_layout tp2pp2 4 --tp 2 --pp 2
echo "PASS dp=2, ZeRO-3, tp=2, pp=2 and tp=2 x pp=2 evaluate like one process"

# ---- 4. exact resume ----------------------------------------------------------------------
flat=("${base[@]}" --eval-data held.bin --eval-every 4 --eval-tokens 512 --warmup 0 --min-lr-ratio 1)
# A constant learning rate: "--steps 6" is then the first half of "--steps 12".
mpi 2 "${flat[@]}" --steps 12 --metrics ref.jsonl 2> ref.log || { cat ref.log; fail "reference failed"; }
mpi 2 "${flat[@]}" --steps 6 --ckpt-dir ck --ckpt-every 100 --metrics a.jsonl 2> a.log || { cat a.log; fail "first half failed"; }
mpi 2 "${flat[@]}" --steps 12 --ckpt-dir ck --ckpt-every 100 --metrics b.jsonl 2> b.log || { cat b.log; fail "resumed run failed"; }
grep -qF "resumed from step-00000006" b.log || { cat b.log; fail "did not resume from step 6"; }
[ "$(evals b.jsonl)" = "$(evals ref.jsonl | tail -n 2)" ] ||
  fail "resumed held-out losses $(evals b.jsonl | tr '\n' ' ') differ from the uninterrupted $(evals ref.jsonl | tr '\n' ' ')"
echo "PASS resumed at step 6: held-out losses after 8 and 12 equal the uninterrupted run's"

# ---- 5. bad input -------------------------------------------------------------------------
bad() {  # bad NAME PATTERN ARGS...
  local name=$1 pattern=$2; shift 2
  if "$run" "${gpt[@]}" --steps 2 "$@" 2> "$name.log"; then fail "$name: accepted"; fi
  grep -qE -- "$pattern" "$name.log" || { cat "$name.log"; fail "$name: no message matching '$pattern'"; }
  echo "PASS $name refused: $(grep -m1 -oE -- "$pattern.*" "$name.log" | head -c 160)"
}
bad no_data "--eval-every 5 needs --eval-data" --eval-every 5
bad no_every "--eval-data needs --eval-every" --eval-data held.bin
bad bad_tokens "eval-tokens: 'lots' is not a token count" --eval-data held.bin --eval-every 1 --eval-tokens lots
bad too_few "needs [0-9]+ windows of seq-len 32 .* holds [0-9]+: give fewer --eval-tokens" \
  --eval-data held.bin --eval-every 1 --eval-tokens 10M
bad missing "token file 'nope.bin'" --eval-data nope.bin --eval-every 1
mkdir npy && /usr/bin/python3 - <<'PY'
def save(path, descr, shape, itemsize):  # a .npy v1.0 file of zeros (no numpy here)
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, repr(shape))
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    n = 1
    for d in shape: n *= d
    open(path, "wb").write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + bytes(n * itemsize))
save("npy/x.npy", "<f4", (4, 8), 4)
save("npy/y.npy", "<i8", (4,), 8)
PY
bad arrays_for_tokens "is an array dataset but the training data is tokens" --eval-data npy --eval-every 1
