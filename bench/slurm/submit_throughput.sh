#!/usr/bin/env bash
# Submission throughput of held jobs (`sbatch -H`) through slurmctld with job_submit/scaleguard
# (without and with 1,000 budgets), with no job_submit plugin, and with the equivalent
# job_submit/lua filter (job_submit.lua),
# all in one run on the dev cluster. Configurations alternate over several rounds (slurmctld
# restarted between them) so machine noise hits all three alike. Two measures:
#  - end to end: sbatch processes per second, as a user sees it (client start-up included);
#  - in slurmctld: the time slurmctld itself reports for each submission RPC (its log's
#    `_slurm_rpc_submit_batch_job ... usec=N`), which is where a job_submit plugin runs;
#  - slurmctld's CPU time (user + system, all threads, /proc/PID/stat) per submission: what
#    the controller spends, far less disturbed by other processes on the machine than wall time.
# Prints both with ratios against no plugin and against Lua.
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
# No SPANK plugin on the client: its cost would be the same in every configuration and only
# dilute the difference this measures.
export SCALEGUARD_SPANK=0
# No slurmdbd: its traffic would be the same in every configuration, and its bring-up slow.
export SCALEGUARD_ACCOUNTING=0
# budgets: job_submit/scaleguard with 1,000 budgets and a ledger of 10,000 pending jobs
# (bench/budget's fixture), every job judged by the account's budgets too.
configs=(none scaleguard lua budgets)
# PREFILL=N: N more held jobs queued before each configuration's measurement (with budgets,
# N jobs the plugin accepted since the ledger's snapshot). 10000 takes long: sequential sbatch.
prefill=${PREFILL:-0}
bench_budget=$SCALEGUARD_BUILD_DIR/bench/budget/bench_budget
[ -x "$bench_budget" ] || { echo "build bench_budget first (cmake --build build --target bench_budget)" >&2; exit 1; }
fixture=$(mktemp -d)
"$bench_budget" --write-fixture "$fixture" >/dev/null
# The same accepted request for every configuration: 1 GPU for 2 hours, no --train-* intent.
request=(-H --gpus=1 --time=120 -o /dev/null --wrap true)

