# A file system that accepts O_DIRECT at open but refuses it at the first write (stood in for
# by odirect_refuse_shim.c under LD_PRELOAD): the shard writer's probe write sees the refusal
# and every byte goes through the page cache. Large unaligned datasets, saved sync and async
# on 2 ranks, load bit for bit and verify. Without the probe the saves fail with EINVAL.
. "$(dirname "$0")/lib.sh"
: "${ODIRECT_REFUSE_SHIM:?set by ctest}"

shimmed() {
  local np=$1
  shift
  "$MPIEXEC" -np "$np" --oversubscribe --bind-to none -x LD_PRELOAD="$ODIRECT_REFUSE_SHIM" "$CKPT_TOOL" "$@"
}

expect_rc 0 shimmed 2 save --dir "$WORK/a" --steps 1,2 --big-mb 9
expect_log "odirect_refuse_shim: pwrite on an O_DIRECT descriptor refused (EINVAL)"
expect_rc 0 ranks 2 load --dir "$WORK/a" --expect-step 2
expect_rc 0 shimmed 2 save --dir "$WORK/b" --steps 3,4 --async --big-mb 9
expect_log "odirect_refuse_shim: pwrite on an O_DIRECT descriptor refused (EINVAL)"
expect_rc 0 ranks 1 load --dir "$WORK/b" --expect-step 4
expect_rc 0 "$SCALEGUARD_CLI" ckpt verify "$WORK/a"
expect_rc 0 "$SCALEGUARD_CLI" ckpt verify "$WORK/b"
echo PASS
