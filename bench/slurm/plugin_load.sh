#!/usr/bin/env bash
# Load time of a Slurm plugin, as a ratio of two builds measured side by side in one run:
# each sample is one dlopen in a fresh process (plugin_load.c), the two plugins alternate,
# medians over SAMPLES each. Issue 30 compares job_submit_scaleguard.so before and after the
# parts that do not run in slurmctld left planner/.
#
#   bench/slurm/plugin_load.sh BASELINE.so CANDIDATE.so [SAMPLES=200]
#
# Prints both medians (microseconds) and CANDIDATE / BASELINE. Sizes are printed too (exact).
# LIBSLURMFULL: Slurm's library the plugins resolve against (default: Debian's, else found
# under /usr/lib*, /opt/slurm).
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,12p' "$0"; exit 2; }
base=$1 cand=$2 samples=${3:-200}
here=$(cd "$(dirname "$0")" && pwd)
slurmfull=${LIBSLURMFULL:-}
if [ -z "$slurmfull" ]; then
  slurmfull=$(find /usr/lib/x86_64-linux-gnu/slurm-wlm /usr/lib64/slurm /usr/lib/slurm /opt/slurm/lib/slurm \
                   -maxdepth 1 -name 'libslurmfull*.so' 2>/dev/null | head -n 1 || true)
fi
[ -f "$slurmfull" ] || { echo "libslurmfull.so not found: set LIBSLURMFULL" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/load" "$here/plugin_load.c" -ldl
for so in "$base" "$cand"; do "$work/load" "$slurmfull" "$so" > /dev/null; done   # warm the page cache
for ((i = 0; i < samples; i++)); do
  "$work/load" "$slurmfull" "$base" >> "$work/base"
  "$work/load" "$slurmfull" "$cand" >> "$work/cand"
done
median() { sort -n "$1" | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
mb=$(median "$work/base") mc=$(median "$work/cand")
printf 'size     baseline %s bytes (text %s), candidate %s bytes (text %s)\n' \
  "$(stat -c %s "$base")" "$(size "$base" | awk 'NR == 2 {print $1}')" \
  "$(stat -c %s "$cand")" "$(size "$cand" | awk 'NR == 2 {print $1}')"
printf 'dlopen   baseline %s us, candidate %s us (medians of %d, alternating)\n' "$mb" "$mc" "$samples"
awk -v b="$mb" -v c="$mc" 'BEGIN {printf "ratio    candidate / baseline = %.3f\n", c / b}'
