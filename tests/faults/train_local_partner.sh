# Local checkpoints with partner copies (issue 38 item 3): 4 real ranks as 2 "nodes" of 2
# (SCALEGUARD_TEST_RANKS_PER_NODE=2; --ckpt-local-dir .../%h gives each node its own local
# directory). Local saves every 4 steps, the shared tier every 6. After step 11 (local step-8
# committed on both nodes, shared step-6 behind it) node 1's ranks are SIGKILLed and its local
# directory deleted: the node and its disk are gone. The rerun resumes from local step-8,
# ranks 2 and 3 from the partner copies node 0 holds, and ends with the uninterrupted run's
# params_checksum and losses.
. "$(dirname "$0")/lib.sh"
ARGS=(--steps 16 --warmup 4)
CK=(--ckpt-dir "$WORK/ck" --ckpt-every 4 --ckpt-shared-every 6 --ckpt-local-dir "$WORK/local/%h")
export SCALEGUARD_TEST_RANKS_PER_NODE=2

reference 4 "${ARGS[@]}"

SCALEGUARD_TEST_HANG_AFTER_STEP=11 train 4 "$WORK/killed.log" "${ARGS[@]}" --metrics "$WORK/killed.jsonl" "${CK[@]}" &
launcher=$!
CLEANUP+=("kill -9 $launcher 2>/dev/null")
for r in 0 1 2 3; do wait_for "$WORK/killed.log" "rank $r: test hang after step 11"; done
grep -F "local step-00000008 committed" "$WORK/killed.log" >/dev/null || fail "no local step-8 commit logged"
for node in node0 node1; do
  for s in 0 1 2 3; do
    [ -s "$WORK/local/$node/step-00000008/shard-$s.h5" ] || fail "$node lacks shard-$s.h5 of local step-8 (own or partner copy)"
  done
done
[ -e "$WORK/ck/step-00000006" ] || fail "the shared tier lacks step-6"
[ ! -e "$WORK/ck/step-00000008" ] || fail "step-8 reached the shared tier (--ckpt-shared-every 6)"
kill -9 "$(cat "$WORK/pid.2")" "$(cat "$WORK/pid.3")"
wait "$launcher" && fail "mpirun exited 0 although node 1's ranks were killed"
rm -rf "$WORK/local/node1"

train_ok rerun 4 "${ARGS[@]}" "${CK[@]}"
[ "$(resumed_step "$WORK/rerun.log")" = 8 ] || fail "rerun did not resume from step-8 (the local tier's newest)"
grep -F "local tier: step-00000008" "$WORK/rerun.log" | grep -F "2 shard(s) restored from partner copies" >/dev/null ||
  fail "ranks 2 and 3 were not restored from node 0's partner copies"
for s in 2 3; do
  [ -s "$WORK/local/node1/step-00000008/shard-$s.h5" ] || fail "shard-$s.h5 was not written back into node 1's new local directory"
done
same_as_reference rerun

# A corrupted partner copy is refused by its checksum. Continued to step 24 and stopped after
# step 21 (local step-20, shared step-18), node 1 lost again and node 0's copy of shard 2 of
# step-20 flipped: step-20 cannot be restored, and the shared tier's step-18 wins.
SCALEGUARD_TEST_HANG_AFTER_STEP=21 train 4 "$WORK/second.log" --steps 24 --warmup 4 "${CK[@]}" &
launcher=$!
CLEANUP+=("kill -9 $launcher 2>/dev/null")
for r in 0 1 2 3; do wait_for "$WORK/second.log" "rank $r: test hang after step 21"; done
[ -s "$WORK/local/node0/step-00000020/shard-2.h5" ] || fail "node 0 lacks its partner copy of shard 2 of local step-20"
[ -e "$WORK/ck/step-00000018" ] || fail "the shared tier lacks step-18"
kill -9 "$(cat "$WORK/pid.2")" "$(cat "$WORK/pid.3")"
wait "$launcher" && fail "mpirun exited 0 although node 1's ranks were killed"
rm -rf "$WORK/local/node1"
size=$(stat -c %s "$WORK/local/node0/step-00000020/shard-2.h5")
printf '\xff' | dd of="$WORK/local/node0/step-00000020/shard-2.h5" bs=1 seek=$((size / 2)) conv=notrunc status=none
train_ok third 4 --steps 24 --warmup 4 "${CK[@]}"
grep -F "local step-00000020: shard 2 from rank 0 unusable" "$WORK/third.log" | grep -F "checksum differs" >/dev/null ||
  fail "the flipped partner copy was not refused by its checksum"
[ "$(resumed_step "$WORK/third.log")" = 18 ] || fail "with local step-20 unrestorable the shared step-18 should win"
echo "PASS: node 1 lost after local step-8; resumed from node 0's partner copies with the uninterrupted params_checksum $REF; a flipped partner copy refused, the shared tier used"
