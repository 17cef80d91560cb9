# Shared by the runner tests: a scratch directory, a token file, and mpirun wrappers that
# can never hang a test run (timeout) and record every rank's own exit code.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
run=${SCALEGUARD_RUN:?set SCALEGUARD_RUN to the scaleguard-run binary}
mpiexec=${MPIEXEC:-mpirun}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_WAIT_POLICY=passive
# No plan from a surrounding job may leak into the tests.
unset SCALEGUARD_STRATEGY SCALEGUARD_TP SCALEGUARD_PP SCALEGUARD_DP SCALEGUARD_ZERO SCALEGUARD_MICRO_BATCH SCALEGUARD_RECOMPUTE SCALEGUARD_PRECISION
work=$(mktemp -d /tmp/scaleguard-runner-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"

fail() { echo "FAIL: $*" >&2; exit 1; }

# The fortunes corpus (plain files have no extension) as byte tokens.
fortunes_tokens() {
  local files
  files=$(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.*' | sort)
  [ -n "$files" ] || fail "no fortunes corpus under /usr/share/games/fortunes (apt-get install fortunes)"
  # shellcheck disable=SC2086
  "$run" prep --input $files --output "$1"
}

# mpi N ARGS...: scaleguard-run on N ranks; stdout/stderr to the caller.
mpi() {
  local n=$1; shift
  timeout 180 "$mpiexec" -np "$n" --oversubscribe --bind-to none "$run" "$@"
}

# mpi_rc N PREFIX ARGS...: like mpi, but every rank writes its exit code to PREFIX.<rank>.
# RANK_ENV, when set, is shell code each rank runs first (e.g. a rank-dependent export).
# Returns mpirun's status (124 after a hang).
mpi_rc() {
  local n=$1 prefix=$2; shift 2
  timeout 120 "$mpiexec" -np "$n" --oversubscribe --bind-to none \
    bash -c "${RANK_ENV:-}"'
      "$0" "$@"; rc=$?; echo $rc > '"$prefix"'.$OMPI_COMM_WORLD_RANK; exit $rc' "$run" "$@"
}

# mpi_signalable N METRICS ARGS...: scaleguard-run ARGS --metrics METRICS on N ranks in the
# background ($launcher is mpirun's pid), for a test that signals a rank: each rank writes
# its pid to pid.<rank> and its own exit code to rc.<rank>. Returns once every rank runs and
# METRICS has 3 steps; 1 if that takes over 2 minutes.
mpi_signalable() {
  local n=$1 metrics=$2; shift 2
  timeout 120 "$mpiexec" -np "$n" --oversubscribe --bind-to none bash -c '
    "$0" "$@" & child=$!
    echo $child > pid.$OMPI_COMM_WORLD_RANK
    wait $child; rc=$?
    # bash returns from wait early when it is signalled itself; wait for the real exit.
    while kill -0 $child 2>/dev/null; do wait $child; rc=$?; done
    echo $rc > rc.$OMPI_COMM_WORLD_RANK' "$run" "$@" --metrics "$metrics" &
  launcher=$!
  for _ in $(seq 1200); do
    [ -f "pid.$((n - 1))" ] && [ -f "$metrics" ] && [ "$(grep -c '"step"' "$metrics")" -ge 3 ] && return 0
    sleep 0.1
  done
  return 1
}

# final_field FILE KEY: a field of the metrics file's {"final":true,...} line.
final_field() { grep '"final":true' "$1" | sed -E "s/.*\"$2\":\"?([^,\"}]*).*/\1/"; }

# same_losses REF OTHER: every step OTHER logged has exactly REF's loss (why on stderr if not).
same_losses() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
ref, got = ({r["step"]: r["loss"] for r in map(json.loads, open(p)) if "loss" in r and not r.get("final")}
            for p in sys.argv[1:])
if not got:
    sys.exit(f"{sys.argv[2]}: no steps logged")
bad = [s for s in got if got[s] != ref.get(s)]
sys.exit(f"{sys.argv[2]}: steps {bad} differ from {sys.argv[1]}" if bad else 0)
PY
}

# same_run REF OTHER: same_losses, and the same final params_checksum (returns, never exits).
same_run() {
  same_losses "$1" "$2" || return 1
  local want got
  want=$(final_field "$1" params_checksum); got=$(final_field "$2" params_checksum)
  [ -n "$want" ] && [ "$want" = "$got" ] ||
    { echo "$2: params_checksum '$got' differs from $1's '$want'" >&2; return 1; }
}

# expect_same_run REF OTHER: same_run or fail.
expect_same_run() { same_run "$1" "$2" || fail "$2 is not the uninterrupted run $1 bit for bit"; }
