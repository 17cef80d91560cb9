#!/usr/bin/env bash
# Pipeline benchmark (see BENCHMARKS.md, Runner), all on this machine in one run:
#  1. measured pipeline bubble vs the ideal (p-1)/(m+p-1): GPT, pp=2 on 2 ranks x 1 thread,
#     micro-batch 4, m = 1, 2, 4, 8, 16 micro-batches, 1F1B and GPipe;
#  2. the planner's predicted vs measured step time for each strategy the runner executes
#     (single, ddp, pipeline), via `scaleguard calibrate` on the runs' metrics files.
# usage: bench/runner/pipeline.sh [BUILD_DIR]      (STEPS=20 may be set)
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
run=$build/runner/scaleguard-run
sg=$build/cli/scaleguard
steps=${STEPS:-20}
[ -x "$run" ] && [ -x "$sg" ] || { echo "build first: cmake --build $build --target scaleguard-run scaleguard" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1
work=$(mktemp -d /tmp/scaleguard-bench-pipeline.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"

# shellcheck disable=SC2046
"$run" prep --input $(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.*' | sort) --output tokens.bin 2>/dev/null
model=(train --data tokens.bin --model gpt --n-layer 4 --n-embd 128 --n-head 4 --seq-len 64 --threads 1
       --steps "$steps" --log-every 1 --quiet --micro-batch 4)
mpi() { local n=$1; shift; mpirun -np "$n" --bind-to none "$@"; }

echo "== bubble: pp=2, micro-batch 4, m micro-batches"
for schedule in 1f1b gpipe; do
  for m in 1 2 4 8 16; do
    mpi 2 "$run" "${model[@]}" --pp 2 --schedule "$schedule" --global-batch $((4 * m)) --metrics "b-$schedule-$m.jsonl" 2>/dev/null
  done
done

echo "== strategies: the same global batch 32 (8 micro-batches of 4 in the pipeline)"
"$run" "${model[@]}" --global-batch 32 --metrics s-single.jsonl 2>/dev/null
mpi 2 "$run" "${model[@]}" --global-batch 32 --metrics s-ddp.jsonl 2>/dev/null
mpi 2 "$run" "${model[@]}" --global-batch 32 --pp 2 --metrics s-pp.jsonl 2>/dev/null
for s in single ddp pp; do "$sg" calibrate --metrics "s-$s.jsonl" --skip 3 --json > "c-$s.json"; done

/usr/bin/python3 - "$steps" <<'PY'
import json, statistics, sys
steps = sys.argv[1]
def rows(path):
    return [r for r in map(json.loads, open(path)) if "step_ms" in r][3:]  # 3 warm-up steps
def med(path, key):
    return statistics.median(r[key] for r in rows(path))
params = json.loads(open("s-pp.jsonl").readline())["run"]["params"]
print(f"\nGPT 4 blocks x 128 wide ({params / 1e6:.2f}M parameters), seq 64, micro-batch 4, pp=2 on 2 ranks x 1 thread, {steps} steps,"
      " medians after 3 warm-up steps")
print("bubble in the pipeline phase = bubble_fraction x step_ms / pipeline_ms (idle share of the slowest stage's span)\n")
print("| m | ideal (p-1)/(m+p-1) | 1F1B measured | ratio | GPipe measured | ratio | 1F1B step ms | GPipe step ms |")
print("|---|---|---|---|---|---|---|---|")
for m in (1, 2, 4, 8, 16):
    ideal = 1 / (m + 1)
    cells = []
    for s in ("1f1b", "gpipe"):
        path = f"b-{s}-{m}.jsonl"
        b = statistics.median(r["bubble_fraction"] * r["step_ms"] / r["pipeline_ms"] for r in rows(path))
        cells.append((b, med(path, "step_ms")))
    print(f"| {m} | {ideal:.3f} | {cells[0][0]:.3f} | {cells[0][0] / ideal:.2f} | {cells[1][0]:.3f} | "
          f"{cells[1][0] / ideal:.2f} | {cells[0][1]:.1f} | {cells[1][1]:.1f} |")
print("\n| strategy | predicted step ms | measured step ms | measured / predicted | implied efficiency |")
print("|---|---|---|---|---|")
for s, label in (("single", "single (1 rank)"), ("ddp", "ddp (dp=2)"), ("pp", "pipeline (pp=2, m=8, 1F1B)")):
    c = json.load(open(f"c-{s}.json"))
    p, m = c["predicted"]["step_seconds"] * 1e3, c["measured"]["step_seconds"] * 1e3
    print(f"| {label} | {p:.2f} | {m:.2f} | {m / p:.1f}x | {c['implied']['efficiency']:.3f} |")
PY
