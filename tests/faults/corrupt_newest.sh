# Damaged newest checkpoints: a missing shard, flipped bytes, a truncated shard. Each is
# detected and named in the log, and the newest intact checkpoint is used.
. "$(dirname "$0")/lib.sh"

expect_rc 0 ranks 2 save --dir "$WORK/c" --steps 1,2,3,4
rm "$WORK/c/step-00000004/shard-0.h5"
shard=$WORK/c/step-00000003/shard-1.h5
size=$(stat -c %s "$shard")
printf '\xde\xad\xbe\xef' | dd of="$shard" bs=1 seek=$((size / 2)) conv=notrunc status=none
[ "$(stat -c %s "$shard")" -eq "$size" ] || fail "flipping changed the size"
truncate -s $(($(stat -c %s "$WORK/c/step-00000002/shard-0.h5") / 2)) "$WORK/c/step-00000002/shard-0.h5"

expect_rc 0 ranks 2 load --dir "$WORK/c" --expect-step 1
expect_log "skipping $WORK/c/step-00000004"
expect_log "step-00000004/shard-0.h5: missing"
expect_log "step-00000003/shard-1.h5: checksum"
expect_log "step-00000002/shard-0.h5: size"
expect_log "truncated"
expect_log "resuming from $WORK/c/step-00000001"

expect_rc 1 "$SCALEGUARD_CLI" ckpt verify "$WORK/c"
expect_log "BAD $WORK/c/step-00000003/shard-1.h5: checksum"
expect_log "1 checkpoint(s) ok, 3 bad"

# With every checkpoint damaged the load fails with a clear error instead of starting over.
rm "$WORK/c/step-00000001/shard-1.h5"
expect_rc 2 ranks 2 load --dir "$WORK/c" --expect-step 1
expect_log "none of the 4 checkpoints in $WORK/c is valid"
echo PASS
