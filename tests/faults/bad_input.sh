# Bad input gives clear errors: another model's checkpoint, a manifest that lies about
# shapes, a directory the user cannot write.
. "$(dirname "$0")/lib.sh"

# A checkpoint from a different model (config hash) is refused, never silently skipped.
expect_rc 0 ranks 1 save --dir "$WORK/m" --steps 1 --model-hash model-A
expect_rc 2 ranks 1 load --dir "$WORK/m" --expect-step 1 --model-hash model-B
expect_log "checkpoint of model 'fault-test' (config hash model-A), but this run's model has config hash model-B"

# A manifest whose shapes disagree with the shard (self-consistent bytes, so only the HDF5
# check can see it).
expect_rc 0 ranks 2 save --dir "$WORK/lie" --steps 1
man=$WORK/lie/step-00000001/manifest.json
jq '(.shards[0].datasets[] | select(.name == "params/embed.weight")) |= (.extent = [4,6] | .bytes = 96)' \
  "$man" >"$man.new" && mv "$man.new" "$man"
expect_rc 2 ranks 2 load --dir "$WORK/lie" --expect-step 1
expect_log "shard-0.h5: manifest says 'params/embed.weight' is float32 [4,6] but the file holds 4-byte elements [5,6]"
# A lie the manifest check itself catches: a slice outside the global shape.
jq '(.shards[1].datasets[] | select(.name == "params/embed.weight")) |= (.offset = [8,0])' \
  "$man" >"$man.new" && mv "$man.new" "$man"
expect_rc 1 "$SCALEGUARD_CLI" ckpt verify "$WORK/lie"
expect_log "dataset 'params/embed.weight': slice offset [8,0] extent [5,6] lies outside global_shape [10,6]"

# A directory the user cannot write: as user nobody, and read-only for root too.
mkdir -p "$WORK/locked"
chmod 755 "$WORK/locked"
expect_rc 4 setpriv --reuid=nobody --regid=nogroup --clear-groups \
  "$MPIEXEC" -np 1 "$CKPT_TOOL" save --dir "$WORK/locked/ck" --steps 1
expect_log "cannot create checkpoint directory $WORK/locked/ck/step-00000001.partial"
expect_log "Permission denied"
if mount --bind "$WORK/locked" "$WORK/locked" 2>/dev/null; then
  CLEANUP=("umount $WORK/locked" "${CLEANUP[@]}")
  mount -o remount,ro,bind "$WORK/locked"
  expect_rc 4 ranks 1 save --dir "$WORK/locked/ck" --steps 1
  expect_log "Read-only file system"
fi
echo PASS
