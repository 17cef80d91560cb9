#!/usr/bin/env bash
# slurm_release.compile_<ver>: Slurm VERSION's headers (scripts/slurm-release headers), the two
# plugins built against them (scripts/slurm-release plugins), and their NEEDED libraries.
# Exit 77 (SKIP) when the release's tarball is absent; slurm-release says why on stderr.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
release=$here/../../scripts/slurm-release
version=${1:?usage: compile.sh VERSION [PLUGIN_BUILD_DIR]}
"$release" headers "$version" || exit $?
sos=$("$release" plugins "$version" ${2:+"$2"}) || exit $?
echo "$sos"
# shellcheck disable=SC2086
exec "$here/check-needed.sh" $sos
