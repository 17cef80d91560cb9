#!/usr/bin/env bats
# The dev cluster's network-namespace mode (SCALEGUARD_NETNS=1): its own second cluster, each
# slurmd in its own network namespace with its own address on a bridge, so traffic between the
# nodes (srun I/O, PMIx, MPI, a MASTER_ADDR rendezvous) crosses real interfaces, not loopback.
load helpers

setup_file() {
  export SCALEGUARD_DEV_DIR=$SCALEGUARD_BUILD_DIR/dev-cluster-netns
  # A container without CAP_NET_ADMIN cannot make namespaces or bridges: say so in setup()
  # (this bats fails a file whose setup_file skips).
  local probe=sgprobe$$
  if ! ip link add "$probe" type bridge 2>/dev/null; then
    export NETNS_UNAVAILABLE="this machine cannot create network interfaces (no CAP_NET_ADMIN?)"
    return 0
  fi
  ip link del "$probe"
  SCALEGUARD_NETNS=1 SCALEGUARD_ACCOUNTING=0 "$SCALEGUARD_SOURCE_DIR/scripts/dev-cluster/up" >&3
  export RUN_TMP=$(user_dir)
}
teardown_file() {
  "$SCALEGUARD_SOURCE_DIR/scripts/dev-cluster/down" >&3
  rm -rf "$RUN_TMP"
}
setup() {
  [ -z "${NETNS_UNAVAILABLE:-}" ] || skip "$NETNS_UNAVAILABLE"
  cluster_env
}

node_addr() { scontrol show node "$1" | tr ' ' '\n' | sed -n 's/^NodeAddr=//p'; }
slurmd_netns() { readlink "/proc/$(cat "$SCALEGUARD_DEV_DIR/run/slurmd-$1.pid")/ns/net"; }

@test "each slurmd runs in its own network namespace with its own address" {
  local a1 a2
  a1=$(node_addr gpu-st-p4d-1) a2=$(node_addr gpu-st-p4d-2)
  [[ $a1 =~ ^10\.[0-9]+\.[0-9]+\.11$ && $a2 =~ ^10\.[0-9]+\.[0-9]+\.12$ ]]
  ns1=$(slurmd_netns gpu-st-p4d-1) ns2=$(slurmd_netns gpu-st-p4d-2)
  [ -n "$ns1" ] && [ -n "$ns2" ]
  [ "$ns1" != "$ns2" ]
  [ "$ns1" != "$(readlink /proc/self/ns/net)" ]
}

@test "tasks see their node's address; MASTER_ADDR is the first node's" {
  run srun -N2 -n2 --time=5 bash -c 'echo "$SLURM_PROCID $(hostname -I | tr -d " ") $MASTER_ADDR"'
  assert_success
  assert_line "0 $(node_addr gpu-st-p4d-1) $(node_addr gpu-st-p4d-1)"
  assert_line "1 $(node_addr gpu-st-p4d-2) $(node_addr gpu-st-p4d-1)"
}

@test "rank 0 on one node is reached at MASTER_ADDR:MASTER_PORT from the other, across the bridge" {
  run srun -N2 -n2 --time=5 python3 "$SCALEGUARD_SOURCE_DIR/tests/slurm/data/rendezvous.py"
  assert_success
  assert_line "rank 0 got: rank 1 on gpu-st-p4d-2"
}

@test "scaleguard-run trains data parallel across the namespaces (srun --mpi=pmix)" {
  local bin=$SCALEGUARD_BUILD_DIR/runner/scaleguard-run
  [ -x "$bin" ] || skip "scaleguard-run not built in $SCALEGUARD_BUILD_DIR"
  cd "$RUN_TMP"
  "$bin" prep --input /usr/share/games/fortunes/fortunes --output tokens.bin
  run srun --mpi=pmix -N2 -n2 --time=10 "$bin" train --data tokens.bin --model gpt --n-embd 32 \
    --n-layer 1 --seq-len 32 --global-batch 8 --steps 6 --threads 1 --log-every 3 --verbose
  assert_success
  assert_output --partial 'rank 1/2'
  assert_output --partial 'done: 6 steps'
  refute_output --partial 'differ from rank 0'
}

@test "down removes the namespaces and the bridge it created" {
  local created
  created=$(cat "$SCALEGUARD_DEV_DIR/run/netns")
  grep -q '^bridge sgbr' <<<"$created"
  [ "$(grep -c '^netns scaleguard-' <<<"$created")" = 2 ]
  run "$SCALEGUARD_SOURCE_DIR/scripts/dev-cluster/down"
  assert_success
  while read -r kind name; do
    case $kind in
      netns) run ip netns list; refute_output --partial "$name" ;;
      bridge) run ip link show "$name"; assert_failure ;;
    esac
  done <<<"$created"
}
