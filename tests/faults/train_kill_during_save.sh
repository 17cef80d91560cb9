# SIGKILL a rank of a real training run while it is inside a synchronous save (held there
# by the test hook): the partial checkpoint is never committed, the rerun removes it,
# resumes from the previous checkpoint and ends bit-identical to an uninterrupted run.
# Then flipped bytes in the newest checkpoint: named in the log, the previous one is used,
# and the result is still identical.
. "$(dirname "$0")/lib.sh"
ARGS=(--steps 20 --warmup 3)

reference 2 "${ARGS[@]}"

SCALEGUARD_TEST_PAUSE_IN_SAVE=120@10 train 2 "$WORK/killed.log" "${ARGS[@]}" --metrics "$WORK/killed.jsonl" \
  --ckpt-dir "$WORK/ck" --ckpt-every 5 --ckpt-async off &
launcher=$!
CLEANUP+=("kill -9 $launcher 2>/dev/null")
wait_for "$WORK/killed.log" "test pause"
victim=$(sed -n 's/.*test pause.*(pid \([0-9]*\)).*/\1/p' "$WORK/killed.log" | head -1)
kill -9 "$victim"
wait "$launcher" && fail "mpirun exited 0 although a rank was killed inside a save"
cat "$WORK/killed.log" >&2
[ -d "$WORK/ck/step-00000010.partial" ] || fail "no partial directory left by the killed save"
[ ! -e "$WORK/ck/step-00000010" ] || fail "the killed save was committed"
expect_rc 0 "$SCALEGUARD_CLI" ckpt ls "$WORK/ck"
expect_log "partial (ignored"

train_ok rerun 2 "${ARGS[@]}" --ckpt-dir "$WORK/ck" --ckpt-every 5 --ckpt-keep 0
grep -qF "removed the unfinished save $WORK/ck/step-00000010.partial" "$WORK/rerun.log" ||
  fail "the partial directory was not cleaned up"
[ "$(resumed_step "$WORK/rerun.log")" = 5 ] || fail "rerun did not resume from step-5"
same_as_reference rerun

# The rerun committed steps 10, 15 and 20 (the last at the end of training). Flip bytes in
# the middle of step 20's shard of rank 1: the resume names the file and takes step 15,
# and training from there to step 20 ends identical again.
shard=$WORK/ck/step-00000020/shard-1.h5
size=$(stat -c %s "$shard")
printf '\xde\xad\xbe\xef' | dd of="$shard" bs=1 seek=$((size / 2)) conv=notrunc status=none
train_ok corrupt 2 "${ARGS[@]}" --ckpt-dir "$WORK/ck" --ckpt-every 5 --ckpt-keep 0
grep -q "skipping $WORK/ck/step-00000020.*shard-1.h5" "$WORK/corrupt.log" || fail "the corrupt shard is not named"
[ "$(resumed_step "$WORK/corrupt.log")" = 15 ] || fail "did not fall back to step-15"
same_checksum corrupt
echo "PASS: killed save ignored and removed; corrupt newest skipped; both ended at params_checksum $REF"