declare -A total_s cpu_ticks round_rate
round_ratios=()
budget_ratios=()
ticks_per_s=$(getconf CLK_TCK)
# utime + stime of a process, in clock ticks.
cpu_of() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
usec_dir=$(mktemp -d)
trap 'scripts/dev-cluster/down >/dev/null 2>&1 || true; rm -rf "$usec_dir" "$fixture"' EXIT
for ((round = 1; round <= rounds; round++)); do
  # Rotate the order each round: no configuration always runs first or last.
  shift_by=$(( (round - 1) % ${#configs[@]} ))
  order=("${configs[@]:shift_by}" "${configs[@]:0:shift_by}")
  for config in "${order[@]}"; do
    if [ "$config" = budgets ]; then
      SCALEGUARD_JOB_SUBMIT=scaleguard SCALEGUARD_POLICY=$fixture/policy.ini scripts/dev-cluster/up >/dev/null
      # A ledger counted after slurmctld started (an older one is not used), then wait for the
      # plugin's ledger thread to load it.
      "$bench_budget" --write-fixture "$fixture" >/dev/null
      for ((i = 0; i < 100; i++)); do
        grep -q 'budgets enforced with ledger' "$SCALEGUARD_DEV_DIR/log/slurmctld.log" && break
        sleep 0.1
      done
      grep -q 'budgets enforced with ledger' "$SCALEGUARD_DEV_DIR/log/slurmctld.log" ||
        { echo "budgets: slurmctld did not load the ledger" >&2; exit 1; }
    else
      SCALEGUARD_JOB_SUBMIT=$config scripts/dev-cluster/up >/dev/null
    fi
    source "$SCALEGUARD_DEV_DIR/env.sh"
    for ((i = 0; i < prefill; i++)); do sbatch "${request[@]}" >/dev/null 2>&1; done
    sbatch "${request[@]}" >/dev/null 2>&1   # warm-up: first RPC, plugin caches
    ctld=$(cat "$SCALEGUARD_DEV_DIR/run/slurmctld.pid")
    cpu0=$(cpu_of "$ctld")
    start=$(date +%s.%N)
    for ((i = 0; i < jobs; i++)); do sbatch "${request[@]}" >/dev/null 2>&1; done
    end=$(date +%s.%N)
    cpu1=$(cpu_of "$ctld")
    cpu_ticks[$config]=$(( ${cpu_ticks[$config]:-0} + cpu1 - cpu0 ))
    held=$(squeue -h -t PD -o %A | wc -l)
    [ "$held" -eq $((jobs + 1 + prefill)) ] || { echo "$config: $held of $((jobs + 1 + prefill)) jobs queued" >&2; exit 1; }
    total_s[$config]=$(echo "${total_s[$config]:-0} + $end - $start" | bc -l)
    round_rate[$config]=$(echo "$jobs / ($end - $start)" | bc -l)
    # Server-side time of each measured submission (job 1 was the warm-up).
    grep -o '_slurm_rpc_submit_batch_job: JobId=[0-9]* .*usec=[0-9]*' \
        "$SCALEGUARD_DEV_DIR/log/slurmctld.log" | sed 's/.*JobId=\([0-9]*\) .*usec=\([0-9]*\)/\1 \2/' |
      awk -v first=$((prefill + 1)) '$1 > first { print $2 }' >> "$usec_dir/$config"
    printf 'round %d %-10s %4d jobs in %6.2f s, slurmctld CPU %5.2f s\n' "$round" "$config" "$jobs" \
      "$(echo "$end - $start" | bc -l)" "$(echo "($cpu1 - $cpu0) / $ticks_per_s" | bc -l)"
  done
  round_ratios+=("$(echo "${round_rate[scaleguard]} / ${round_rate[none]}" | bc -l)")
  budget_ratios+=("$(echo "${round_rate[budgets]} / ${round_rate[none]}" | bc -l)")
done

rate() { echo "$jobs * $rounds / ${total_s[$1]}" | bc -l; }
median_us() { sort -n "$usec_dir/$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
mean_us() { awk '{ s += $1 } END { print s / NR }' "$usec_dir/$1"; }
for c in "${configs[@]}"; do
  [ "$(wc -l < "$usec_dir/$c")" -eq $((jobs * rounds)) ] ||
    { echo "$c: expected $((jobs * rounds)) RPC times in slurmctld's log" >&2; exit 1; }
done
none=$(rate none) sg=$(rate scaleguard) lua=$(rate lua) bud=$(rate budgets)
printf '\nend to end (sbatch processes)     jobs/s\n'
printf '%-32s %8.1f\n' "no job_submit plugin" "$none" "job_submit/scaleguard" "$sg" "job_submit/lua" "$lua" \
  "scaleguard + 1,000 budgets" "$bud"
printf 'budgets / none = %.3f   (target >= 0.95)\n' "$(echo "$bud / $none" | bc -l)"
printf 'budgets / none per round:'
printf ' %.3f' "${budget_ratios[@]}"
echo
printf 'scaleguard / none = %.3f   lua / none = %.3f   scaleguard / lua = %.3f\n' \
  "$(echo "$sg / $none" | bc -l)" "$(echo "$lua / $none" | bc -l)" "$(echo "$sg / $lua" | bc -l)"
printf 'scaleguard / none per round (the noise):'
printf ' %.3f' "${round_ratios[@]}"
echo

printf '\nin slurmctld (submit RPC)        median us   mean us   jobs/s (1/mean)\n'
for c in none scaleguard lua budgets; do
  printf '%-32s %9d %9.0f %9.0f\n' "$c" "$(median_us "$c")" "$(mean_us "$c")" "$(echo "1000000 / $(mean_us "$c")" | bc -l)"
done
n=$(mean_us none) g=$(mean_us scaleguard) l=$(mean_us lua)
printf 'throughput scaleguard / none = %.3f   (target >= 0.95)\n' "$(echo "$n / $g" | bc -l)"
printf 'throughput lua / none        = %.3f\n' "$(echo "$n / $l" | bc -l)"
printf 'throughput scaleguard / lua  = %.3f   (target > 1)\n' "$(echo "$l / $g" | bc -l)"
b=$(mean_us budgets)
printf 'throughput budgets / none    = %.3f   (target >= 0.95)\n' "$(echo "$n / $b" | bc -l)"

cpu_us() { echo "${cpu_ticks[$1]} * 1000000 / $ticks_per_s / ($jobs * $rounds)" | bc -l; }
printf '\nslurmctld CPU per submission     us        jobs per CPU-second\n'
for c in none scaleguard lua budgets; do
  printf '%-32s %6.0f %12.0f\n' "$c" "$(cpu_us "$c")" "$(echo "1000000 / $(cpu_us "$c")" | bc -l)"
done
n=$(cpu_us none) g=$(cpu_us scaleguard) l=$(cpu_us lua)
printf 'CPU capacity scaleguard / none = %.3f   (target >= 0.95)\n' "$(echo "$n / $g" | bc -l)"
printf 'CPU capacity scaleguard / lua  = %.3f   (target > 1)\n' "$(echo "$l / $g" | bc -l)"
b=$(cpu_us budgets)
printf 'CPU capacity budgets / none    = %.3f   (target >= 0.95)\n' "$(echo "$n / $b" | bc -l)"
