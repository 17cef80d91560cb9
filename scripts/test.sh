#!/usr/bin/env bash
# README command two: build everything and run every test (unit, live Slurm, mpirun ranks,
# faults). Tests that need services start them through ctest fixtures and stop them after.
#   scripts/test.sh [ctest args...]     e.g. scripts/test.sh -R planner
# BUILD_DIR (default build) and JOBS (default nproc) may be set.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}
# ccache: hash without the build directory, so the per-release plugin builds and the package
# builds (other build directories, same flags) reuse this build's objects.
export CCACHE_NOHASHDIR=1
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
[ -f "$build/CMakeCache.txt" ] && gen=()
cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$jobs"
# A whole run also runs the live suites on source-built Slurm releases (tests/slurm_release,
# tests/parallelcluster), which need a full Slurm build each the first time on a machine (about
# 5 minutes of both cores). Build them now in the background at the lowest priority: they take
# the CPU the live tests leave idle while they wait on slurmctld (ctest runs slurm_release last);
# ctest's own calls of scripts/slurm-release wait on its lock and reuse the builds.
if [ $# -eq 0 ] && [ "${SCALEGUARD_PREBUILD_SLURM:-1}" = 1 ]; then
  # ParallelCluster's release first: its tests run before slurm_release's.
  releases=$(for key in SCALEGUARD_PC_SLURM_VERSION SCALEGUARD_LIVE_RELEASES; do
      sed -n "s/^$key:STRING=//p" "$build/CMakeCache.txt"; done | tr ';' '\n' | awk 'NF && !seen[$0]++')
  if [ -n "$releases" ]; then
    # shellcheck disable=SC2016,SC2086  # $@ is the inner shell's; one word per release
    setsid nice -n 19 bash -c 'for v in "$@"; do scripts/slurm-release build "$v" || true; done' \
      prebuild $releases >"$build/slurm-prebuild.log" 2>&1 &
    prebuild=$!
    trap 'kill -- -$prebuild 2>/dev/null || true' EXIT
    echo "test.sh: building Slurm ${releases//$'\n'/ } in the background (log: $build/slurm-prebuild.log)"
  fi
fi
# Open MPI refuses root unless told; CI and the dev machines run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$build"
if [ $# -gt 0 ] || [ "${SCALEGUARD_PARALLEL_TAIL:-1}" != 1 ]; then
  exec ctest --output-on-failure --timeout 600 "$@"
fi
# A whole run in two phases, to stay well under an hour on two cores. First everything but the
# release suites and the runner's CPU-bound suites. Then both together: the release clusters
# mostly wait on slurmctld, which leaves the cores to the runner's mpirun ranks. The release
# suites' output follows the runner's, whole.
rc=0
ctest --output-on-failure --timeout 600 -LE '^(slurm_release|runner|faults|fuzz)$' || rc=1
ctest --output-on-failure --timeout 600 -L '^slurm_release$' >slurm-release-tests.log 2>&1 &
releases=$!
ctest --output-on-failure --timeout 600 -L '^(runner|faults|fuzz)$' || rc=1
wait "$releases" || rc=1
echo "test.sh: the release suites (run beside the runner's):"
cat slurm-release-tests.log
exit "$rc"
