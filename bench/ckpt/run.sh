#!/usr/bin/env bash
# Checkpoint benchmark, one run, ratios against baselines on the same bytes and disk:
#   save  vs dd of the shard file with conv=fsync           (target >= 0.9x dd)
#   load  vs a cold sequential read of the shard (dd)        (target >= 0.9x)
#   async: training-thread time blocked by an async save vs a sync save, medians of 3 each (target <= 5%)
# usage: bench/ckpt/run.sh BUILD_DIR [MB=1024] [DIR=/var/tmp/scaleguard-bench-ckpt]
# ROUNDS (default 5) save/load rounds; the cold reads of this kind of VM disk vary 2-4x from
# one try to the next, so one or three samples decide little.
set -euo pipefail
build=${1:?usage: run.sh BUILD_DIR [MB] [DIR]}
mb=${2:-1024}
dir=${3:-/var/tmp/scaleguard-bench-ckpt}
tool=$(find "$build" -name bench_ckpt -type f -perm -u+x | head -1)
[ -n "$tool" ] || { echo "bench_ckpt not built in $build" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
rm -rf "$dir" && mkdir -p "$dir"
trap 'rm -rf "$dir"' EXIT

# Cold reads need the page cache dropped; say so when that is not permitted.
cold="dropped (echo 3 > /proc/sys/vm/drop_caches)"
drop() { sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || cold="NOT dropped (no permission): reads are warm"; }
val() { sed -n "s/^$1=//p" "$2"; }
now() { date +%s.%N; }

# Rounds alternating ours and the baseline, medians reported: this machine is shared.
rounds=${ROUNDS:-5}
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
for round in $(seq "$rounds"); do
  rm -rf "$dir/ck"
  "$tool" save "$dir/ck" "$mb" >"$dir/save.out"
  val save_seconds "$dir/save.out" >>"$dir/save.s"
  bytes=$(val save_bytes "$dir/save.out")
  shard=$(val shard "$dir/save.out")
  # dd writes the same bytes (the shard, still in the page cache) to the same disk, fsynced.
  t0=$(now)
  dd if="$shard" of="$dir/dd.out" bs=8M conv=fsync status=none
  echo "$(now) - $t0" | bc -l >>"$dir/ddw.s"
  rm -f "$dir/dd.out"
  drop
  "$tool" load "$dir/ck" >"$dir/load.out"
  val load_seconds "$dir/load.out" >>"$dir/load.s"
  drop
  t0=$(now)
  dd if="$shard" of=/dev/null bs=8M status=none
  echo "$(now) - $t0" | bc -l >>"$dir/ddr.s"
done
save_s=$(median <"$dir/save.s")
dd_write_s=$(median <"$dir/ddw.s")
load_s=$(median <"$dir/load.s")
dd_read_s=$(median <"$dir/ddr.s")

drop
"$tool" load "$dir/ck" verify >"$dir/verify.out"
verify_load_s=$(val verify_load_seconds "$dir/verify.out")

"$tool" async "$dir/ak" "$mb" >"$dir/async.out"
sync_s=$(val sync_save_seconds "$dir/async.out")
blocked_s=$(val async_blocked_seconds "$dir/async.out")
plain_s=$(val plain_steps_seconds "$dir/async.out")
async_steps_s=$(val async_steps_seconds "$dir/async.out")
snap=$(val snapshot_bytes "$dir/async.out")
at_step=$(val async_committed_at_step "$dir/async.out")
reserve_s=$(val reserve_seconds "$dir/async.out")
first_s=$(val first_async_blocked_seconds "$dir/async.out")

mib() { echo "scale=0; $1 / 1048576" | bc; }
rate() { echo "scale=0; $1 / 1048576 / $2" | bc -l; }
r() { printf '%.2f' "$(echo "$1" | bc -l)"; }
cat <<OUT
checkpoint benchmark: $(mib "$bytes") MiB shard on $(df --output=source "$dir" | tail -1) ($(df -T "$dir" | awk 'NR==2{print $2}')), page cache $cold
save        HDF5 ${save_s}s ($(rate "$bytes" "$save_s") MiB/s)   dd+fsync ${dd_write_s}s ($(rate "$bytes" "$dd_write_s") MiB/s)   ratio $(r "$dd_write_s / $save_s")x dd
load        HDF5 ${load_s}s ($(rate "$bytes" "$load_s") MiB/s)   cold dd read ${dd_read_s}s ($(rate "$bytes" "$dd_read_s") MiB/s)   ratio $(r "$dd_read_s / $load_s")x
verify+load ${verify_load_s}s (whole-file checksums, then the reads): ratio $(r "$dd_read_s / $verify_load_s")x cold read
async       blocked ${blocked_s}s vs sync save ${sync_s}s: $(r "100 * $blocked_s / $sync_s")% (snapshot $(mib "$snap") MiB host memory, committed after $((at_step + 1)) steps)
            first async save of the process: blocked ${first_s}s (host copies reserved at start-up in ${reserve_s}s)
            those steps: ${plain_s}s without a save, ${async_steps_s}s with the async save running (+$(r "100 * ($async_steps_s - $plain_s) / $plain_s")%: the writer thread shares the 2 cores)
per round, ours/baseline seconds: save $(paste -d/ "$dir/save.s" "$dir/ddw.s" | tr '\n' ' ')
                                  load $(paste -d/ "$dir/load.s" "$dir/ddr.s" | tr '\n' ' ')
save/load: medians of $rounds rounds, async: of 3; save = write + fsync + checksums + commit; load = open + read in place + dataset checksums
OUT
