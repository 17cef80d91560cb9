#!/usr/bin/env bash
# Submission throughput of held jobs (`sbatch -H`) through slurmctld with job_submit/scaleguard,
# with no job_submit plugin, and with the equivalent job_submit/lua filter (job_submit.lua),
# all in one run on the dev cluster. Configurations alternate over several rounds (slurmctld
# restarted between them) so machine noise hits all three alike; prints jobs/s and ratios.
#   bench/slurm/submit_throughput.sh [JOBS_PER_ROUND] [ROUNDS]     (defaults 100, 3)
# Needs root and a build with job_submit_scaleguard (SCALEGUARD_BUILD_DIR, default build).
set -euo pipefail
cd "$(dirname "$0")/../.."
jobs=${1:-100}
rounds=${2:-3}
export SCALEGUARD_BUILD_DIR=${SCALEGUARD_BUILD_DIR:-build}
# Its own state directory (and so its own ports): never disturbs a test cluster.
export SCALEGUARD_DEV_DIR=${SCALEGUARD_BENCH_DEV_DIR:-$SCALEGUARD_BUILD_DIR/bench-dev-cluster}
export SCALEGUARD_JOB_SUBMIT_LUA=$PWD/bench/slurm/job_submit.lua
configs=(none scaleguard lua)
# The same accepted request for every configuration: 1 GPU for 2 hours, no --train-* intent.
request=(-H --gpus=1 --time=120 -o /dev/null --wrap true)

declare -A total_s
trap 'scripts/dev-cluster/down >/dev/null 2>&1 || true' EXIT
for ((round = 1; round <= rounds; round++)); do
  for config in "${configs[@]}"; do
    SCALEGUARD_JOB_SUBMIT=$config scripts/dev-cluster/up >/dev/null
    source "$SCALEGUARD_DEV_DIR/env.sh"
    sbatch "${request[@]}" >/dev/null   # warm-up: first RPC, plugin caches
    start=$(date +%s.%N)
    for ((i = 0; i < jobs; i++)); do sbatch "${request[@]}" >/dev/null 2>&1; done
    end=$(date +%s.%N)
    held=$(squeue -h -t PD -o %A | wc -l)
    [ "$held" -eq $((jobs + 1)) ] || { echo "$config: $held of $((jobs + 1)) jobs queued" >&2; exit 1; }
    total_s[$config]=$(echo "${total_s[$config]:-0} + $end - $start" | bc -l)
    printf 'round %d %-10s %4d jobs in %6.2f s\n' "$round" "$config" "$jobs" "$(echo "$end - $start" | bc -l)"
  done
done

rate() { echo "$jobs * $rounds / ${total_s[$1]}" | bc -l; }
none=$(rate none) sg=$(rate scaleguard) lua=$(rate lua)
printf '\n%-24s %8s\n' configuration jobs/s
printf '%-24s %8.1f\n' "no job_submit plugin" "$none" "job_submit/scaleguard" "$sg" "job_submit/lua" "$lua"
printf '\nscaleguard / none = %.3f   (target >= 0.95)\n' "$(echo "$sg / $none" | bc -l)"
printf 'lua / none        = %.3f\n' "$(echo "$lua / $none" | bc -l)"
printf 'scaleguard / lua  = %.3f   (target > 1)\n' "$(echo "$sg / $lua" | bc -l)"
