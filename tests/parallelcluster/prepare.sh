#!/usr/bin/env bash
# tests/parallelcluster/prepare.sh: what the ParallelCluster-shaped tests need, made once and
# reused (a lock keeps two ctest entries from building at once):
#   - a source-built Slurm release, ParallelCluster's /opt/slurm shape (bin sbin lib/slurm include
#     etc): `scripts/slurm-release build $SCALEGUARD_PC_SLURM_VERSION` (cached when complete;
#     SCALEGUARD_PC_SLURM_PREFIX=DIR uses an installed one instead);
#   - $SCALEGUARD_PC_WORK/build: the CLI and both plugins built against that release's headers
#     (`scripts/slurm-release plugins`), installing the plugins into the test's fake
#     /opt/slurm/lib/slurm. No scaleguard-run there: a head node built without LibTorch.
# Writes $SCALEGUARD_PC_WORK/prefix (the Slurm prefix). Exits 77 (SKIP) when the release's
# source tarball is missing.
set -euo pipefail
src=${SCALEGUARD_SOURCE_DIR:?}
work=${SCALEGUARD_PC_WORK:?}
version=${SCALEGUARD_PC_SLURM_VERSION:-25.11.7}
build=$work/build
mkdir -p "$work"
exec 7> "$work/.prepare.lock"
flock 7
export CCACHE_NOHASHDIR=1
t0=$SECONDS
if [ -n "${SCALEGUARD_PC_SLURM_PREFIX:-}" ]; then
  prefix=$SCALEGUARD_PC_SLURM_PREFIX
  [ -x "$prefix/sbin/slurmctld" ] || { echo "prepare: $prefix/sbin/slurmctld missing" >&2; exit 1; }
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSCALEGUARD_SLURM_PREFIX="$prefix" \
    -DSCALEGUARD_SLURM=ON -DSCALEGUARD_RUNNER=OFF -DSCALEGUARD_TESTS=OFF -DSCALEGUARD_BENCH=OFF \
    -DSCALEGUARD_FUZZ=OFF > "$work/prepare-cmake.log" 2>&1 || { cat "$work/prepare-cmake.log" >&2; exit 1; }
else
  rc=0
  prefix=$("$src/scripts/slurm-release" build "$version") || rc=$?
  [ "$rc" = 77 ] && { echo "SKIP: no Slurm $version source tarball (scripts/slurm-release said why)" >&2; exit 77; }
  [ "$rc" = 0 ] || { echo "prepare: scripts/slurm-release build $version failed ($rc)" >&2; exit 1; }
  "$src/scripts/slurm-release" plugins "$version" "$build" > /dev/null
fi
# The plugins go where the test's ParallelCluster layout keeps Slurm's plugins.
cmake -S "$src" -B "$build" -DSCALEGUARD_SLURM_PLUGIN_DIR="$work/root/opt/slurm/lib/slurm" \
  > "$work/prepare-cmake.log" 2>&1 || { cat "$work/prepare-cmake.log" >&2; exit 1; }
nice -n 5 cmake --build "$build" -j2 --target scaleguard job_submit_scaleguard scaleguard_spank \
  > "$work/prepare-build.log" 2>&1 || { tail -n 40 "$work/prepare-build.log" >&2; exit 1; }
echo "$prefix" > "$work/prefix"
echo "prepare: Slurm $("$prefix/sbin/slurmctld" -V) in $prefix, plugins and CLI in $build ($((SECONDS - t0)) s)"
