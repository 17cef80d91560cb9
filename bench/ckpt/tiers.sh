#!/bin/bash
# Local tier vs shared tier, save and restore, in one run (issue 38 item 3). 2 ranks as 2
# "nodes" (SCALEGUARD_TEST_RANKS_PER_NODE=1), a GPT of ~13M parameters (state ~150 MB per
# rank), local saves (whole rank state + partner copy, sync) and shared saves (sync) at the
# same steps; then a resume from the local tier and one from the shared tier (local dirs
# removed). Prints each time and the ratios. Usage: bench/ckpt/tiers.sh BUILD_DIR [LOCAL_ROOT SHARED_ROOT]
set -euo pipefail
BUILD=${1:?build dir}
W=$(mktemp -d /tmp/sg-tiers.XXXXXX)
LOCAL=${2:-$W/local}
SHARED=${3:-$W/shared}
trap '[ -n "${KEEP:-}" ] || rm -rf "$W" "$LOCAL" "$SHARED"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 SCALEGUARD_TEST_RANKS_PER_NODE=1 OMP_WAIT_POLICY=passive
M=(--model gpt --n-layer 4 --n-head 8 --n-embd 512 --seq-len 64 --global-batch 4 --synthetic 200000 --seed 7
   --threads 1 --quiet --ckpt-dir "$SHARED/ck" --ckpt-local-dir "$LOCAL/%h" --ckpt-every 2 --ckpt-shared-every 2
   --ckpt-async off --ckpt-keep 2 --ckpt-local-keep 2)
run() { mpirun -np 2 --oversubscribe --bind-to none "$BUILD/runner/scaleguard-run" train "${M[@]}" "$@"; }
run --steps 9 2>"$W/save.log"
local_s=$(sed -n 's/.*local step-0*[2-9] committed: .* written in \([0-9.]*\) s, \([0-9.]*\) s with.*/\2/p' "$W/save.log")
local_w=$(sed -n 's/.*local step-0*[2-9] committed: .* written in \([0-9.]*\) s, .*/\1/p' "$W/save.log")
shared_s=$(sed -n 's/.*rank 0: checkpoint: step-0*[2-8] committed: .* written in \([0-9.]*\) s.*/\1/p' "$W/save.log")
# Resume 1: the local tier holds step 8, the shared tier 9 (the final save): stop at 8 instead.
rm -rf "$SHARED/ck/step-00000009"
run --steps 10 2>"$W/r_local.log"
r_local=$(jq -r '.runs[1] | select(.resumed_tier == "local") | .restore_s' "$SHARED/ck/goodput.json")
rm -rf "$LOCAL"/* "$SHARED/ck/step-00000010"
run --steps 10 2>"$W/r_shared.log"
r_shared=$(jq -r '.runs[2] | select(.resumed_tier == "shared") | .restore_s' "$SHARED/ck/goodput.json")
mean() { tr ' ' '\n' | awk 'NF { s += $1; n++ } END { printf "%.4f", s / n }'; }
ls_=$(echo $local_s | mean); lw=$(echo $local_w | mean); ss=$(echo $shared_s | mean)
echo "save (mean of 4): local write $lw s, local write + partner copy + commit $ls_ s, shared write $ss s"
echo "restore: local $r_local s, shared $r_shared s"
awk -v a="$ls_" -v b="$ss" -v c="$r_local" -v d="$r_shared" 'BEGIN { printf "ratios: local save / shared save %.2f, local restore / shared restore %.2f\n", a / b, c / d }'
