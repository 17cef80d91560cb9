#!/usr/bin/env bash
# A checkpoint saved under one layout resumes under another. Per case: a reference run of
# 12 steps under layout A; 6 steps under A saving a checkpoint; steps 7-12 under layout B
# from it. B's losses must equal the reference's (max abs diff <= 1e-5: the layouts only
# order float sums differently) and so must its final parameters. The constant LR (no
# warm-up, no decay) makes "--steps 6" the first half of "--steps 12".
#   pp=2 -> pp=1 x dp=2          (stages -> whole model; the tied embedding saved once)
#   tp=2 -> 1 process            (tensor slices, q|k|v interleaved, -> whole tensors)
#   ZeRO-1 dp=2 -> 1 process     (sharded Adam moments -> whole)
#   tp=2 x dp=2 -> pp=2 x dp=2   (a grid change)
#   pp=2 x dp=2 -> tp=2 x dp=2 ZeRO-1 (whole moments -> tp-sliced ZeRO ranges)
source "$(dirname "$0")/lib.sh"
fortunes_tokens tokens.bin
common=(train --data tokens.bin --model gpt --n-layer 2 --n-embd 32 --n-head 4 --seq-len 32 --global-batch 8
        --micro-batch 2 --warmup 0 --min-lr-ratio 1 --seed 5 --threads 1 --log-every 1 --quiet)

# launch N ARGS...: one process, or N mpirun ranks.
launch() {
  local n=$1; shift
  if [ "$n" = 1 ]; then timeout 180 "$run" "$@"; else mpi "$n" "$@"; fi
}

# resume_case NAME RANKS_A "ARGS_A" RANKS_B "ARGS_B"
resume_case() {
  local name=$1 na=$2 nb=$4
  local -a a b
  read -r -a a <<< "$3"
  read -r -a b <<< "$5"
  launch "$na" "${common[@]}" "${a[@]}" --steps 12 --metrics "$name-ref.jsonl" --dump-params "$name-ref.bin" \
    2> "$name-ref.log" || { cat "$name-ref.log"; fail "$name: reference run failed"; }
  launch "$na" "${common[@]}" "${a[@]}" --steps 6 --metrics "$name-a.jsonl" --ckpt-dir "$name-ck" --ckpt-every 100 \
    2> "$name-a.log" || { cat "$name-a.log"; fail "$name: first half failed"; }
  [ -d "$name-ck/step-00000006" ] || { cat "$name-a.log"; fail "$name: no checkpoint at step 6"; }
  launch "$nb" "${common[@]}" "${b[@]}" --steps 12 --metrics "$name-b.jsonl" --dump-params "$name-b.bin" \
    --ckpt-dir "$name-ck" --ckpt-every 100 2> "$name-b.log" || { cat "$name-b.log"; fail "$name: resumed run failed"; }
  grep -qF "resumed from step-00000006 (restart #1, written by $na rank(s), now $nb)" "$name-b.log" ||
    { cat "$name-b.log"; fail "$name: did not resume the checkpoint"; }
  /usr/bin/python3 - "$name-ref.jsonl" "$name-b.jsonl" <<'PY' || fail "$name: continued losses differ from the reference"
import json, sys
ref, got = ({r["step"]: r["loss"] for r in map(json.loads, open(p)) if "loss" in r and not r.get("final")}
            for p in sys.argv[1:])
assert sorted(got) == list(range(7, 13)), f"resumed run logged steps {sorted(got)}, expected 7..12"
diff = max(abs(ref[s] - got[s]) for s in got)
print(f"max abs loss diff over steps 7-12: {diff:.2e}")
sys.exit(0 if diff <= 1e-5 else 1)
PY
  "$here/compare_params.py" "$name-ref.bin" "$name-b.bin" 1e-5 || fail "$name: final parameters differ from the reference"
  echo "PASS $name"
}

resume_case pp2-to-dp2 2 "--pp 2" 2 ""
resume_case tp2-to-single 2 "--tp 2" 1 ""
resume_case zero-to-single 2 "--zero 1" 1 ""
resume_case tp2dp2-to-pp2dp2 4 "--tp 2 --dp 2" 4 "--pp 2 --dp 2"
resume_case pp2dp2-to-tp2dp2zero 4 "--pp 2 --dp 2" 4 "--tp 2 --dp 2 --zero 1"
