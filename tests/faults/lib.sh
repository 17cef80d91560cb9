# Shared by the fault scripts: a private work directory, mpirun, and assertions.
# Needs CKPT_TOOL (ckpt_fault_tool), SCALEGUARD_CLI (scaleguard) and MPIEXEC (mpirun), set by ctest.
set -euo pipefail
: "${CKPT_TOOL:?set by ctest}" "${SCALEGUARD_CLI:?set by ctest}"
MPIEXEC=${MPIEXEC:-mpirun}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
WORK=$(mktemp -d /tmp/ckpt-faults.XXXXXX)
chmod 755 "$WORK"
CLEANUP=()
cleanup() {
  local c
  for c in "${CLEANUP[@]}"; do eval "$c" || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

# ranks N ARGS...: the test tool under mpirun with N real ranks.
ranks() {
  local np=$1
  shift
  "$MPIEXEC" -np "$np" --oversubscribe --bind-to none "$CKPT_TOOL" "$@"
}

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# expect_rc CODE CMD...: runs CMD with output in $WORK/out (also shown), checks its exit code.
expect_rc() {
  local want=$1 rc=0
  shift
  echo "+ $*" >&2
  "$@" >"$WORK/out" 2>&1 || rc=$?
  cat "$WORK/out" >&2
  [ "$rc" -eq "$want" ] || fail "expected exit $want, got $rc from: $*"
}

# expect_log TEXT: the last expect_rc's output contains TEXT.
expect_log() { grep -qF -- "$1" "$WORK/out" || fail "output lacks: $1"; }
