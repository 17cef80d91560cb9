#!/usr/bin/env bash
# goodput.live: in-job restart, hang and straggler detection (issue 38 items 2 and 4) on a
# cluster of its own: four nodes (three to train on and a spare), its own state directory and
# ports, so it runs beside the tests/slurm suites. Brings the cluster up, runs
# injob_restart.bats, takes it down.
#
#   live.sh WORK_DIR BUILD_DIR
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source_dir=$(cd "$here/../.." && pwd)
work=${1:?usage: live.sh WORK_DIR BUILD_DIR}
build=$(cd "${2:?usage: live.sh WORK_DIR BUILD_DIR}" && pwd)
[ -x "$build/runner/scaleguard-run" ] || { echo "goodput: no $build/runner/scaleguard-run" >&2; exit 77; }
[ "$(id -u)" = 0 ] || { echo "goodput: the dev cluster needs root" >&2; exit 77; }
mkdir -p "$work"
# The shipped policy judges at most 2 nodes a partition (the shared dev cluster's): 4 here.
sed -e 's/^max_nodes = 2$/max_nodes = 4/' -e "s|^catalog = catalog.ini|catalog = $source_dir/configs/catalog.ini|" \
  "$source_dir/configs/policy.ini" > "$work/policy.ini"
export SCALEGUARD_DEV_DIR=$work/dev SCALEGUARD_BUILD_DIR=$build SCALEGUARD_SOURCE_DIR=$source_dir
export SCALEGUARD_DEV_EXTRA_NODES=2 SCALEGUARD_ACCOUNTING=0 SCALEGUARD_POLICY=$work/policy.ini
trap '"$source_dir/scripts/dev-cluster/down" >/dev/null 2>&1' EXIT
"$source_dir/scripts/dev-cluster/up" || { echo "goodput: dev-cluster up failed" >&2; exit 1; }
bats --timing "$here/injob_restart.bats"
