#!/usr/bin/env bash
# ZeRO-3 benchmark (issue 27 item 4; BENCHMARKS.md, Runner), all on this machine in one run:
#  1. step time of --zero 3 against --zero 0 on the same GPT, the same ranks and threads
#     (runs alternating, ROUNDS times; median step_ms after 3 warm-up steps, median over the
#     rounds of the ratio);
#  2. the raw MPI_Allgather time of the same bytes (runner_allgather_bench, one call per
#     gathered bucket of the same size, in the same run): ZeRO-3 gathers each block's bucket
#     twice per micro-batch (before its forward and before its backward) and the other
#     buckets once per step. "extra / raw" = (ZeRO-3 step - ZeRO-0 step) / (those gathers at
#     the raw rate): at most 1 means the extra all-gathers cost no more than their bytes at
#     the raw rate (prefetch hides part of them; ZeRO-3's reduce-scatter is also cheaper
#     than ZeRO-0's all-reduce, which lowers the extra);
#  3. peak memory per rank (--memory-report, rank 0: persistent state + the step peak of the
#     c10 CPU allocator) of ZeRO-3 against ZeRO-0.
# usage: bench/runner/zero3.sh [BUILD_DIR]   (RANKS=2, STEPS=20, ROUNDS=3, LAYERS=4, WIDTH=256,
#        SEQ=128, MICRO=4, ACCUM=1 may be set). Prints a Markdown table; timings are never asserted.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
run=$build/runner/scaleguard-run
raw=$build/bench/runner/runner_allgather_bench
ranks=${RANKS:-2} steps=${STEPS:-20} rounds=${ROUNDS:-3}
layers=${LAYERS:-4} width=${WIDTH:-256} seq=${SEQ:-128} micro=${MICRO:-4} accum=${ACCUM:-1} vocab=256
[ -x "$run" ] && [ -x "$raw" ] || { echo "build first: cmake --build $build --target scaleguard-run runner_allgather_bench" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1
work=$(mktemp -d /tmp/scaleguard-bench-zero3.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"

# shellcheck disable=SC2046
"$run" prep --input $(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.*' | sort) --output tokens.bin 2>/dev/null
model=(train --data tokens.bin --model gpt --n-layer "$layers" --n-embd "$width" --n-head 4 --seq-len "$seq"
       --vocab-size "$vocab" --threads 1 --steps "$steps" --log-every 1 --quiet --micro-batch "$micro"
       --global-batch $((micro * accum * ranks)) --memory-report)
mpi() { local n=$1; shift; mpirun -np "$n" --oversubscribe --bind-to none "$@"; }

# Bytes of one gathered bucket: a block (12 C^2 + 13 C parameters) and the rest (wte V C,
# wpe T C, ln_f 2 C), fp32, padded to a multiple of the ranks as the runner pads.
pad() { echo $(( ($1 + ranks - 1) / ranks * ranks * 4 )); }
block_bytes=$(pad $((12 * width * width + 13 * width)))
rest_bytes=$(pad $((vocab * width + seq * width + 2 * width)))

for r in $(seq "$rounds"); do
  for z in 0 3; do
    mpi "$ranks" "$run" "${model[@]}" --zero "$z" --metrics "z$z-$r.jsonl" 2> "z$z-$r.log"
  done
  mpi "$ranks" "$raw" "$block_bytes" 50 > "ag-block-$r.json"
  mpi "$ranks" "$raw" "$rest_bytes" 20 > "ag-rest-$r.json"
done

/usr/bin/python3 - "$rounds" "$ranks" "$layers" "$accum" "$block_bytes" "$rest_bytes" <<'PY'
import json, re, statistics, sys
rounds, ranks, layers, accum = map(int, sys.argv[1:5])
block_bytes, rest_bytes = map(int, sys.argv[5:7])
def step_ms(path, key="step_ms"):
    rows = [r for r in map(json.loads, open(path)) if "step_ms" in r][3:]  # 3 warm-up steps
    return statistics.median(r[key] for r in rows)
def total_peak(path):
    m = re.search(r"optimizer state (\d+) bytes; step peak (\d+) bytes.*total peak (\d+) bytes", open(path).read())
    return int(m.group(3))
gathers_block = 2 * accum * layers  # forward + backward, each micro-batch
rows = []
for r in range(1, rounds + 1):
    z0, z3 = step_ms(f"z0-{r}.jsonl"), step_ms(f"z3-{r}.jsonl")
    ag_block = json.load(open(f"ag-block-{r}.json"))["median_ms"]
    ag_rest = json.load(open(f"ag-rest-{r}.json"))["median_ms"]
    raw = gathers_block * ag_block + ag_rest
    c0, c3 = step_ms(f"z0-{r}.jsonl", "comm_ms"), step_ms(f"z3-{r}.jsonl", "comm_ms")
    rows.append((z0, z3, z3 / z0, z3 - z0, raw, (z3 - z0) / raw, c0, c3))
run = json.loads(open("z3-1.jsonl").readline())["run"]
mem0, mem3 = total_peak("z0-1.log"), total_peak("z3-1.log")
print(f"\nGPT {layers} blocks x {run['n_embd']} wide ({run['params'] / 1e6:.2f}M parameters), seq {run['seq_len']}, "
      f"micro-batch {run['micro_batch']} x {accum} per rank, {ranks} ranks x 1 thread, {run['precision']}; "
      f"medians after 3 warm-up steps; {rounds} rounds (ZeRO-0, ZeRO-3, raw all-gathers alternating)")
print(f"ZeRO-3 gathers per step: {gathers_block} block buckets of {block_bytes} B + 1 rest of {rest_bytes} B\n")
print("| round | ZeRO-0 step ms | ZeRO-3 step ms | ratio | extra ms | raw MPI_Allgather ms of the same bytes | extra / raw |"
      " ZeRO-0 comm_ms | ZeRO-3 comm_ms |")
print("|---|---|---|---|---|---|---|---|---|")
for i, (z0, z3, ratio, extra, raw, per, c0, c3) in enumerate(rows, 1):
    print(f"| {i} | {z0:.1f} | {z3:.1f} | {ratio:.3f} | {extra:.1f} | {raw:.2f} | {per:.2f} | {c0:.1f} | {c3:.1f} |")
print(f"| median | | | {statistics.median(r[2] for r in rows):.3f} | | | {statistics.median(r[5] for r in rows):.2f} | | |")
print("comm_ms: rank 0's exposed communication (ZeRO-3: gathers, their waits and the reduce-scatters);"
      " on a loaded machine each gather also waits for the other ranks' scheduling (one sync per gather)")
print(f"\npeak memory per rank (rank 0, state + step peak): ZeRO-0 {mem0} B, ZeRO-3 {mem3} B, ratio {mem3 / mem0:.3f}")
PY
