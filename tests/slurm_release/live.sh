#!/usr/bin/env bash
# slurm_release.live_<ver>: the live suite (every tests/slurm/*.bats, unchanged) on a cluster
# that runs SchedMD's Slurm VERSION built from source, with the plugins built against its
# headers. The CLI and runner come from this build tree (they do not link Slurm).
#
#   live.sh VERSION WORK_DIR BUILD_DIR [PLUGIN_BUILD_DIR]
#
# WORK_DIR holds a folder with the two .so files and the cluster's state; the plugins are
# built in PLUGIN_BUILD_DIR (default WORK_DIR/plugins-build; ctest passes the compile check's,
# so they are not built twice).
# Exit 77 (ctest SKIP) when the release's tarball is absent: slurm-release says why.
# Accounting on 25.11 (by default; see below): the release's own slurmdbd (built with
# accounting_storage/mysql by slurm-release) over a fresh MariaDB, as on 22.05, so
# accounting.bats and the budget suites run; without it they skip and say so.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source_dir=$(cd "$here/../.." && pwd)
release=$source_dir/scripts/slurm-release
version=${1:?usage: live.sh VERSION WORK_DIR BUILD_DIR}
work=${2:?usage: live.sh VERSION WORK_DIR BUILD_DIR}
build=${3:?usage: live.sh VERSION WORK_DIR BUILD_DIR}
plugin_build=${4:-$work/plugins-build}
say() { echo "live $version: $*" >&2; }

t0=$SECONDS
prefix=$("$release" build "$version") || exit $?
say "Slurm $version ready in $((SECONDS - t0)) s ($prefix)"
sos=$("$release" plugins "$version" "$plugin_build") || exit $?
rm -rf "$work/plugins"; mkdir -p "$work/plugins"
# shellcheck disable=SC2086
ln -s $sos "$work/plugins/"
# prep/scaleguard (budget_rerun.bats: PrEpPlugins=script,scaleguard) is job_submit_scaleguard.so
# under the name slurmctld looks for, as in the build tree.
ln -s job_submit_scaleguard.so "$work/plugins/prep_scaleguard.so"
[ -f "$work/plugins/job_submit_scaleguard.so" ] && [ -f "$work/plugins/scaleguard.so" ] ||
  { say "plugins missing in $work/plugins"; exit 1; }

export SCALEGUARD_SLURM_PREFIX=$prefix
export SCALEGUARD_PLUGIN_DIR=$work/plugins
export SCALEGUARD_DEV_DIR=$work/dev-cluster
export SCALEGUARD_BUILD_DIR=$build
export SCALEGUARD_SOURCE_DIR=$source_dir
# Accounting (the budget suites, ~6 min a release) by default on the newest release only,
# 25.11 (ParallelCluster's current one), to keep CI under an hour; SCALEGUARD_LIVE_ACCOUNTING=1
# or 0 decides for any release.
case $version in 25.11.*) default_accounting=1 ;; *) default_accounting=0 ;; esac
export SCALEGUARD_ACCOUNTING=${SCALEGUARD_LIVE_ACCOUNTING:-$default_accounting}
# The envelope property test draws random shapes; on 22.05 (tests/slurm) a new seed every run.
# Here one seed checked on 23.11 and 25.11 (300 shapes, 0 violations), so a gap in the test's
# own oracle on a release (one was found: tests/slurm_release/README.md) does not turn a run red
# at random; SEED=random (or any number) explores.
[ "${SEED:-}" = random ] && unset SEED || export SEED=${SEED:-1739745866}
# What the clients and daemons really are: the tests must not run Debian's by accident.
export PATH=$prefix/bin:$prefix/sbin:$PATH

trap '"$source_dir/scripts/dev-cluster/down" >/dev/null 2>&1' EXIT
"$source_dir/scripts/dev-cluster/up" || { say "dev-cluster up failed"; exit 1; }
# 23.11+ clients read a configuration even for --version.
export SLURM_CONF=$SCALEGUARD_DEV_DIR/etc/slurm.conf
say "$(sbatch --version) from $(command -v sbatch)"
case $(sbatch --version) in "slurm $version") ;; *) say "sbatch is not $version"; exit 1 ;; esac
t1=$SECONDS
rc=0
# SCALEGUARD_LIVE_BATS=NAME (e.g. job_submit_derived) runs that file only, for a quick re-check.
for file in "$source_dir"/tests/slurm/${SCALEGUARD_LIVE_BATS:-*}.bats; do
  bats --timing "$file" || rc=1
done
say "suite: $((SECONDS - t1)) s, rc $rc"
exit $rc
