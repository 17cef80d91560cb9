#!/usr/bin/env bash
# Where job_submit/scaleguard spends its time inside slurmctld: perf uprobes on job_submit()
# and on its three stages (read_request, decide, apply_decision) of the built .so, while held
# jobs are submitted to a dev cluster running the plugin. Prints per-stage medians (us).
#   bench/slurm/probe_job_submit.sh [JOBS]      (default 200; as root, needs perf)
# A uprobe costs several microseconds per hit on this kind of VM; the script measures that
# cost as the gap between read_request's return and decide's entry (no code runs there) and
# prints it, so the stages can be read net of it. Removes its probes when done.
set -euo pipefail
cd "$(dirname "$0")/../.."
jobs=${1:-200}
export SCALEGUARD_BUILD_DIR=${SCALEGUARD_BUILD_DIR:-build}
export SCALEGUARD_DEV_DIR=${SCALEGUARD_BENCH_DEV_DIR:-$SCALEGUARD_BUILD_DIR/bench-dev-cluster}
export SCALEGUARD_SPANK=0 SCALEGUARD_ACCOUNTING=0 SCALEGUARD_JOB_SUBMIT=scaleguard
command -v perf >/dev/null || { echo "perf not found (linux-perf)" >&2; exit 1; }
so=$(cd "$SCALEGUARD_BUILD_DIR" && pwd)/spank-plugin/job_submit/job_submit_scaleguard.so
[ -f "$so" ] || { echo "$so missing: build target job_submit_scaleguard" >&2; exit 1; }
group=probe_job_submit_scaleguard
work=$(mktemp -d)
trap 'perf probe -q -d "$group:*" 2>/dev/null || true; scripts/dev-cluster/down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

# C++ names confuse perf probe: probe the functions' addresses (from the symbol table).
addr() {
  local a
  a=$(nm "$so" | awk -v re="$1" '$3 ~ re && $3 !~ /\.cold$/ { print "0x" $1; exit }')
  [ -n "$a" ] || { echo "no symbol matching $1 in $so" >&2; exit 1; }
  echo "$a"
}
probe() {  # probe NAME ADDRESS: entry and return probes
  perf probe -q -x "$so" -a "$1=$2" && perf probe -q -x "$so" -a "${1}_ret=$2%return"
}
perf probe -q -d "$group:*" 2>/dev/null || true
probe total "$(addr '^job_submit$')"
probe read "$(addr '^_ZN8sg_slurm12read_request')"
probe decide "$(addr '^_ZN10scaleguard6decideERKNS_10JobRequest')"
probe apply "$(addr '^_ZN8sg_slurm14apply_decision')"

scripts/dev-cluster/up >/dev/null
source "$SCALEGUARD_DEV_DIR/env.sh"
request=(-H --gpus=1 --time=120 -o /dev/null --wrap true)
sbatch "${request[@]}" >/dev/null 2>&1   # warm-up, not recorded
perf record -q -e "$group:*" -p "$(cat "$SCALEGUARD_DEV_DIR/run/slurmctld.pid")" -o "$work/perf.data" \
  >/dev/null 2>&1 &
recorder=$!
sleep 1
for ((i = 0; i < jobs; i++)); do sbatch "${request[@]}" >/dev/null 2>&1; done
kill -INT "$recorder"
wait "$recorder" || true

# Events per thread in order: X (entry) ... X_ret__return; one job_submit call per thread at a time.
perf script -i "$work/perf.data" -F tid,time,event 2>/dev/null | awk -v g="$group:" '
  { tid = $1; t = $2; sub(":", "", t); ev = $3; sub(g, "", ev); sub(":$", "", ev)
    if (ev ~ /_ret__return$/) { name = ev; sub("_ret__return", "", name)
      if ((tid, name) in start) print name, (t - start[tid, name]) * 1e6
      if (name == "read") read_end[tid] = t
    } else {
      start[tid, ev] = t
      if (ev == "decide" && tid in read_end) print "probe_pair", (t - read_end[tid]) * 1e6
    } }' > "$work/stages"
printf '%-12s %6s %10s %8s %8s\n' stage calls median_us p10_us p90_us
for stage in total read decide apply probe_pair; do
  awk -v s="$stage" '$1 == s { print $2 }' "$work/stages" | sort -n | awk -v s="$stage" '
    { v[NR] = $1 } END { if (NR) printf "%-12s %6d %10.1f %8.1f %8.1f\n", s, NR, v[int((NR + 1) / 2)], v[int(NR * 0.1) + 1], v[int(NR * 0.9) + 1] }'
done
echo "probe_pair: cost of one return + one entry probe; 'total' holds 6 probe hits of the stages"
