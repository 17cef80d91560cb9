#!/usr/bin/env bash
# Issue 26 items 4 and 5: a user's TorchScript model (--model-file) on a user's array data
# (HDF5 x/y, .npy pairs). make_script_model.py writes a scripted small CNN and a 96-image
# HDF5 set (4 classes: the brightest quadrant), the same arrays as .npy, and bad files.
#  - dp=2 trains exactly what 1 rank accumulating the same two micro-batches trains
#    (parameters <= 1e-6 apart, the same loss at every step: dp_equals_single.sh's check);
#  - the .npy pair gives the HDF5 set's losses bit for bit (same rows, same sampler);
#  - ZeRO-1 on 2 ranks trains like plain dp=2 (<= 1e-6), top-k runs;
#  - resume: 6 steps with a checkpoint, then to 12, equals an uninterrupted 12-step run
#    bit for bit (losses and params_checksum), on 2 ranks and from dp=2 onto 1 rank;
#  - float y (MSE regression on .npy, float64 x converted) trains and its loss falls;
#  - traced, frozen, buffer-holding modules, tp/pp/bf16 with a module, and bad data files
#    are refused on every rank with a message naming the file and the problem.
source "$(dirname "$0")/lib.sh"
/usr/bin/python3 -c 'import torch, h5py, numpy' 2>/dev/null ||
  fail "needs python3-torch, python3-h5py and python3-numpy (/usr/bin/python3)"
/usr/bin/python3 "$here/make_script_model.py" || fail "could not write the model and data files"

args=(train --verbose --model-file cnn.pt --data images.h5 --steps 20 --global-batch 8 --lr 3e-2 --warmup 2 --seed 7
      --threads 1 --log-every 1 --quiet)
"$run" "${args[@]}" --micro-batch 4 --metrics one.jsonl --dump-params one.bin 2> one.log ||
  { cat one.log; fail "1 rank failed"; }
grep -q "data h5 images.h5: x float32 (96, 1, 8, 8) -> float32, y int64 (96,) -> int64" one.log ||
  { cat one.log; fail "the data line does not describe the HDF5 set"; }
mpi 2 "${args[@]}" --metrics two.jsonl --dump-params two.bin 2> two.log || { cat two.log; fail "dp=2 failed"; }
[ "$(grep -c '"step"' two.jsonl)" -eq 21 ] || fail "expected 20 step lines + final in the metrics"
"$here/compare_params.py" one.bin two.bin 1e-6 || fail "dp=2 differs from 1 rank"
diff <(grep -o '"loss":[^,]*' one.jsonl) <(grep -o '"loss":[^,]*' two.jsonl) || fail "dp=2 losses differ from 1 rank"
/usr/bin/python3 - one.jsonl <<'PY' || fail "the CNN did not learn (loss did not fall)"
import json, sys
l = [r["loss"] for r in map(json.loads, open(sys.argv[1])) if "loss" in r and not r.get("final")]
print(f"CNN loss {l[0]:.4f} -> {l[-1]:.4f}")
sys.exit(0 if sum(l[-4:]) / 4 < 0.7 * sum(l[:4]) / 4 else 1)
PY
echo "PASS dp=2 equals 1 rank: $(final_field one.jsonl params_checksum) / $(final_field two.jsonl params_checksum)"

# The same arrays as .npy: the same samples, the same losses.
mpi 2 "${args[@]/images.h5/npy}" --metrics npy.jsonl 2> npy.log || { cat npy.log; fail "npy dp=2 failed"; }
grep -q "data npy npy:" npy.log || { cat npy.log; fail "npy not detected"; }
expect_same_run two.jsonl npy.jsonl
echo "PASS npy pair = HDF5 set"

