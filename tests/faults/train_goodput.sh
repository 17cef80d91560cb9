# Goodput accounting over three injected faults (issue 38 item 5): a 2-rank run checkpointing
# every 4 steps (sync) is stopped after steps 7, 14 and 23 (SCALEGUARD_TEST_HANG_AFTER_STEP)
# and rank 1 SIGKILLed each time; each rerun resumes from the last checkpoint (4, 12, 20) and
# redoes the steps after it. CKPT_DIR/goodput.json must then hold 4 runs whose components
# add up to each run's wall time, whose allocated time is the runs' walls plus the restart
# gaps, whose lost work is the steps redone (3 + 2 + 3) with the redone steps' own step times
# (the metrics' step_ms), every step productive exactly once; `scaleguard report --goodput`
# prints the job's goodput. Bookkeeping tolerances only (printed rounding): no timing threshold.
. "$(dirname "$0")/lib.sh"
command -v jq >/dev/null || { echo "SKIP: jq"; exit 77; }
ARGS=(--steps 30 --warmup 4 --ckpt-dir "$WORK/ck" --ckpt-every 4 --ckpt-async off)
export SCALEGUARD_GOODPUT_WRITE_S=0   # a record after every step: the last step of a killed run is known

n=0
for hang in 7 14 23; do
  n=$((n + 1))
  SCALEGUARD_TEST_HANG_AFTER_STEP=$hang train 2 "$WORK/run$n.log" "${ARGS[@]}" --metrics "$WORK/run$n.jsonl" &
  launcher=$!
  CLEANUP+=("kill -9 $launcher 2>/dev/null")
  for r in 0 1; do wait_for "$WORK/run$n.log" "rank $r: test hang after step $hang"; done
  kill -9 "$(cat "$WORK/pid.1")"
  wait "$launcher" && fail "mpirun exited 0 although rank 1 was killed"
done
train_ok run4 2 "${ARGS[@]}"
for n in 2 3 4; do
  want=$((n == 2 ? 4 : n == 3 ? 12 : 20))
  [ "$(resumed_step "$WORK/run$n.log")" = "$want" ] || fail "run $n did not resume from step-$want"
done

G="$WORK/ck/goodput.json"
[ -s "$G" ] || fail "no $G"
cat "$G" >&2
[ "$(jq '.runs | length' "$G")" = 4 ] || fail "goodput.json should hold 4 runs"
[ "$(jq -r '[.runs[1:][] | .after] | join(",")' "$G")" = "failure,failure,failure" ] || fail "runs 2-4 should follow failures"
[ "$(jq -r '.runs[3].state' "$G")" = finished ] || fail "the last run should be finished"
[ "$(jq -r '[.runs[] | .lost_steps] | join(",")' "$G")" = "0,3,2,3" ] || fail "lost steps per run should be 0,3,2,3"
[ "$(jq '.totals.productive_steps' "$G")" = 30 ] || fail "every one of the 30 steps should be productive once"
[ "$(jq '.totals.failures' "$G")" = 3 ] || fail "3 failures expected"
# Each run's components sum to its wall time; the job's allocated time is the walls plus the gaps.
jq -e '[.runs[] | (.wall_s - (.startup_s + .restore_s + .productive_s + .lost_s + .ckpt_s + .overhead_s)) | fabs] | max < 1e-6' "$G" >/dev/null ||
  fail "a run's components do not add up to its wall time"
jq -e '(.totals.allocated_s - ([.runs[] | .wall_s] | add) - ([.runs[1:][] | .restart_s] | add)) | fabs < 1e-6' "$G" >/dev/null ||
  fail "allocated time is not the runs' walls plus the restart gaps"
jq -e '.runs[1:] | all(.restart_s > 0 and .restart == "in-job" and .restore_s > 0)' "$G" >/dev/null ||
  fail "each rerun should have a restart gap and a restore"
jq -e '(.totals.goodput - .totals.productive_s / .totals.allocated_s) | fabs < 1e-9' "$G" >/dev/null || fail "goodput != productive / allocated"
# Lost work = the redone steps' step times: run n redid the steps up to run n-1's last step.
for n in 2 3 4; do
  prev_last=$(jq ".runs[$((n - 2))].last_step" "$G")
  from=$(jq ".runs[$((n - 1))].resumed_from" "$G")
  metrics="$WORK/run$n.jsonl"
  want=$(jq -s --argjson a "$from" --argjson b "$prev_last" \
    '[.[] | select(.step != null and .final != true and .step > $a and .step <= $b) | .step_ms] | add / 1000' "$metrics")
  count=$(jq -s --argjson a "$from" --argjson b "$prev_last" '[.[] | select(.step != null and .final != true and .step > $a and .step <= $b)] | length' "$metrics")
  got=$(jq ".runs[$((n - 1))].lost_s" "$G")
  [ "$count" = "$(jq ".runs[$((n - 1))].lost_steps" "$G")" ] || fail "run $n: lost_steps differs from the steps redone ($count)"
  # step_ms is printed with 3 decimals: 0.0005 ms per step of rounding.
  awk -v g="$got" -v w="$want" -v c="$count" 'BEGIN { d = g - w; if (d < 0) d = -d; exit !(d <= c * 5e-7 + 1e-9) }' ||
    fail "run $n: lost_s $got differs from the redone steps' step times $want"
done
jq -s -e 'map(select(.goodput != null)) | .[0].goodput.job_failures == 3' "$WORK/run4.jsonl" >/dev/null || fail "the metrics lack the goodput line"

"$SCALEGUARD_CLI" report --goodput "$WORK/ck" | tee "$WORK/report.txt" >&2
pct=$(jq -r '.totals.goodput * 100' "$G" | awk '{ printf "%.1f%%", $1 }')
grep -E "\(no job id\) +4 +3 +$pct" "$WORK/report.txt" >/dev/null || fail "scaleguard report does not print the job's goodput $pct"
"$SCALEGUARD_CLI" report --goodput "$WORK/ck" --json | jq -e '.goodput[0].failures == 3 and .goodput[0].lost_steps == 8' >/dev/null ||
  fail "report --json: failures/lost steps"
echo "PASS: 3 faults; goodput $pct, lost work 8 steps = the redone steps' time, components add up"
