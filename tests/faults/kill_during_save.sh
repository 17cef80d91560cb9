# SIGKILL a rank while it is inside a save (held there by the test pause hook): the partial
# directory is never loaded, the previous checkpoint is used, and the partial is removed.
. "$(dirname "$0")/lib.sh"

expect_rc 0 ranks 2 save --dir "$WORK/k" --steps 1

SCALEGUARD_TEST_PAUSE_IN_SAVE=120 "$MPIEXEC" -np 2 --oversubscribe --bind-to none \
  -x SCALEGUARD_TEST_PAUSE_IN_SAVE "$CKPT_TOOL" save --dir "$WORK/k" --steps 2 >"$WORK/save.log" 2>&1 &
mpirun_pid=$!
CLEANUP+=("kill -9 $mpirun_pid 2>/dev/null")
victim=""
for _ in $(seq 1 600); do
  victim=$(sed -n 's/.*test pause.*(pid \([0-9]*\)).*/\1/p' "$WORK/save.log" | head -1)
  [ -n "$victim" ] && break
  sleep 0.1
done
[ -n "$victim" ] || { cat "$WORK/save.log"; fail "the save never reached the pause hook"; }
kill -9 "$victim"
rc=0
wait "$mpirun_pid" || rc=$?
cat "$WORK/save.log" >&2
[ "$rc" -ne 0 ] || fail "mpirun exited 0 although a rank was killed"
[ -d "$WORK/k/step-00000002.partial" ] || fail "no partial directory left by the killed save"
[ ! -e "$WORK/k/step-00000002" ] || fail "the killed save was committed"

expect_rc 0 "$SCALEGUARD_CLI" ckpt ls "$WORK/k"
expect_log "partial (ignored"
expect_rc 0 ranks 2 load --dir "$WORK/k" --expect-step 1
expect_log "removed the unfinished save $WORK/k/step-00000002.partial"
[ ! -e "$WORK/k/step-00000002.partial" ] || fail "partial directory not cleaned up"

# The same step saves and loads normally afterwards.
expect_rc 0 ranks 2 save --dir "$WORK/k" --steps 2
expect_rc 0 ranks 2 load --dir "$WORK/k" --expect-step 2
echo PASS
