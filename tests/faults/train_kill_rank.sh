# SIGKILL one rank of a real 2-rank training run while it trains (an asynchronous save is
# in flight, held by the test hook, so the kill is certain to land mid-run): the job dies,
# the rerun resumes from the last committed checkpoint and ends with the same
# params_checksum (and the same loss at every later step) as an uninterrupted run.
. "$(dirname "$0")/lib.sh"
ARGS=(--steps 24 --warmup 4)

reference 2 "${ARGS[@]}"

SCALEGUARD_TEST_PAUSE_IN_SAVE=60@12 train 2 "$WORK/killed.log" "${ARGS[@]}" --metrics "$WORK/killed.jsonl" \
  --ckpt-dir "$WORK/ck" --ckpt-every 4 --ckpt-async on &
launcher=$!
CLEANUP+=("kill -9 $launcher 2>/dev/null")
wait_for "$WORK/killed.log" "step-00000008 committed"
wait_for "$WORK/killed.log" "test pause"
kill -9 "$(cat "$WORK/pid.1")"
rc=0
wait "$launcher" || rc=$?
cat "$WORK/killed.log" >&2
[ "$rc" -ne 0 ] || fail "mpirun exited 0 although rank 1 was killed"
[ "$(rank_rc 1)" = 137 ] || fail "rank 1 exited $(rank_rc 1), expected 137 (SIGKILL)"
[ ! -e "$WORK/ck/step-00000012" ] || fail "the save in flight at the kill was committed"

train_ok rerun 2 "${ARGS[@]}" --ckpt-dir "$WORK/ck" --ckpt-every 4
[ "$(resumed_step "$WORK/rerun.log")" = 8 ] || fail "rerun did not resume from step-8, the last committed one"
grep -qF "removed the unfinished save $WORK/ck/step-00000012.partial" "$WORK/rerun.log" ||
  fail "the killed save's partial directory was not cleaned up"
same_as_reference rerun
echo "PASS: rank 1 killed after step 8 was committed; rerun resumed from step-8, params_checksum $REF"
