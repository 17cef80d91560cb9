# Asynchronous save: the tool changes its live tensors as soon as the snapshot exists; what
# is loaded must be the values at the snapshot, bit for bit. Both copy modes: on the writer
# thread (default) and on the main thread (--copy-now).
. "$(dirname "$0")/lib.sh"

expect_rc 0 ranks 2 save --dir "$WORK/a" --steps 1,2,3 --async
expect_log "saved step 3"
expect_rc 0 ranks 2 load --dir "$WORK/a" --expect-step 3
expect_rc 0 ranks 1 load --dir "$WORK/a" --expect-step 3
expect_rc 0 "$SCALEGUARD_CLI" ckpt verify "$WORK/a"

expect_rc 0 ranks 2 save --dir "$WORK/b" --steps 4,5 --async --copy-now
expect_rc 0 ranks 2 load --dir "$WORK/b" --expect-step 5

# Several 4 MiB copy chunks per rank (9 MiB + 1001 bytes split in two), copied by the writer
# thread and the waiting main thread together, then written raw: bit for bit as snapshotted.
expect_rc 0 ranks 2 save --dir "$WORK/c" --steps 6,7 --async --big-mb 9
expect_rc 0 ranks 2 load --dir "$WORK/c" --expect-step 7
expect_rc 0 ranks 1 load --dir "$WORK/c" --expect-step 7
expect_rc 0 "$SCALEGUARD_CLI" ckpt verify "$WORK/c"

# The per-tensor fence: alone (no writer thread, deterministic), then in a real async save
# where each live tensor changes as soon as its own chunks are copied, while
# the writer thread may still be copying the others (the big tensor last).
expect_rc 0 ranks 2 fence
expect_rc 0 ranks 2 save --dir "$WORK/d" --steps 8,9 --async --per-tensor --big-mb 9
expect_rc 0 ranks 2 load --dir "$WORK/d" --expect-step 9
expect_rc 0 ranks 1 load --dir "$WORK/d" --expect-step 9
echo PASS