# Evaluation (--eval-*), where an array row counts as seq-len (64) tokens: one rank and dp=2
# evaluate the same 32 rows to the same loss. A module with dropout is evaluated in inference
# mode: with lr 1e-30 its parameters stay put, so every evaluation gives the same loss (in
# training mode each would draw new dropout masks).
ev=(--eval-data npy --eval-every 10 --eval-tokens $((32 * 64)))
"$run" "${args[@]}" --micro-batch 4 "${ev[@]}" --metrics ev1.jsonl 2> ev1.log || { cat ev1.log; fail "1 rank with evaluation failed"; }
mpi 2 "${args[@]}" "${ev[@]}" --metrics ev2.jsonl 2> ev2.log || { cat ev2.log; fail "dp=2 with evaluation failed"; }
"$run" train --model-file drop.pt --data images.h5 --steps 3 --global-batch 8 --lr 1e-30 --warmup 0 --threads 1 --quiet \
  --eval-data images.h5 --eval-every 1 --eval-tokens $((32 * 64)) --metrics drop.jsonl 2> drop.log ||
  { cat drop.log; fail "dropout module with evaluation failed"; }
/usr/bin/python3 - ev1.jsonl ev2.jsonl drop.jsonl <<'PY' || fail "module evaluation"
import json, sys
one, two, drop = ({r["eval_step"]: r["eval_loss"] for r in map(json.loads, open(p)) if "eval_loss" in r} for p in sys.argv[1:])
assert sorted(one) == [10, 20] and sorted(two) == [10, 20], f"evaluated after {sorted(one)} / {sorted(two)}"
assert max(abs(one[s] - two[s]) for s in one) <= 1e-6, f"dp=2 {two} vs one rank {one}"
assert sorted(drop) == [1, 2, 3] and len(set(drop.values())) == 1, f"dropout module's evaluations differ: {drop}"
print(f"PASS module evaluation: one rank {one}, dp=2 {two}; dropout module {drop}")
PY

# ZeRO-1 and top-k with the module.
mpi 2 "${args[@]}" --zero 1 --metrics zero.jsonl --dump-params zero.bin 2> zero.log || { cat zero.log; fail "ZeRO-1 failed"; }
"$here/compare_params.py" two.bin zero.bin 1e-6 || fail "ZeRO-1 differs from plain dp=2"
mpi 2 "${args[@]}" --compress topk:0.1 --metrics topk.jsonl 2> topk.log || { cat topk.log; fail "top-k failed"; }
echo "PASS ZeRO-1 = dp=2; top-k ran (final loss $(final_field topk.jsonl loss))"

# Resume bit-exactly: 2 ranks, and a dp=2 checkpoint continued on 1 rank.
# A constant learning rate: the schedule depends on --steps, which differs between the halves.
common=(train --model-file cnn.pt --data images.h5 --global-batch 8 --lr 1e-2 --warmup 0 --min-lr-ratio 1 --seed 7
        --threads 1 --log-every 1 --quiet)
mpi 2 "${common[@]}" --steps 12 --metrics ref.jsonl 2> ref.log || { cat ref.log; fail "reference run failed"; }
mpi 2 "${common[@]}" --steps 6 --ckpt-dir ck --ckpt-every 3 --metrics a.jsonl 2> a.log || { cat a.log; fail "first half failed"; }
cp -r ck ck1
mpi 2 "${common[@]}" --steps 12 --ckpt-dir ck --ckpt-every 100 --metrics b.jsonl 2> b.log || { cat b.log; fail "resume failed"; }
grep -qF "resumed from step-00000006" b.log || { cat b.log; fail "did not resume"; }
expect_same_run ref.jsonl b.jsonl
"$run" "${common[@]}" --micro-batch 4 --steps 12 --ckpt-dir ck1 --ckpt-every 100 --metrics c.jsonl 2> c.log ||
  { cat c.log; fail "resume on 1 rank failed"; }
grep -qF "resumed from step-00000006" c.log || { cat c.log; fail "1 rank did not resume"; }
expect_same_run ref.jsonl c.jsonl
echo "PASS resumed at step 6 bit-exactly (2 ranks, and dp=2 -> 1 rank): $(final_field b.jsonl params_checksum)"

# Float y: mean squared error.
"$run" train --verbose --model-file reg.pt --data reg --steps 30 --global-batch 8 --lr 1e-2 --warmup 0 --seed 3 --threads 1 \
  --log-every 1 --quiet --metrics reg.jsonl 2> reg.log || { cat reg.log; fail "regression failed"; }
