#!/usr/bin/env bash
# The GPU checkpoint path (runner/src/checkpoint/device_staging.h) on the CPU: SCALEGUARD_TEST_STAGING=host
# puts the async snapshot through the staged path (mirrors of every flat bucket and
# optimizer-state buffer reserved at start-up, copied per buffer by a copier that stands in
# for the CUDA side stream, the writer waiting per buffer, the optimizer fenced per buffer),
# only the copies are memcpy instead of cudaMemcpyAsync. The copier is held 2 s at step 4
# (SCALEGUARD_TEST_DELAY_COPY=2@4), so step 5's optimizer updates only after each bucket's
# fence: without the fences step 4's checkpoint would hold step 5's values. Resuming from the
# async step-4 checkpoint and from the sync step-6 one (also staged) must equal an
# uninterrupted run bit for bit (losses, params_checksum), for plain DDP, ZeRO-1 (sharded
# moments, all-gathered buckets) and pp=2.
source "$(dirname "$0")/lib.sh"
fortunes_tokens tokens.bin
common=(train --verbose --data tokens.bin --model gpt --n-layer 2 --n-embd 32 --n-head 4 --seq-len 32 --global-batch 8
        --micro-batch 2 --warmup 0 --min-lr-ratio 1 --seed 5 --threads 1 --log-every 1 --quiet)

for layout in "" "--zero 1" "--pp 2"; do
  name=dp$(echo "$layout" | tr -d ' -')
  read -r -a extra <<< "$layout"
  mpi 2 "${common[@]}" "${extra[@]}" --steps 10 --metrics "$name-ref.jsonl" 2> "$name-ref.log" ||
    { cat "$name-ref.log"; fail "$name: reference run failed"; }
  SCALEGUARD_TEST_STAGING=host SCALEGUARD_TEST_DELAY_COPY=2@4 mpi 2 "${common[@]}" "${extra[@]}" --steps 6 \
    --metrics "$name-a.jsonl" --ckpt-dir "$name-ck" --ckpt-every 4 --ckpt-async on 2> "$name-a.log" ||
    { cat "$name-a.log"; fail "$name: staged run failed"; }
  grep -qE "async snapshots: reserved [1-9][0-9]* bytes of host mirrors per rank, host test stand-in" "$name-a.log" ||
    { cat "$name-a.log"; fail "$name: the staged mirrors were not reserved at start-up"; }
  grep -qF "step-00000004 committed" "$name-a.log" || { cat "$name-a.log"; fail "$name: async step 4 not committed"; }
  # The staged run itself trains exactly like the reference (its 6 steps).
  same_losses "$name-ref.jsonl" "$name-a.jsonl" || fail "losses differ from the uninterrupted run"
  cp -r "$name-ck" "$name-ck4" && rm -rf "$name-ck4/step-00000006"
  for ck in ck ck4; do
    mpi 2 "${common[@]}" "${extra[@]}" --steps 10 --metrics "$name-$ck.jsonl" --ckpt-dir "$name-$ck" --ckpt-every 100 \
      2> "$name-$ck.log" || { cat "$name-$ck.log"; fail "$name: run resumed from $ck failed"; }
    grep -qF "resumed from step-0000000" "$name-$ck.log" || { cat "$name-$ck.log"; fail "$name: did not resume from $ck"; }
    expect_same_run "$name-ref.jsonl" "$name-$ck.jsonl"
  done
  echo "PASS $name: staged async step 4 and staged sync step 6 resume bit-exact"
done
