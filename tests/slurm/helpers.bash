# Shared helpers for the live Slurm tests (tests/slurm/*.bats). Load with
#   load helpers
# in a .bats file; then `setup_file() { cluster_env; }` or call cluster_env in setup().
# The cluster comes from scripts/dev-cluster/up (ctest's dev_cluster fixture).

bats_load_library_path=/usr/lib/bats
load "$bats_load_library_path/bats-support/load"
load "$bats_load_library_path/bats-assert/load"

: "${SCALEGUARD_SOURCE_DIR:=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}"
: "${SCALEGUARD_BUILD_DIR:=$SCALEGUARD_SOURCE_DIR/build}"
: "${SCALEGUARD_DEV_DIR:=$SCALEGUARD_BUILD_DIR/dev-cluster}"
: "${SCALEGUARD_TEST_USER:=sguser}"
export SCALEGUARD_SOURCE_DIR SCALEGUARD_BUILD_DIR SCALEGUARD_DEV_DIR SCALEGUARD_TEST_USER
# A hang guard per test (a job that never starts must fail its test, not the whole file's
# ctest timeout); generous because the CI machine is loaded.
: "${BATS_TEST_TIMEOUT:=240}"
export BATS_TEST_TIMEOUT
# `sbatch --wait` runs under `timeout "$SBATCH_WAIT_S"`: a job Slurm holds after a failed
# launch keeps sbatch waiting forever, and bats' own timeout does not always end a child of
# `run`; this fails the test with status 124 first.
: "${SBATCH_WAIT_S:=200}"

# Exports SLURM_CONF and PATH for the dev cluster; fails when it is not up.
cluster_env() {
  [ -r "$SCALEGUARD_DEV_DIR/env.sh" ] ||
    { echo "no dev cluster in $SCALEGUARD_DEV_DIR: run scripts/dev-cluster/up" >&2; return 1; }
  source "$SCALEGUARD_DEV_DIR/env.sh"
  scontrol ping | grep -q 'is UP' ||
    { echo "slurmctld of $SCALEGUARD_DEV_DIR does not answer" >&2; return 1; }
}

# A scratch directory the test user can write (bats' own tmpdir is private to root).
user_dir() {
  local d
  d=$(mktemp -d /tmp/scaleguard-test.XXXXXX)
  chown "$SCALEGUARD_TEST_USER" "$d"
  echo "$d"
}

# Runs a command as the non-root test user with the cluster's environment, in directory $1.
as_user() {
  local dir=$1; shift
  (cd "$dir" && runuser -u "$SCALEGUARD_TEST_USER" -- \
    env SLURM_CONF="$SLURM_CONF" PATH="$PATH" HOME="$dir" "$@")
}

# Submits with sbatch --parsable; sets job_id, or fails showing sbatch's output.
submit() {
  local out
  out=$(sbatch --parsable "$@" 2>&1) || { echo "sbatch $*: $out" >&2; return 1; }
  job_id=$(tail -n 1 <<<"$out" | cut -d';' -f1)
  [[ $job_id =~ ^[0-9]+$ ]] || { echo "sbatch $*: no job id in: $out" >&2; return 1; }
}

# start_requeued JOB: a requeued job is held for Slurm's requeue delay (cred_expire, 120 s).
# Once it is pending again, its begin time is moved 2 s on (not now: a slurmd refuses a
# relaunch within the second it killed the job, "already killed"); the begin time passing is
# no scheduling event, so a second update (which queues the scheduler) starts it then instead
# of at slurmctld's next periodic pass, 20-30 s later.
start_requeued() {
  local i
  for ((i = 0; i < 1500; i++)); do
    [ "$(squeue -h -j "$1" -o %T)" = PENDING ] &&
      scontrol update jobid="$1" StartTime=now+2 2>/dev/null && break
    sleep 0.2
  done
  ((i < 1500)) || { echo "job $1 never pending again" >&2; return 1; }
  sleep 2.5
  scontrol update jobid="$1" StartTime=now 2>/dev/null || true
}

# Waits until job $1 ends (at most $2 seconds, default 60: a hang guard, not a measurement);
# prints the final state (GONE when slurmctld no longer knows the job).
wait_job() {
  local id=$1 limit=$(( ${2:-60} * 5 )) i state
  for ((i = 0; i < limit; i++)); do
    state=$(squeue -h -j "$id" -t all -o %T 2>/dev/null)
    case $state in
      "") echo GONE; return 0 ;;
      COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|PREEMPTED|BOOT_FAIL|DEADLINE)
        echo "$state"; return 0 ;;
    esac
    sleep 0.2
  done
  echo "job $id still $state after ${2:-60} s" >&2
  scontrol show job "$id" >&2
  # What holds it: other jobs, node states, reservations.
  { echo "-- squeue"; squeue -h -t all -o '%i %u %j %T %R %b' ; echo "-- sinfo"; sinfo -N -h -o '%N %T %G %E'
    echo "-- reservations"; scontrol show reservation; } >&2 2>/dev/null
  return 1
}

# One field of `scontrol show job` (single line per field: Comment may contain spaces).
job_field() {
  scontrol show job "$1" | tr -s ' ' '\n' | sed -n "s/^$2=//p" | head -n 1
}