grep -q "x float64 (40, 64) -> float32, y float32 (40, 2) -> float32" reg.log || { cat reg.log; fail "npy float64 not described"; }
/usr/bin/python3 - reg.jsonl <<'PY' || fail "the MSE loss did not fall"
import json, sys
l = [r["loss"] for r in map(json.loads, open(sys.argv[1])) if "loss" in r and not r.get("final")]
print(f"MSE {l[0]:.4f} -> {l[-1]:.4f}")
sys.exit(0 if sum(l[-5:]) < 0.8 * sum(l[:5]) else 1)
PY

# Refusals: every rank exits 1 (mpi_rc) and rank 0 says why.
refuse() {  # refuse NAME EXPECTED-TEXT ARGS...
  local name=$1 want=$2; shift 2
  if mpi_rc 2 "rc-$name" "$@" > "$name.log" 2>&1; then cat "$name.log"; fail "$name: accepted"; fi
  for r in 0 1; do [ "$(cat "rc-$name.$r" 2>/dev/null)" = 1 ] || { cat "$name.log"; fail "$name: rank $r exit '$(cat "rc-$name.$r" 2>/dev/null)', expected 1"; }; done
  grep -qF -- "$want" "$name.log" || { cat "$name.log"; fail "$name: no '$want'"; }
  echo "PASS refused $name: $(grep -F -- "$want" "$name.log" | head -1 | cut -c1-160)"
}
base=(train --data images.h5 --steps 2 --global-batch 8 --threads 1 --quiet)
refuse traced "traced.pt: a traced module (torch.jit.trace) is refused" "${base[@]}" --model-file traced.pt
refuse frozen "frozen.pt: the module has no parameters: a frozen module" "${base[@]}" --model-file frozen.pt
refuse buffers "bn.pt: the module has buffers (bn.running_mean" "${base[@]}" --model-file bn.pt
refuse notscript "cannot load as TorchScript" "${base[@]}" --model-file images.h5
refuse pp "tensor parallel (tp=1) and pipeline parallel (pp=2) need the built-in gpt model" "${base[@]}" --model-file cnn.pt --pp 2
refuse tp "tensor parallel (tp=2) and pipeline parallel (pp=1) need the built-in gpt model" "${base[@]}" --model-file cnn.pt --tp 2
refuse bf16 "precision bf16 / recompute none are implemented inside the built-in models only" "${base[@]}" --model-file cnn.pt --precision bf16
m=(train --model-file cnn.pt --steps 2 --global-batch 8 --threads 1 --quiet)
refuse mismatch "data mismatch.h5: mismatched sample counts: x has 96 samples (96, 1, 8, 8), y has 90 (90,)" "${m[@]}" --data mismatch.h5
refuse noy "data noy.h5: no dataset 'y'" "${m[@]}" --data noy.h5
refuse strings "data strings.h5: dataset 'y' has an unsupported dtype (HDF5 string, 1 bytes)" "${m[@]}" --data strings.h5
refuse complex "data cplx/y.npy: unsupported dtype '<c8'" "${m[@]}" --data cplx
refuse trunc "data trunc/y.npy: truncated npy header" "${m[@]}" --data trunc
refuse short "data short/x.npy: truncated: shape (96, 1, 8, 8) of <f4 needs" "${m[@]}" --data short
refuse missing "data nowhere/x.npy: cannot open" "${m[@]}" --data nowhere/x.npy
# An output that does not fit y fails at the first step (a training error: the ranks abort).
if "$run" train --model-file reg.pt --data regbad --steps 2 --global-batch 8 --threads 1 --quiet > shape.log 2>&1; then
  cat shape.log; fail "a (B, 2) output for float y (B, 3) was accepted"
fi
grep -qF "float targets y (8, 3) take the mean squared error, but the model's output is (8, 2)" shape.log ||
  { cat shape.log; fail "no shape message"; }
echo "PASS wrong output shape named"
