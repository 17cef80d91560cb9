# Disk full while the real trainer saves (a tmpfs sized for two checkpoints of the model):
# the third save fails cleanly naming ENOSPC, the committed checkpoints stay intact, and
# training follows --ckpt-on-error: stop exits 1 with the reason, continue trains to the end.
. "$(dirname "$0")/lib.sh"
ARGS=(--steps 12 --ckpt-every 2 --ckpt-keep 0 --ckpt-async off)

# How big is one checkpoint of this model on 2 ranks?
expect_rc 0 timeout 120 "$MPIEXEC" -np 2 --oversubscribe --bind-to none "$SCALEGUARD_RUN" train "${MODEL[@]}" \
  --steps 1 --ckpt-dir "$WORK/probe"
one=$(du -sb "$WORK/probe/step-00000001" | cut -f1)
# Two checkpoints fit, a third does not (tmpfs counts whole pages: some slack).
size_kb=$(( (one * 5 / 2) / 1024 + 8 ))

mnt=$WORK/mnt
mkdir -p "$mnt"
if mount -t tmpfs -o size=${size_kb}k tmpfs "$mnt" 2>/dev/null; then
  CLEANUP=("umount $mnt" "${CLEANUP[@]}")
else
  echo "SKIP: cannot mount a tmpfs here (needs root)"
  exit 77
fi

for choice in stop continue; do
  rm -rf "${mnt:?}"/*
  rc=0
  train 2 "$WORK/$choice.log" "${ARGS[@]}" --ckpt-dir "$mnt/ck" --ckpt-on-error "$choice" --metrics "$WORK/$choice.jsonl" || rc=$?
  cat "$WORK/$choice.log" >&2
  grep -qF "step-00000004 committed" "$WORK/$choice.log" || fail "$choice: the first two saves did not commit"
  grep -q "save failed: .*No space left on device.*; the previous checkpoint is kept" "$WORK/$choice.log" ||
    fail "$choice: no clear ENOSPC message"
  ls "$mnt/ck" | grep -q partial && fail "$choice: a partial directory was left behind"
  expect_rc 0 "$SCALEGUARD_CLI" ckpt verify "$mnt/ck"
  if [ "$choice" = stop ]; then
    [ "$rc" -eq 1 ] || fail "stop: mpirun exited $rc, expected 1"
    grep -qF "(--ckpt-on-error stop)" "$WORK/stop.log" || fail "stop: the reason for stopping is not given"
    grep -q '"final":true' "$WORK/stop.jsonl" && fail "stop: training went on to the end"
  else
    [ "$rc" -eq 0 ] || fail "continue: mpirun exited $rc, expected 0"
    grep -qF "training continues (--ckpt-on-error continue)" "$WORK/continue.log" || fail "continue: not said"
    [ "$(jq -r 'select(.final == true) | .step' "$WORK/continue.jsonl")" = 12 ] || fail "continue: did not train to the end"
  fi
done
echo PASS
