#!/usr/bin/env bash
# Tensor-parallel, pipeline and ZeRO-1 runs resume their own checkpoints bit-identically:
# 6 steps saving checkpoints (async at step 4, sync at 6), then steps 7-12 from step 6 and
# steps 5-12 from step 4 under the same layout, give the losses and the final
# params_checksum of an uninterrupted 12-step run. Then a tp=2 x pp=2
# grid stopped by SIGUSR1 (exit 85 after the checkpoint, as Slurm preemption does) and
# rerun continues exactly like an uninterrupted run.
source "$(dirname "$0")/lib.sh"
fortunes_tokens tokens.bin
common=(train --verbose --data tokens.bin --model gpt --n-layer 2 --n-embd 32 --n-head 4 --seq-len 32 --global-batch 8
        --micro-batch 2 --warmup 0 --min-lr-ratio 1 --seed 5 --threads 1 --log-every 1 --quiet)

for layout in "--tp 2" "--pp 2" "--zero 1"; do
  name=$(echo "$layout" | tr -d ' -')
  read -r -a extra <<< "$layout"
  mpi 2 "${common[@]}" "${extra[@]}" --steps 12 --metrics "$name-ref.jsonl" 2> "$name-ref.log" ||
    { cat "$name-ref.log"; fail "$name: reference run failed"; }
  # An asynchronous save at step 4 and the synchronous one at the end, step 6. The writer
  # thread of step 4's save starts copying 2 s late, so step 5's optimizer must copy each
  # bucket itself before changing it (the per-tensor fence), or step 4 saves step 5's values.
  SCALEGUARD_TEST_DELAY_COPY=2@4 mpi 2 "${common[@]}" "${extra[@]}" --steps 6 --metrics "$name-a.jsonl" --ckpt-dir "$name-ck" --ckpt-every 4 \
    --ckpt-async on 2> "$name-a.log" || { cat "$name-a.log"; fail "$name: first half failed"; }
  grep -qE "async snapshots: reserved [1-9][0-9]* bytes of host memory per rank" "$name-a.log" ||
    { cat "$name-a.log"; fail "$name: the async snapshot memory was not reserved at start-up"; }
  # Without step 6 the async save at step 4 is the newest: it must hold step 4's values.
  cp -r "$name-ck" "$name-ck4" && rm -rf "$name-ck4/step-00000006"
  mpi 2 "${common[@]}" "${extra[@]}" --steps 12 --metrics "$name-b.jsonl" --ckpt-dir "$name-ck" --ckpt-every 100 \
    2> "$name-b.log" || { cat "$name-b.log"; fail "$name: resumed run failed"; }
  grep -qF "resumed from step-00000006 (restart #1, written by 2 rank(s), now 2)" "$name-b.log" ||
    { cat "$name-b.log"; fail "$name: did not resume"; }
  expect_same_run "$name-ref.jsonl" "$name-b.jsonl"
  mpi 2 "${common[@]}" "${extra[@]}" --steps 12 --metrics "$name-c.jsonl" --ckpt-dir "$name-ck4" --ckpt-every 100 \
    2> "$name-c.log" || { cat "$name-c.log"; fail "$name: run resumed from the async save failed"; }
  grep -qF "resumed from step-00000004" "$name-c.log" || { cat "$name-c.log"; fail "$name: did not resume from step 4"; }
  expect_same_run "$name-ref.jsonl" "$name-c.jsonl"
  echo "PASS $name: resumed at step 6 and from the async save at step 4, checksum $(final_field "$name-b.jsonl" params_checksum)"
done

# SIGUSR1 to one rank of a tp=2 x pp=2 grid: every rank saves and exits 85.
grid=(--tp 2 --pp 2)
mpi_signalable 4 sig.jsonl "${common[@]}" "${grid[@]}" --steps 100000 --ckpt-dir sig-ck --ckpt-every 100000 \
  > sig.log 2>&1 || { cat sig.log; fail "grid ranks did not start"; }
kill -USR1 "$(cat pid.3)"
wait "$launcher" || true
for r in 0 1 2 3; do
  [ "$(cat rc.$r 2>/dev/null)" = 85 ] || { cat sig.log; fail "rank $r exited '$(cat rc.$r 2>/dev/null)', expected 85"; }
done
stopped=$(sed 's/^step-0*//' sig-ck/latest)
[ -n "$stopped" ] && [ -d "sig-ck/step-$(printf %08d "$stopped")" ] || fail "no checkpoint after the signal"
end=$((stopped + 4))
mpi 4 "${common[@]}" "${grid[@]}" --steps "$end" --metrics sig-ref.jsonl 2> sig-ref.log ||
  { cat sig-ref.log; fail "grid reference run failed"; }
mpi 4 "${common[@]}" "${grid[@]}" --steps "$end" --metrics sig-b.jsonl --ckpt-dir sig-ck --ckpt-every 100000 \
  2> sig-b.log || { cat sig-b.log; fail "grid rerun failed"; }
grep -qF "resumed from step-$(printf %08d "$stopped") (restart #1" sig-b.log || { cat sig-b.log; fail "grid rerun did not resume"; }
expect_same_run sig-ref.jsonl sig-b.jsonl
echo "PASS tp=2 x pp=2: stopped by SIGUSR1 at step $stopped (exit 85), resumed to step $end"