# The job's AdminComment, where job_submit/scaleguard records its plan (may contain spaces;
# users cannot edit it).
job_comment() {
  scontrol show job "$1" | sed -n 's/^ *AdminComment=//p' | sed 's/ *$//'
}

# slurmctld still answers and its pid is alive.
assert_slurmctld_alive() {
  local pid
  pid=$(cat "$SCALEGUARD_DEV_DIR/run/slurmctld.pid")
  kill -0 "$pid" || fail "slurmctld (pid $pid) is gone: see $SCALEGUARD_DEV_DIR/log/slurmctld.log"
  scontrol ping | grep -q 'is UP' || fail "slurmctld does not answer"
}

# True when the cluster's Slurm is release $1 or later ("23.02"): the clients on PATH are the
# cluster's own (scripts/dev-cluster puts a SCALEGUARD_SLURM_PREFIX first).
slurm_at_least() {
  local have want
  have=$(scontrol --version | sed -n 's/^slurm[-a-z]* \([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
  [ -n "$have" ] || fail "cannot read the Slurm release from: $(scontrol --version)"
  want=${1/./ }
  # shellcheck disable=SC2086
  printf '%d %d\n%d %d\n' $want $have | sort -n -k1,1 -k2,2 -C
}

# True when `up` loaded the scaleguard SPANK plugin (the --train-* options exist).
spank_loaded() {
  grep -q 'scaleguard\.so' "$SCALEGUARD_DEV_DIR/etc/plugstack.conf" 2>/dev/null
}

# Skips the test unless the SPANK plugin is loaded.
require_spank() {
  spank_loaded || skip "scaleguard SPANK plugin not loaded (${SCALEGUARD_PLUGIN_DIR:-$SCALEGUARD_BUILD_DIR/spank-plugin/spank}/scaleguard.so): no --train-* options"
}

# A client-side copy of the cluster's configuration in directory $1 whose plugstack.conf
# holds $2 (empty: no SPANK plugin). Prints the copy's slurm.conf path. This is what any user
# can do: SLURM_CONF is theirs to choose.
client_conf() {
  mkdir -p "$1"
  cp "$SCALEGUARD_DEV_DIR"/etc/*.conf "$1/"
  printf '%s\n' "$2" > "$1/plugstack.conf"
  chmod -R a+rX "$1"
  echo "$1/slurm.conf"
}

# Restarts slurmctld with its saved state (jobs and nodes kept), e.g. after changing
# etc/job_submit_scaleguard.conf. Fails with the log tail if it does not come back.
restart_slurmctld() {
  local pid i
  # Not while a job completes (a file's scancel just before): slurmctld 22.05 recovering a
  # completing job's GPUs after a restart frees them twice ("gres count underflow") and later
  # jobs then pend on Resources with idle nodes. Bounded: 30 s.
  for ((i = 0; i < 60; i++)); do
    [ -z "$(squeue -h -t completing -o %i 2>/dev/null)" ] && break
    sleep 0.5
  done
  pid=$(cat "$SCALEGUARD_DEV_DIR/run/slurmctld.pid" 2>/dev/null) || pid=
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  slurmctld -f "$SLURM_CONF" || true
  for ((i = 0; i < 100; i++)); do
    scontrol ping 2>/dev/null | grep -q 'is UP' && break
    sleep 0.1
  done
  if ((i == 100)); then
    tail -n 20 "$SCALEGUARD_DEV_DIR/log/slurmctld.log" >&2
    return 1
  fi
  wait_nodes_registered
}

# Waits (bounded, 60 s) until every node has registered with slurmctld: after a restart nodes
# read "unknown" until their slurmd answers, and a later test file expects them idle.
wait_nodes_registered() {
  local i
  for ((i = 0; i < 600; i++)); do
    [ -z "$(sinfo -h -N -t unknown -o %N 2>/dev/null)" ] && return 0
    sleep 0.1
  done
  echo "nodes still unknown 60 s after slurmctld's start: $(sinfo -h -N -o '%N %T')" >&2
  return 1
}

# The job id in the output of `sbatch --parsable` captured by `run` (stderr lines such as the
# plugin's message may come before or after it).
parsed_job_id() {
  grep -E '^[0-9]+(;[^ ]*)?$' <<<"$output" | tail -n 1 | cut -d';' -f1
}

# Returns drained or down nodes to service (a job whose launch fails on a node, e.g. a
# required SPANK plugin refusing in the remote context, makes slurmctld drain that node).
# Call it in teardown_file after tests that provoke such failures.
# Waits (bounded, 60 s) until no job runs or completes: a file that cancels its jobs at its end
# leaves the nodes idle for the next file (cluster.bats expects idle nodes).
wait_no_running_jobs() {
  local i
  for ((i = 0; i < 120; i++)); do
    [ -z "$(squeue -h -t running,completing,configuring -o %i 2>/dev/null)" ] && return 0
    sleep 0.5
  done
  echo "# jobs still running after 60 s: $(squeue -h -t running,completing -o '%i %j %T' | tr '\n' ' ')" >&3
}

resume_nodes() {
  local n
  wait_nodes_registered || true
  for n in $(sinfo -h -N -t drain,drng,down -o %N | sort -u); do
    scontrol update nodename="$n" state=resume
  done
}
