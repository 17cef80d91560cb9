# Shared by up, down and status: where the cluster lives and how to find its processes.
# Sourced, not run.

src_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
abs() { case $1 in /*) echo "$1" ;; *) echo "$src_dir/$1" ;; esac; }
dev_dir=$(abs "${SCALEGUARD_DEV_DIR:-build/dev-cluster}")
build_dir=$(abs "${SCALEGUARD_BUILD_DIR:-build}")
# SCALEGUARD_SLURM_CONF_DIR: an existing Slurm config directory to run (`up` writes none);
# it must name this state directory's paths and ports (tests/parallelcluster lays one out).
etc_dir=$dev_dir/etc
[ -z "${SCALEGUARD_SLURM_CONF_DIR:-}" ] || etc_dir=$(abs "$SCALEGUARD_SLURM_CONF_DIR")
run_dir=$dev_dir/run
# slurmd's spool holds slurmstepd's Unix sockets, <spool>/<node>_<job>.<step> (step 4294967291
# for a batch step), and a socket path has at most 108 bytes: under a long checkout path the
# batch launch fails once job ids reach 3 digits ("Unix socket path ... is too long") and the
# job is held. So the spool lives in a short directory named by the state directory's
# checksum (tests/parallelcluster/pc.bash derives the same); $dev_dir/spool links to it.
spool_root=${SCALEGUARD_SPOOL_ROOT:-/run/scaleguard-spool}/$(printf %s "$dev_dir" | cksum | cut -d' ' -f1)
log_dir=$dev_dir/log
munge_dir=$dev_dir/munge
# SCALEGUARD_DEV_NODES: the two slurmd node names (a config from SCALEGUARD_SLURM_CONF_DIR
# may name them otherwise, e.g. ParallelCluster's <queue>-st-<resource>-N).
read -ra nodes <<< "${SCALEGUARD_DEV_NODES:-gpu-st-p4d-1 gpu-st-p4d-2}"
export SLURM_CONF=$etc_dir/slurm.conf
# SCALEGUARD_SLURM_PREFIX: a Slurm install (scripts/slurm-release build VER; /opt/slurm on
# ParallelCluster) whose bin/ and sbin/ come first and whose lib/slurm is the PluginDir;
# empty: Debian's packages.
slurm_prefix=${SCALEGUARD_SLURM_PREFIX:-}
if [ -n "$slurm_prefix" ]; then
  slurm_prefix=$(abs "$slurm_prefix")
  export PATH="$slurm_prefix/bin:$slurm_prefix/sbin:$PATH"
fi

die() { echo "dev-cluster: $*" >&2; exit 1; }
say() { echo "dev-cluster: $*"; }

# SCALEGUARD_DEV_EXTRA_NODES=K (0-5, default 0): K more nodes like the two (gpu-st-p4d-3 ...),
# in both partitions, on the state directory's spare ports (base+5 ...), for tests that need
# more than two nodes (in-job restart: three nodes and a spare).
extra_nodes=${SCALEGUARD_DEV_EXTRA_NODES:-0}
[[ $extra_nodes =~ ^[0-5]$ ]] || die "SCALEGUARD_DEV_EXTRA_NODES=$extra_nodes: expected 0 to 5"
for ((extra_i = 1; extra_i <= extra_nodes; extra_i++)); do nodes+=("gpu-st-p4d-$((2 + extra_i))"); done

# Pid from a pid file if that process still runs.
live_pid() {
  local pid
  [ -r "$1" ] || return 1
  pid=$(tr -dc 0-9 < "$1")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

# Our daemons name the state directory on their command line; slurmstepd does not, but it
# keeps a socket open in our spool directory (under $spool_root). (The pattern comes from a file so grep does
# not find itself.)
our_pids() {
  local p
  grep -lsFf <(printf '%s/\n' "$dev_dir") /proc/[0-9]*/cmdline | cut -d/ -f3
  for p in $(pgrep -x slurmstepd); do
    ls -l "/proc/$p/fd" 2>/dev/null | grep -qF -e "$dev_dir/" -e "$spool_root/" && echo "$p"
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

# --- network namespaces (SCALEGUARD_NETNS=1) ----------------------------------------------
# Each slurmd runs in its own network namespace, joined to a bridge in the host's namespace by a
# veth pair: node i has address <net>.1<i>, the bridge (slurmctld, srun, slurmdbd's clients)
# <net>.1. `up` records what it created in $run_dir/netns so `down` removes exactly that.
netns_file=$run_dir/netns

# netns_names INDEX: sets net (10.x.y), bridge and per-node ns/veth names for a cluster index
# (0..3999, from its port: clusters in different state directories do not collide).
netns_names() {
  netns_idx=$1
  net=10.$((100 + netns_idx / 256)).$((netns_idx % 256))
  bridge=sgbr$netns_idx
}
netns_of() { echo "scaleguard-$netns_idx-$1"; }  # netns_of NODE (after netns_names)

# netns_create INDEX: the bridge and one namespace per node, each with lo up and a default route.
netns_create() {
  local i=0 n ns host_if node_if
  netns_names "$1"
  # Leftovers of a cluster whose state directory was wiped carry our names: remove them.
  ip link del "$bridge" 2>/dev/null || true
  for n in "${nodes[@]}"; do ip netns del "$(netns_of "$n")" 2>/dev/null || true; done
  ip link add "$bridge" type bridge || die "cannot create bridge $bridge (needs CAP_NET_ADMIN)"
  echo "bridge $bridge" > "$netns_file"
  ip addr add "$net.1/24" dev "$bridge"
  ip link set "$bridge" up
  for n in "${nodes[@]}"; do
    i=$((i + 1)); ns=$(netns_of "$n"); host_if=sg${netns_idx}h$i; node_if=sg${netns_idx}n$i
    ip netns add "$ns" || die "cannot create network namespace $ns"
    echo "netns $ns" >> "$netns_file"
    ip link add "$host_if" type veth peer name "$node_if"
    ip link set "$node_if" netns "$ns"
    ip link set "$host_if" master "$bridge" up
    ip -n "$ns" addr add "$net.1$i/24" dev "$node_if"
    ip -n "$ns" link set lo up
    ip -n "$ns" link set "$node_if" up
    ip -n "$ns" route add default via "$net.1"
    # The namespace's packets go no further than the bridge, so a DNS query from inside waits
    # for its timeouts (5 s x attempts). Slurm 25.11's slurmd resolves every accepted peer's
    # name (conmgr, getnameinfo) and stopped answering slurmctld: make the host's name
    # servers unreachable in the namespace, so a lookup fails at once and Slurm uses the address.
    local dns
    for dns in $(awk '$1 == "nameserver" { print $2 }' /etc/resolv.conf 2>/dev/null); do
      case $dns in
        127.*|::1) ;;   # a local resolver: refused at once inside the namespace anyway
        *:*) ip -n "$ns" -6 route add unreachable "$dns/128" 2>/dev/null || true ;;
        *) ip -n "$ns" route add unreachable "$dns/32" 2>/dev/null || true ;;
      esac
    done
  done
}

