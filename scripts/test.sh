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
# Open MPI refuses root unless told; CI and the dev machines run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$build"
ctest --output-on-failure --timeout 600 "$@"
