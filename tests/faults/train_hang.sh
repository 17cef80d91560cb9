# A rank stopped with SIGSTOP in a real 2-rank training run (mpirun, no Slurm): the other ranks'
# hang watchdogs (runner/src/health/) find its heartbeat stopped within the step limit, name it
# (rank, pid, section) in the log and in HEALTH_DIR/hang, log its stacks (same host), and exit 87;
# the stopped rank's own heartbeat file shows the step it stopped at. The rerun resumes from the
# last checkpoint and ends with the uninterrupted run's params_checksum.
. "$(dirname "$0")/lib.sh"
ARGS=(--steps 2000 --warmup 4 --straggler-every 0)
reference 2 "${ARGS[@]}"

train 2 "$WORK/hung.log" "${ARGS[@]}" --metrics "$WORK/hung.jsonl" --ckpt-dir "$WORK/ck" \
  --ckpt-every 50 --hang-step-floor-s 6 --hang-ckpt-floor-s 6 &
launcher=$!
CLEANUP+=("kill -9 $launcher 2>/dev/null")
wait_for "$WORK/hung.log" "step-00000100 committed"
kill -STOP "$(cat "$WORK/pid.1")"
CLEANUP+=("kill -9 $(cat "$WORK/pid.1") 2>/dev/null")
rc=0
wait "$launcher" || rc=$?
cat "$WORK/hung.log" >&2
[ "$(rank_rc 0)" = 87 ] || fail "rank 0 exited $(rank_rc 0), expected 87 (hang)"
grep -qE "hang: not progressing: rank=1 node=[^ ]+ pid=$(cat "$WORK/pid.1") .*why=heartbeat-stopped" "$WORK/hung.log" ||
  fail "the stopped rank 1 was not named"
grep -q "^rank=1 .*why=heartbeat-stopped" "$WORK/ck/health/hang" || fail "HEALTH_DIR/hang does not name rank 1"
grep -qF "hang: stacks of rank 1 (pid $(cat "$WORK/pid.1")" "$WORK/hung.log" || fail "no stacks of rank 1"
grep -q "do_signal_stop\|State:.*stopped" "$WORK/ck/health/stacks-rank-1" || fail "the stacks do not show a stopped process"
# Within the limit: rank 1's heartbeat was at most the limit and a heartbeat period old.
read -r limit age < <(sed -n 's/.*heartbeat_age_s=\([0-9.]*\) .*limit_s=\([0-9.]*\) .*/\2 \1/p' "$WORK/ck/health/hang" | head -1)
awk -v a="$age" -v l="$limit" 'BEGIN { exit !(a <= l + 2.5) }' || fail "detected after $age s, limit $limit s"
echo "hang detected: rank 1's heartbeat $age s old, step limit $limit s" >&2

kill -9 "$(cat "$WORK/pid.1")" 2>/dev/null || true
train_ok rerun 2 "${ARGS[@]}" --ckpt-dir "$WORK/ck" --ckpt-every 50
[ -n "$(resumed_step "$WORK/rerun.log")" ] || fail "the rerun did not resume"
# The final parameters (2000 logged steps: same_losses's `head -1` would cut jq off under pipefail).
same_checksum rerun
echo "PASS: SIGSTOP'd rank 1 named within the limit, rank 0 exited 87, the rerun resumed to the same parameters"
