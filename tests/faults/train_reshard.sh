# A data-parallel checkpoint resumes on another world size: 2 ranks train to step 12, then
# 1 rank (accumulating the same two micro-batches per step) continues to step 24, and
# 2 ranks again from a 1-rank checkpoint. The constant LR (no warm-up, no decay) makes
# "--steps 12" the same run as the first 12 steps of "--steps 24". Gradient sums of two
# values commute, so the result is bit-identical to 2 ranks training all 24 steps.
. "$(dirname "$0")/lib.sh"
ARGS=(--warmup 0 --min-lr-ratio 1 --micro-batch 4)

reference 2 --steps 24 "${ARGS[@]}"

train_ok a 2 --steps 12 "${ARGS[@]}" --ckpt-dir "$WORK/ck" --ckpt-every 100
[ -d "$WORK/ck/step-00000012" ] || fail "the end of training was not checkpointed"
jq -e '.world_size == 2 and .dp == 2' "$WORK/ck/step-00000012/manifest.json" >/dev/null || fail "manifest layout"

train_ok b 1 --steps 18 "${ARGS[@]}" --ckpt-dir "$WORK/ck" --ckpt-every 100
grep -qF "resumed from step-00000012 (restart #1, written by 2 rank(s), now 1)" "$WORK/b.log" ||
  fail "1 rank did not resume the 2-rank checkpoint"
same_losses "$WORK/ref.jsonl" "$WORK/b.jsonl"

train_ok c 2 --steps 24 "${ARGS[@]}" --ckpt-dir "$WORK/ck" --ckpt-every 100
grep -qF "resumed from step-00000018 (restart #2, written by 1 rank(s), now 2)" "$WORK/c.log" ||
  fail "2 ranks did not resume the 1-rank checkpoint"
same_as_reference c
echo "PASS: 2 -> 1 -> 2 ranks, params_checksum $REF = uninterrupted 2-rank run"
