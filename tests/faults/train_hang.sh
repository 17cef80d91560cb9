# A rank stopped with SIGSTOP in a real 3-rank training run (mpirun, no Slurm): the other ranks'
# hang watchdogs (runner/src/health/) find its heartbeat stopped within the step limit, name it
# (rank, pid, section) in the log and in HEALTH_DIR/hang, log its stacks (same host), and exit 87;
# the stopped rank's own heartbeat file shows the step it stopped at. The rerun resumes from the
# last checkpoint and ends with the uninterrupted run's params_checksum.
. "$(dirname "$0")/lib.sh"
ARGS=(--steps 2000 --warmup 4 --global-batch 6 --straggler-every 0)
reference 3 "${ARGS[@]}"

train 3 "$WORK/hung.log" "${ARGS[@]}" --metrics "$WORK/hung.jsonl" --ckpt-dir "$WORK/ck" \
  --ckpt-every 50 --hang-step-floor-s 6 --hang-ckpt-floor-s 6 &
launcher=$!
CLEANUP+=("kill -9 $launcher 2>/dev/null")
wait_for "$WORK/hung.log" "step-00000100 committed"
kill -STOP "$(cat "$WORK/pid.2")"
CLEANUP+=("kill -9 $(cat "$WORK/pid.2") 2>/dev/null")
rc=0
wait "$launcher" || rc=$?
cat "$WORK/hung.log" >&2
[ "$(rank_rc 0)" = 87 ] || fail "rank 0 exited $(rank_rc 0), expected 87 (hang)"
[ "$(rank_rc 1)" = 87 ] || fail "rank 1 exited $(rank_rc 1), expected 87 (hang)"
grep -qE "hang: not progressing: rank=2 node=[^ ]+ pid=$(cat "$WORK/pid.2") .*why=heartbeat-stopped" "$WORK/hung.log" ||
  fail "the stopped rank 2 was not named"
grep -q "^rank=2 .*why=heartbeat-stopped" "$WORK/ck/health/hang" || fail "HEALTH_DIR/hang does not name rank 2"
grep -qF "hang: stacks of rank 2 (pid $(cat "$WORK/pid.2")" "$WORK/hung.log" || fail "no stacks of rank 2"
grep -q "do_signal_stop\|State:.*stopped" "$WORK/ck/health/stacks-rank-2" || fail "the stacks do not show a stopped process"
# Within the limit: rank 2's heartbeat was at most the limit and a heartbeat period old.
read -r limit age < <(sed -n 's/.*heartbeat_age_s=\([0-9.]*\) .*limit_s=\([0-9.]*\) .*/\2 \1/p' "$WORK/ck/health/hang" | head -1)
awk -v a="$age" -v l="$limit" 'BEGIN { exit !(a <= l + 2.5) }' || fail "detected after $age s, limit $limit s"
echo "hang detected: rank 2's heartbeat $age s old, step limit $limit s" >&2

kill -9 "$(cat "$WORK/pid.2")" 2>/dev/null || true
train_ok rerun 3 "${ARGS[@]}" --ckpt-dir "$WORK/ck" --ckpt-every 50
[ -n "$(resumed_step "$WORK/rerun.log")" ] || fail "the rerun did not resume"
same_as_reference rerun
echo "PASS: SIGSTOP'd rank 2 named within the limit, ranks 0 and 1 exited 87, the rerun resumed to the same parameters"
