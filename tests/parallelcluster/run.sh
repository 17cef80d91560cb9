#!/usr/bin/env bash
# ctest entry point: prepare.sh (77 = SKIP, no Slurm tarball), then bats on one file.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
"$here/prepare.sh" || exit $?
exec bats --timing "$@"
