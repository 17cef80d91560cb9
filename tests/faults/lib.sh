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

# --- train_*.sh: checkpoints inside the real training loop (scaleguard-run) ---
# A tiny GPT on random tokens: a step takes milliseconds, and bit-exact results need no corpus.
# No plan from a surrounding job may leak in.
unset SCALEGUARD_STRATEGY SCALEGUARD_TP SCALEGUARD_PP SCALEGUARD_DP SCALEGUARD_ZERO SCALEGUARD_MICRO_BATCH \
  SCALEGUARD_CKPT_DIR SCALEGUARD_CKPT_INTERVAL_S
export OMP_WAIT_POLICY=passive
MODEL=(--model gpt --n-layer 1 --n-head 2 --n-embd 32 --seq-len 32 --global-batch 8 --synthetic 60000
       --seed 7 --threads 1 --log-every 1 --quiet)

# train NP LOG ARGS...: scaleguard-run train on NP real ranks, output to LOG. Each rank's
# pid goes to $WORK/pid.<rank> (so a test can signal or kill it) and its own exit code to
# $WORK/rc.<rank>. Returns mpirun's status.
train() {
  local np=$1 log=$2
  shift 2
  rm -f "$WORK"/pid.* "$WORK"/rc.*
  local pass=()
  [ -n "${SCALEGUARD_TEST_PAUSE_IN_SAVE:-}" ] && pass=(-x SCALEGUARD_TEST_PAUSE_IN_SAVE)
  echo "+ train $np ranks: $*" >&2
  timeout 240 "$MPIEXEC" -np "$np" --oversubscribe --bind-to none "${pass[@]}" bash -c '
    "$0" "$@" & child=$!
    echo $child > '"$WORK"'/pid.$OMPI_COMM_WORLD_RANK
    wait $child; rc=$?
    # bash returns from wait early when it is signalled itself; wait for the real exit.
    while kill -0 $child 2>/dev/null; do wait $child; rc=$?; done
    echo $rc > '"$WORK"'/rc.$OMPI_COMM_WORLD_RANK
    exit $rc' "$SCALEGUARD_RUN" train "${MODEL[@]}" "$@" >"$log" 2>&1
}

# wait_for FILE TEXT: until FILE contains TEXT (60 s at most).
wait_for() {
  local _
  for _ in $(seq 600); do
    grep -qF -- "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  cat "$1" >&2
  fail "never saw '$2' in $1"
}

# rank_rc R: the exit code rank R recorded.
rank_rc() { cat "$WORK/rc.$1" 2>/dev/null || echo none; }

# losses METRICS: "step loss" of every logged step; checksum METRICS: the final params_checksum.
losses() { jq -r 'select(.step != null and .final != true) | "\(.step) \(.loss)"' "$1"; }
checksum() { jq -r 'select(.final == true) | .params_checksum' "$1"; }

# same_losses REF OTHER: every step OTHER logged has the loss REF logged for that step.
same_losses() {
  local first last
  first=$(losses "$2" | head -1 | cut -d' ' -f1)
  last=$(losses "$2" | tail -n 1 | cut -d' ' -f1)
  [ -n "$first" ] || fail "$2 logged no step"
  diff <(losses "$1" | awk -v f="$first" -v l="$last" '$1 >= f && $1 <= l') <(losses "$2") >&2 ||
    fail "losses of $2 differ from the uninterrupted run's $1"
}

# train_ok NAME NP ARGS...: train on NP ranks with log $WORK/NAME.log and metrics
# $WORK/NAME.jsonl; the log is shown, and a failed run fails the test.
train_ok() {
  local name=$1 np=$2
  shift 2
  train "$np" "$WORK/$name.log" "$@" --metrics "$WORK/$name.jsonl" ||
    { cat "$WORK/$name.log" >&2; fail "run '$name' failed"; }
  cat "$WORK/$name.log" >&2
}

# reference NP ARGS...: the uninterrupted run "ref" that interrupted and resumed runs are
# compared with; REF is its final params_checksum.
reference() {
  train_ok ref "$@"
  REF=$(checksum "$WORK/ref.jsonl")
  [ -n "$REF" ] || fail "no params_checksum in the uninterrupted run's metrics"
}

# same_checksum NAME: run NAME ended with the reference's params_checksum.
same_checksum() {
  local got
  got=$(checksum "$WORK/$1.jsonl")
  [ "$got" = "$REF" ] || fail "params_checksum $got of run '$1' differs from the uninterrupted run's $REF"
}

# same_as_reference NAME: every step run NAME logged has the reference's loss, and it ended
# with the reference's params_checksum.
same_as_reference() {
  same_losses "$WORK/ref.jsonl" "$WORK/$1.jsonl"
  same_checksum "$1"
}

# resumed_step LOG: N from "resumed from step-N".
resumed_step() { sed -n 's/.*resumed from step-0*\([0-9][0-9]*\) .*/\1/p' "$1" | head -1; }
