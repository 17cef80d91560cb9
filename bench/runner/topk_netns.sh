#!/usr/bin/env bash
# Top-k compression (--compress topk:RATIO) vs dense data parallel, step time as a ratio
# measured in the same run, over a fast link and throttled ones.
#
# The two ranks run inside a private network namespace and talk over its loopback with
# Open MPI's TCP BTL (--mca btl tcp,self: no shared memory), so every gradient byte crosses
# `lo` of that namespace. "fast": no qdisc (loopback TCP, several GB/s). "RATE": a token
# bucket (tc tbf; netem is not available on every kernel, tbf is) on that lo, e.g. 50mbit,
# which shapes both directions. The host's own network is never touched. Needs root
# (ip netns, tc).
#
#   bench/runner/topk_netns.sh [BUILD_DIR]        (RATES="fast 1gbit 200mbit 50mbit" STEPS=40 REPEATS=2)
#
# Prints per link: median step_ms (steps after warm-up) of dense and of top-k, the ratio
# topk/dense (< 1: compression pays), comm_bytes per step of each, and the loss after STEPS.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
run=$build/runner/scaleguard-run
[ -x "$run" ] || { echo "no $run (build it first)" >&2; exit 1; }
rates=${RATES:-fast 1gbit 200mbit 50mbit}
steps=${STEPS:-50}
repeats=${REPEATS:-2}
ratio=${RATIO:-0.01}
config=${CONFIG:-$root/configs/examples/gpt-small.ini}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
ns=sgbench$$
work=$(mktemp -d /tmp/scaleguard-topk-bench.XXXXXX)
cleanup() { ip netns del "$ns" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
ip netns add "$ns"
ip netns exec "$ns" ip link set lo up
cd "$work"
files=$(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.*' | sort)
# shellcheck disable=SC2086
"$run" prep --input $files --output fortunes.bin > /dev/null 2>&1

one() {  # LABEL ARGS...: one 2-rank run in the namespace, metrics to LABEL.jsonl
  local label=$1; shift
  ip netns exec "$ns" timeout 600 mpirun -np 2 --oversubscribe --bind-to none \
    --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
    "$run" train --config "$config" --data fortunes.bin --steps "$steps" --threads 1 --log-every 1 --quiet \
    --metrics "$label.jsonl" "$@" 2> "$label.log" || { cat "$label.log" >&2; exit 1; }
}

echo "# top-k $ratio vs dense, 2 ranks over TCP in a network namespace; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
# Steps after the density warm-up (= the config's lr warm-up) count; the warm-up sends more.
warm=$(sed -n 's/^warmup *= *//p' "$config"); warm=${warm:-10}
echo "# config $(basename "$config"), $steps steps, median step_ms of steps $((warm + 1))..$steps, $repeats alternating repeats each"
printf "%-8s %10s %10s %8s %12s %12s %9s %9s\n" link dense_ms topk_ms ratio dense_bytes topk_bytes dense_loss topk_loss
for rate in $rates; do
  if [ "$rate" = fast ]; then
    ip netns exec "$ns" tc qdisc del dev lo root 2>/dev/null || true
  else
    # burst >= lo's MTU (64 KiB), or full-size packets never pass
    ip netns exec "$ns" tc qdisc replace dev lo root tbf rate "$rate" burst 256kb latency 400ms
  fi
  for r in $(seq "$repeats"); do
    one "dense-$rate-$r"
    one "topk-$rate-$r" --compress "topk:$ratio"
  done
  /usr/bin/python3 - "$rate" "$repeats" "$warm" <<'PY'
import json, statistics, sys
rate, repeats, warm = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def load(kind):
    ms, rows = [], []
    for r in range(1, repeats + 1):
        rs = [x for x in map(json.loads, open(f"{kind}-{rate}-{r}.jsonl")) if "step_ms" in x]
        ms += [x["step_ms"] for x in rs if x["step"] > warm]
        rows.append(rs[-1])
    return statistics.median(ms), rows[-1]
d, dr = load("dense"); t, tr = load("topk")
print(f"{rate:<8} {d:10.1f} {t:10.1f} {t / d:8.3f} {dr['comm_bytes']:12d} {tr['comm_bytes']:12d} "
      f"{dr['loss']:9.4f} {tr['loss']:9.4f}")
PY
done
