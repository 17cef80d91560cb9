# A file system that refuses O_DIRECT (ramfs): the shard writer's probe falls back to
# buffered writes and the raw reader to buffered reads. Large unaligned datasets, saved
# sync and async, still load bit for bit on 2 and 1 ranks (with and without whole-file
# verification, which picks the page cache by itself), verify, and a flipped byte is caught.
. "$(dirname "$0")/lib.sh"

mnt=$WORK/ramfs
mkdir -p "$mnt"
if mount -t ramfs ramfs "$mnt" 2>/dev/null; then
  CLEANUP=("umount $mnt" "${CLEANUP[@]}")
else
  echo "SKIP: cannot mount a ramfs here (needs root)"
  exit 77
fi
if dd if=/dev/zero of="$mnt/probe" bs=4096 count=1 oflag=direct status=none 2>/dev/null; then
  echo "SKIP: this kernel's ramfs accepts O_DIRECT, so nothing here falls back"
  exit 77
fi

expect_rc 0 ranks 2 save --dir "$mnt/a" --steps 1,2 --big-mb 9
expect_rc 0 ranks 2 load --dir "$mnt/a" --expect-step 2 --no-verify
expect_rc 0 ranks 1 load --dir "$mnt/a" --expect-step 2
expect_rc 0 ranks 2 save --dir "$mnt/b" --steps 3,4 --async --big-mb 9
expect_rc 0 ranks 1 load --dir "$mnt/b" --expect-step 4 --no-verify
expect_rc 0 "$SCALEGUARD_CLI" ckpt verify "$mnt/a"

# A flipped byte inside a large dataset: the buffered raw read's dataset checksum sees it.
expect_rc 0 ranks 1 save --dir "$mnt/r" --steps 7 --big-mb 1
big=$mnt/r/step-00000007/shard-0.h5
at=$(python3 -c 'import sys; print(open(sys.argv[1], "rb").read().find(bytes((i + 7) % 251 for i in range(4096, 4160))))' "$big")
[ "$at" -gt 0 ] || fail "the bytes of params/big are not in $big"
printf '\xff' | dd of="$big" bs=1 seek="$at" conv=notrunc status=none
expect_rc 2 ranks 1 load --dir "$mnt/r" --expect-step 7 --no-verify
expect_log "dataset 'params/big' fails its checksum"
echo PASS
