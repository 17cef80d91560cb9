#!/usr/bin/env bash
# Under --precision bf16 the pipeline's stage-to-stage tensors (activations forward,
# input gradients back) travel as bf16: half the bytes of fp32, the same values (a stage's
# output and its input gradient are bf16 already; before, they were widened to fp32 for the
# wire and narrowed again on arrival, which is exact but doubles the traffic).
#  1. pp_send_bytes on every step line is micro-batches x micro-batch x seq x embd x 2
#     under bf16 and x 4 under fp32, for 1F1B and GPipe (fails before: no such field, and
#     bf16 sent 4 bytes per element).
#  2. The bf16 tensors pass the communicator device check (SCALEGUARD_CHECK_COMM=1).
#  3. bf16 pp=2 trains what one bf16 process trains with the same micro-batches: losses
#     within 1e-4 (the same tolerance class as pp_equals_single.sh, widened for bf16).
source "$(dirname "$0")/lib.sh"
fortunes_tokens tokens.bin
common=(train --data tokens.bin --model gpt --n-layer 4 --n-embd 32 --n-head 4 --seq-len 32 --steps 6
        --global-batch 8 --seed 11 --threads 1 --log-every 1 --quiet)
elements=$((4 * 2 * 32 * 32))  # 4 micro-batches of (2, 32, 32)

"$run" "${common[@]}" --precision bf16 --micro-batch 2 --metrics one.jsonl 2> one.log || { cat one.log; fail "single bf16 run failed"; }
for prec in bf16 fp32; do
  bytes=$((elements * 2)); [ "$prec" = fp32 ] && bytes=$((elements * 4))
  for schedule in 1f1b gpipe; do
    name=$prec-$schedule
    SCALEGUARD_CHECK_COMM=1 mpi 2 "${common[@]}" --precision "$prec" --pp 2 --micro-batches 4 --schedule "$schedule" \
      --metrics "$name.jsonl" 2> "$name.log" || { cat "$name.log"; fail "$name: run failed (device check on)"; }
    grep -q "communicator device check on" "$name.log" || { cat "$name.log"; fail "$name: the check was not on"; }
    jq -se --argjson b "$bytes" '[.[] | select(.step_ms)] | length == 6 and all(.pp_send_bytes == $b)' "$name.jsonl" \
      >/dev/null || fail "$name: pp_send_bytes is not $bytes on every step: $(jq -c 'select(.step_ms) | .pp_send_bytes' "$name.jsonl" | tr '\n' ' ')"
    echo "PASS $name: stage 0 sent $bytes bytes per step"
  done
done
paste <(jq -r 'select(.step_ms) | .loss' one.jsonl) <(jq -r 'select(.step_ms) | .loss' bf16-1f1b.jsonl) |
  awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d } END { print "bf16 pp=2 vs one process: max loss difference", m + 0; exit !(NR == 6 && m <= 1e-4) }' ||
  fail "bf16 pp=2 does not train what one bf16 process trains"
