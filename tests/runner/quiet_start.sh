#!/usr/bin/env bash
# A default small train starts quietly: rank 0 prints one line of what trains (model,
# strategy and layout, ranks, data, steps, checkpoints) before the first step line; every
# rank's line, the ~60-key effective configuration and the set-up details only with
# --verbose. `export` says which checkpoint it exports to which directory (not "resuming from").
source "$(dirname "$0")/lib.sh"
small=(train --synthetic 5000 --threads 1 --steps 4 --log-every 2)

# lines_before_step LOG: how many lines come before the first "step N/M" line.
lines_before_step() {
  local n
  n=$(grep -n -m1 '^step [0-9]*/[0-9]*' "$1" | cut -d: -f1)
  [ -n "$n" ] || { cat "$1"; fail "$1: no step line"; }
  echo $((n - 1))
}

# 1. Default train on 2 ranks: one line, and it says what matters.
mpi 2 "${small[@]}" 2> quiet.log || { cat quiet.log; fail "default train failed"; }
before=$(lines_before_step quiet.log)
[ "$before" -eq 1 ] || { cat quiet.log; fail "$before lines before the first step, expected 1"; }
line=$(head -1 quiet.log)
for want in "train gpt" "strategy auto" "dp=2 tp=1 pp=1" "2 ranks on 1 node" "data synthetic" "4 steps of 32 samples" \
            "no checkpoints" "config "; do
  grep -qF -- "$want" <<<"$line" || fail "start line lacks '$want': $line"
done
echo "PASS default start: 1 line before the first step: $line"

# 2. With checkpoints: the line names the directory and the interval; nothing else before the
#    first step but the first save's own lines (the first save measures its cost).
mpi 2 "${small[@]}" --ckpt-dir ck --ckpt-every 2 2> ck.log || { cat ck.log; fail "train with checkpoints failed"; }
before=$(lines_before_step ck.log)
[ "$before" -eq 1 ] || { cat ck.log; fail "$before lines before the first step with --ckpt-dir, expected 1"; }
grep -qF "checkpoints ck every 2, keep 3" ck.log || { cat ck.log; fail "start line lacks the checkpoint directory and interval"; }
if grep -q "effective configuration\|^lr=\|rank 1/2" ck.log; then cat ck.log; fail "configuration or rank lines without --verbose"; fi
echo "PASS start with checkpoints: 1 line before the first step"

# 3. --verbose: every rank's line and the whole effective configuration, as before.
mpi 2 "${small[@]}" --verbose 2> verbose.log || { cat verbose.log; fail "--verbose train failed"; }
for want in "rank 0/2" "rank 1/2" "effective configuration (hash" "optimizer state"; do
  grep -qF "$want" verbose.log || { cat verbose.log; fail "--verbose: no '$want'"; }
done
for key in lr=0.001 min-lr-ratio=0.10000000000000001 warmup=10 verbose=true; do
  grep -qx "$key" verbose.log || { cat verbose.log; fail "--verbose: no '$key' in the effective configuration"; }
done
keys=$(grep -cE '^[a-z0-9-]+=' verbose.log)
[ "$keys" -ge 50 ] || fail "--verbose printed $keys configuration keys, expected the whole configuration"
echo "PASS --verbose: rank lines and $keys configuration keys"

# 4. export names what it exports.
"$run" export --ckpt ck --output exp 2> export.log || { cat export.log; fail "export failed"; }
grep -qE "exporting checkpoint .*ck/step-00000004 \(step 4\) to directory exp$" export.log ||
  { cat export.log; fail "export does not say which checkpoint it exports to which directory"; }
if grep -q "resuming from" export.log; then cat export.log; fail "export logs 'resuming from'"; fi
echo "PASS export: $(grep exporting export.log)"
