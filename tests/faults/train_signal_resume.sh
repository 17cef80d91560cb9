# SIGUSR1 (Slurm's warning before preemption or the time limit) to one rank of a real
# 2-rank training run: every rank stops at the same step boundary, the checkpoint of that
# step is committed, and both exit 85. Twice; the third run finishes. Every later step's
# loss and the final params_checksum equal an uninterrupted run's, and the restart count
# goes on from the checkpoint (restart #1, then #2).
. "$(dirname "$0")/lib.sh"
ARGS=(--steps 30 --warmup 5)   # cosine schedule: the LR must resume exactly too

reference 2 "${ARGS[@]}"

# stop_run N PAUSE ASYNC: run N pauses 3 s inside the save of step PAUSE (test hook); the
# signal arrives while it is held there, so the stop is certain to come mid-run.
stop_run() {
  local n=$1
  SCALEGUARD_TEST_PAUSE_IN_SAVE=3@$2 train 2 "$WORK/run$n.log" "${ARGS[@]}" --metrics "$WORK/run$n.jsonl" \
    --ckpt-dir "$WORK/ck" --ckpt-every 4 --ckpt-async "$3" &
  local launcher=$!
  CLEANUP+=("kill -9 $launcher 2>/dev/null")
  wait_for "$WORK/run$n.log" "test pause"
  kill -USR1 "$(cat "$WORK/pid.1")"
  wait "$launcher" || true
  cat "$WORK/run$n.log" >&2
  for r in 0 1; do
    [ "$(rank_rc $r)" = 85 ] || fail "run $n: rank $r exited $(rank_rc $r), expected 85 (stopped after the checkpoint)"
  done
  local stopped
  stopped=$(sed -n 's/.*stop requested (signal) at step \([0-9]*\).*/\1/p' "$WORK/run$n.log")
  [ -n "$stopped" ] || fail "run $n: no stop message"
  grep -qF "$(printf 'step-%08d committed' "$stopped")" "$WORK/run$n.log" ||
    fail "run $n: stopped at step $stopped without committing its checkpoint"
  [ -d "$WORK/ck/$(printf 'step-%08d' "$stopped")" ] || fail "run $n: step $stopped not on disk"
  STOPPED=$stopped
}

stop_run 1 8 off     # sync saves
first=$STOPPED
stop_run 2 16 on     # async saves (the held write runs beside training)
second=$STOPPED
[ "$(resumed_step "$WORK/run2.log")" = "$first" ] || fail "run 2 did not resume from step $first"
grep -qF "(restart #1," "$WORK/run2.log" || fail "run 2 is not restart #1"
same_losses "$WORK/ref.jsonl" "$WORK/run2.jsonl"

train_ok run3 2 "${ARGS[@]}" --ckpt-dir "$WORK/ck" --ckpt-every 4
[ "$(resumed_step "$WORK/run3.log")" = "$second" ] || fail "run 3 did not resume from step $second"
grep -qF "(restart #2," "$WORK/run3.log" || fail "run 3 is not restart #2 (the count must persist)"
same_as_reference run3
echo "PASS: stopped at steps $first and $second, resumed twice, params_checksum $REF = uninterrupted"
