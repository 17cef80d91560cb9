#!/usr/bin/env bash
# SIGUSR1 to one rank (as Slurm sends before preemption): all ranks agree at the next step
# boundary, stop together, and exit 85 ("stopped after the checkpoint hook").
source "$(dirname "$0")/lib.sh"
fortunes_tokens tokens.bin
mpi_signalable 2 m.jsonl train --data tokens.bin --model gpt --n-embd 32 --n-layer 1 --seq-len 32 --global-batch 8 \
  --steps 100000 --threads 1 --log-every 1 > run.log 2>&1 || { cat run.log; fail "ranks did not start"; }
kill -USR1 "$(cat pid.1)"
wait "$launcher" || true
for r in 0 1; do
  [ "$(cat rc.$r 2>/dev/null)" = 85 ] || { cat run.log; fail "rank $r exited '$(cat rc.$r 2>/dev/null)', expected 85"; }
done
grep -q "stop requested (signal) at step" run.log || fail "no stop message from rank 0"
last=$(tail -n1 m.jsonl | sed -E 's/.*"step":([0-9]+).*/\1/')
[ "$last" -lt 100000 ] || fail "did not stop early"
echo "both ranks stopped at step $last with exit 85"