# netns_throttle RATE|off: a token-bucket (tc tbf) limit on both ends of every node's veth, so
# traffic between the nodes crosses a slow link (issue 16's probe test). Egress is shaped, so
# both ends are limited. Only what netns_create recorded is touched.
netns_throttle() {
  local rate=$1 kind name ifs ns dev
  [ -r "$netns_file" ] || die "no network namespaces recorded in $netns_file (up with SCALEGUARD_NETNS=1)"
  command -v tc >/dev/null || die "tc (iproute2) not found"
  while read -r kind name; do
    case $kind in
      bridge) ifs=$(ip -o link show master "$name" | awk -F': ' '{print $2}' | cut -d@ -f1); ns= ;;
      netns) ifs=$(ip -n "$name" -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | grep -vx lo); ns=$name ;;
      *) continue ;;
    esac
    for dev in $ifs; do
      if [ "$rate" = off ]; then
        tc ${ns:+-n "$ns"} qdisc del dev "$dev" root 2>/dev/null || true
      else
        tc ${ns:+-n "$ns"} qdisc replace dev "$dev" root tbf rate "$rate" burst 32kbit latency 400ms ||
          die "tc tbf on $dev${ns:+ in $ns} failed (kernel without sch_tbf?)"
      fi
    done
  done < "$netns_file"
}

# netns_remove: what netns_create recorded (deleting a namespace deletes its veth pair).
netns_remove() {
  local kind name
  [ -r "$netns_file" ] || return 0
  while read -r kind name; do
    case $kind in
      netns) ip netns del "$name" 2>/dev/null ;;
      bridge) ip link del "$name" 2>/dev/null ;;
    esac
  done < <(tac "$netns_file")
  rm -f "$netns_file"
}
