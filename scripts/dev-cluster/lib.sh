# Shared by up, down and status: where the cluster lives and how to find its processes.
# Sourced, not run.

src_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
abs() { case $1 in /*) echo "$1" ;; *) echo "$src_dir/$1" ;; esac; }
dev_dir=$(abs "${SCALEGUARD_DEV_DIR:-build/dev-cluster}")
build_dir=$(abs "${SCALEGUARD_BUILD_DIR:-build}")
etc_dir=$dev_dir/etc
run_dir=$dev_dir/run
log_dir=$dev_dir/log
munge_dir=$dev_dir/munge
nodes=(gpu-st-p4d-1 gpu-st-p4d-2)
export SLURM_CONF=$etc_dir/slurm.conf

die() { echo "dev-cluster: $*" >&2; exit 1; }
say() { echo "dev-cluster: $*"; }

# Pid from a pid file if that process still runs.
live_pid() {
  local pid
  [ -r "$1" ] || return 1
  pid=$(tr -dc 0-9 < "$1")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

# Our daemons name the state directory on their command line; slurmstepd does not, but it
# keeps a socket open in our spool directory. (The pattern comes from a file so grep does
# not find itself.)
our_pids() {
  local p
  grep -lsFf <(printf '%s/\n' "$dev_dir") /proc/[0-9]*/cmdline | cut -d/ -f3
  for p in $(pgrep -x slurmstepd); do
    ls -l "/proc/$p/fd" 2>/dev/null | grep -qF -- "$dev_dir/" && echo "$p"
  done
}

# Wait up to $2 tenths of a second for pid $1 to exit.
wait_gone() {
  local i
  for ((i = 0; i < $2; i++)); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
  return 1
}

# TERM all, wait up to 10 s, then KILL what is left.
stop_pids() {
  local pid
  [ $# -gt 0 ] || return 0
  kill -TERM "$@" 2>/dev/null
  for pid in "$@"; do
    wait_gone "$pid" 100 || { kill -KILL "$pid" 2>/dev/null; wait_gone "$pid" 20; }
  done
}
