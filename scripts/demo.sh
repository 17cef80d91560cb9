#!/usr/bin/env bash
# README command one: install what is missing, build, and show scaleguard's decisions on the
# sample jobs in configs/examples (the cost literature's story), then a short data-parallel
# training run on the fortunes corpus with 2 MPI ranks.
# The full live-cluster story (submit, train across nodes, preempt, resume, report) is issue 7.
#   DEMO_SKIP_INSTALL=1 skips install-deps; BUILD_DIR (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
[ "${DEMO_SKIP_INSTALL:-0}" = 1 ] || bash scripts/install-deps.sh
gen=(); command -v ninja >/dev/null && [ ! -f "$build/CMakeCache.txt" ] && gen=(-G Ninja)
cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc)" --target scaleguard scaleguard-run
sg="$build/planner/scaleguard"

step() { printf '\n=== %s\n' "$*"; }
decide() {  # decide FILE: print the decision; exit 0 accept/warn, 3 rewrite, 4 reject
  local args; read -r -a args < "configs/examples/$1"
  echo "\$ scaleguard decide ${args[*]}"
  "$sg" decide --policy configs/policy.ini "${args[@]}" || true
}
step "1. A 350M model asking for 8 GPUs: refused, one GPU is cheaper"
decide 350m-8gpu.args
step "2. The same job on 1 GPU: accepted"
decide 350m-1gpu.args
step "3. 13B does not fit one H100: sharded or model parallel"
decide 13b-4-h100.args
step "4. A 100M BERT asked on 2 GPUs stays single"
decide bert-100m-2gpu.args
step "5. Single GPU vs distributed, side by side"
"$sg" compare --model 350M --single-gpu-hours 11 --instance p4d.24xlarge

step "6. Data-parallel training on 2 MPI ranks (GPT, fortunes corpus)"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mapfile -t corpus < <(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.*')
"$build/runner/scaleguard-run" prep --input "${corpus[@]}" --output "$tmp/fortunes.bin"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
mpirun -np 2 --oversubscribe --bind-to none "$build/runner/scaleguard-run" train \
  --config configs/examples/gpt-small.ini --data "$tmp/fortunes.bin" --steps 60 \
  --metrics "$tmp/metrics.jsonl"
tail -n 1 "$tmp/metrics.jsonl"
echo; echo "demo: done"
