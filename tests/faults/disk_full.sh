# Disk full during a save (a 1 MiB tmpfs, or a small loop ext4 where tmpfs cannot be
# mounted): a clean failure naming ENOSPC, no partial left, the previous checkpoint intact;
# on_save_error decides whether the run stops or continues.
. "$(dirname "$0")/lib.sh"

mnt=$WORK/mnt
mkdir -p "$mnt"
if mount -t tmpfs -o size=1m tmpfs "$mnt" 2>/dev/null; then
  CLEANUP=("umount $mnt" "${CLEANUP[@]}")
elif truncate -s 4m "$WORK/fs.img" && mkfs.ext4 -q "$WORK/fs.img" && mount -o loop "$WORK/fs.img" "$mnt"; then
  CLEANUP=("umount $mnt" "${CLEANUP[@]}")
else
  echo "SKIP: cannot mount a small file system here (needs root)"
  exit 77
fi

expect_rc 0 ranks 2 save --dir "$mnt/ck" --steps 1
# Step 2 carries an extra 2 MiB per rank: it cannot fit.
expect_rc 4 ranks 2 save --dir "$mnt/ck" --steps 2 --big-mb 2 --on-save-error stop
expect_log "SAVE FAILED step 2"
expect_log "No space left on device"
expect_log "earlier checkpoints are untouched"
[ ! -e "$mnt/ck/step-00000002.partial" ] || fail "partial directory left after ENOSPC"
[ ! -e "$mnt/ck/step-00000002" ] || fail "a failed save was committed"
expect_rc 0 "$SCALEGUARD_CLI" ckpt verify "$mnt/ck"
expect_rc 0 ranks 2 load --dir "$mnt/ck" --expect-step 1

# on_save_error=continue: step 2 fails, the run goes on and step 3 (small) is saved.
expect_rc 0 ranks 2 save --dir "$mnt/ck" --steps 2,3 --big-mb 2 --big-steps 2 --on-save-error continue
expect_log "SAVE FAILED step 2"
expect_log "saved step 3"
expect_rc 0 ranks 2 load --dir "$mnt/ck" --expect-step 3
echo PASS
