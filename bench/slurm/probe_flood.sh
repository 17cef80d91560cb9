#!/usr/bin/env bash
# A submission's cost with a flooded probe store vs an empty one (issue 25, class 8): the same
# held 2-node job of a probed model (job_submit/scaleguard reads the store for it and rewrites
# it on root's record), submitted with the store holding root's record only ("empty") and with
# 65,536 more junk names in the store itself, half of them named like the model's records
# ("flooded"). The two alternate over several rounds (the order rotates) on one dev cluster;
# the flood is made and removed outside the measured windows. Three measures as in
# submit_throughput.sh: sbatch processes per second, slurmctld's own submit-RPC time (its log's
# usec=), slurmctld's CPU time per submission. Target: flooded within 5 % of empty.
#   bench/slurm/probe_flood.sh [JOBS_PER_ROUND] [ROUNDS] [JUNK]      (defaults 100, 4, 65536)
# Needs root and a build with job_submit_scaleguard and the SPANK plugin (--train-model).
set -euo pipefail
cd "$(dirname "$0")/../.."
jobs=${1:-100}
rounds=${2:-4}
junk=${3:-65536}
export SCALEGUARD_BUILD_DIR=${SCALEGUARD_BUILD_DIR:-build}
export SCALEGUARD_DEV_DIR=${SCALEGUARD_BENCH_DEV_DIR:-$SCALEGUARD_BUILD_DIR/bench-dev-cluster}
export SCALEGUARD_ACCOUNTING=0
work=$(mktemp -d)
chmod 755 "$work"
store=$work/probes
mkdir -p "$store" && chmod 1777 "$store"
install -d -m 0755 "$store/u0"
model='layers=2,hidden=128,heads=4,seq=64,vocab=256,precision=fp32'
fp=$(python3 -c '
h = 1469598103934665603
for c in b"gpt;L=2;h=128;a=4;s=64;v=256;p=fp32":
    h = ((h ^ c) * 1099511628211) % (1 << 64)
print("%016x" % h)')
cat > "$store/u0/$fp.p4d.24xlarge.r2n2.u0.rec" <<EOF
format=2
fingerprint=$fp
instance=p4d.24xlarge
device=cuda
gpu=A100-40GB
ranks=2
nodes=2
micro_batch=8
step_s_1=0.1
step_s_n=2
speedup=0.05
comm_ratio=50
peak_bytes=1e+09
gpu_hours=0.01
time=$(date +%s)
date=$(date -u +%F)
scaleguard=bench
job_id=1
user=root
EOF
cat > "$work/policy.ini" <<EOF
catalog = $PWD/configs/catalog.ini
checkpoint_roots = /tmp
trusted_users = root
probe_store = $store
probe_max_age = 30d
[rules]
distributed_min_gpu_hours = off
single_gpu_max_hours = off
consider_distributed_hours = off
checkpoint_required_gpu_hours = off
time_limit_fits = off
max_comm_ratio = 4 rewrite
min_doubling_speedup = 0.3 rewrite
[partition gpu-od]
instance = p4d.24xlarge
default = yes
[partition gpu-spot]
instance = p4d.24xlarge
capacity = spot
EOF
request=(-H -N2 --gpus-per-node=8 --time=60 "--train-model=$model" --train-tokens=1T -o /dev/null --wrap true)
flood() {
  python3 -c '
import os, sys
d, fp, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(n):
    name = "%s.junk%d.u0.rec" % (fp, i) if i % 2 else "junk%d" % i
    os.close(os.open(os.path.join(d, name), os.O_CREAT | os.O_WRONLY, 0o644))
' "$store" "$fp" "$junk"
}
unflood() { find "$store" -maxdepth 1 -type f -delete; }

ticks_per_s=$(getconf CLK_TCK)
cpu_of() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
trap 'scripts/dev-cluster/down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
SCALEGUARD_POLICY=$work/policy.ini scripts/dev-cluster/up >/dev/null
source "$SCALEGUARD_DEV_DIR/env.sh"
ctld=$(cat "$SCALEGUARD_DEV_DIR/run/slurmctld.pid")
# The record must apply, or this measures nothing.
sbatch --test-only "${request[@]}" 2>&1 | grep -q measured ||
  { echo "root's record does not apply: $(sbatch --test-only "${request[@]}" 2>&1)" >&2; exit 1; }
declare -A total_s cpu_ticks
configs=(empty flooded)
for ((round = 1; round <= rounds; round++)); do
  shift_by=$(( (round - 1) % 2 ))
  order=("${configs[@]:shift_by}" "${configs[@]:0:shift_by}")
  for config in "${order[@]}"; do
    unflood
    [ "$config" = flooded ] && flood
    scancel -u root 2>/dev/null || true
    while [ -n "$(squeue -h -o %A)" ]; do sleep 0.2; done
    first=$(sbatch --parsable "${request[@]}" 2>/dev/null | tail -n 1)   # warm-up
    cpu0=$(cpu_of "$ctld")
    start=$(date +%s.%N)
    for ((i = 0; i < jobs; i++)); do sbatch "${request[@]}" >/dev/null 2>&1; done
    end=$(date +%s.%N)
    cpu1=$(cpu_of "$ctld")
    held=$(squeue -h -t PD -o %A | wc -l)
    [ "$held" -eq $((jobs + 1)) ] || { echo "$config: $held of $((jobs + 1)) jobs queued" >&2; exit 1; }
    cpu_ticks[$config]=$(( ${cpu_ticks[$config]:-0} + cpu1 - cpu0 ))
    total_s[$config]=$(echo "${total_s[$config]:-0} + $end - $start" | bc -l)
    grep -o '_slurm_rpc_submit_batch_job: JobId=[0-9]* .*usec=[0-9]*' "$SCALEGUARD_DEV_DIR/log/slurmctld.log" |
      sed 's/.*JobId=\([0-9]*\) .*usec=\([0-9]*\)/\1 \2/' |
      awk -v first="$first" -v last=$((first + jobs)) '$1 > first && $1 <= last { print $2 }' >> "$work/usec.$config"
    printf 'round %d %-8s %4d jobs in %6.2f s, slurmctld CPU %5.2f s, %d names in the store\n' "$round" "$config" \
      "$jobs" "$(echo "$end - $start" | bc -l)" "$(echo "($cpu1 - $cpu0) / $ticks_per_s" | bc -l)" \
      "$(ls -f "$store" | wc -l)"
  done
done
# Every measured job was rewritten on root's record (the flood hid nothing).
grep -c 'rules=[a-z_,]*\(max_comm_ratio\|min_doubling_speedup\)' "$SCALEGUARD_DEV_DIR/log/slurmctld.log" |
  awk -v want=$(( (jobs + 1) * rounds * 2 )) '$1 < want { print "only " $1 " of " want " jobs rewritten on the record" > "/dev/stderr"; exit 1 }'
unflood
median_us() { sort -n "$work/usec.$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
mean_us() { awk '{ s += $1 } END { print s / NR }' "$work/usec.$1"; }
cpu_us() { echo "${cpu_ticks[$1]} * 1000000 / $ticks_per_s / ($jobs * $rounds)" | bc -l; }
rate() { echo "$jobs * $rounds / ${total_s[$1]}" | bc -l; }
printf '\n%-10s %10s %14s %14s %12s\n' store jobs/s "rpc median us" "rpc mean us" "CPU us/job"
for c in empty flooded; do
  printf '%-10s %10.1f %14d %14.0f %12.0f\n' "$c" "$(rate "$c")" "$(median_us "$c")" "$(mean_us "$c")" "$(cpu_us "$c")"
done
printf 'flooded / empty: throughput %.3f, rpc mean %.3f, CPU %.3f   (target: within 5 %%)\n' \
  "$(echo "$(rate flooded) / $(rate empty)" | bc -l)" "$(echo "$(mean_us flooded) / $(mean_us empty)" | bc -l)" \
  "$(echo "$(cpu_us flooded) / $(cpu_us empty)" | bc -l)"
