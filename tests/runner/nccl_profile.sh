#!/usr/bin/env bash
# Under mpirun outside Slurm nothing exports the NCCL/EFA profile, so scaleguard-run applies
# it itself before MPI_Init on EFA nodes (issue 15 item 7): the same efa-v2 the SPANK plugin
# would, only for variables that are not set (the user's values win), logged by rank 0.
# The node is a fake tree (SCALEGUARD_NODE_ROOT): two EFA devices, a p4d.24xlarge, and
# aws-ofi-nccl 1.17.1 in the multiarch directory.
source "$(dirname "$0")/lib.sh"
unset SCALEGUARD_NCCL_PROFILE NCCL_NET NCCL_BUFFSIZE NCCL_P2P_NET_CHUNKSIZE NCCL_SOCKET_IFNAME NCCL_TUNER_PLUGIN \
  FI_PROVIDER FI_EFA_USE_DEVICE_RDMA FI_EFA_FORK_SAFE NCCL_PROTO NCCL_IB_DISABLE
small=(--model mlp --n-embd 8 --hidden 16 --seq-len 16 --global-batch 4 --steps 2 --threads 1 --quiet --synthetic 2000)
node=$work/node
mkdir -p "$node/sys/class/infiniband/rdmap16s27" "$node/sys/class/infiniband/rdmap32s27" \
  "$node/sys/devices/virtual/dmi/id" "$node/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu"
echo p4d.24xlarge > "$node/sys/devices/virtual/dmi/id/product_name"
lib=$node/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu
printf 'ELF\0NET/OFI Initializing aws-ofi-nccl 1.17.1\0more' > "$lib/libnccl-net-ofi.so"
cp "$lib/libnccl-net-ofi.so" "$lib/libnccl-net.so"

# profile_line NAME ENV...: run 2 ranks with the extra environment, print rank 0's profile line.
profile_line() {
  local name=$1; shift
  env "$@" bash -c 'source "$0"; mpi 2 train "${@}"' "$here/lib.sh" "${small[@]}" > "$name.log" 2>&1 ||
    { cat "$name.log"; fail "$name: training failed"; }
  [ "$(grep -c 'NCCL profile' "$name.log")" -le 1 ] || fail "$name: more than one rank logged the profile"
  grep 'NCCL profile' "$name.log" || true
}
has() { grep -qF -- "$2" <<<"$1" || fail "$3: '$2' missing from: $1"; }
hasnt() { ! grep -qF -- "$2" <<<"$1" || fail "$3: '$2' should not be in: $1"; }

line=$(profile_line efa SCALEGUARD_NODE_ROOT="$node")
echo "efa: $line"
has "$line" "NCCL profile efa-v2 applied" efa
has "$line" "NCCL_NET=AWS Libfabric" efa
has "$line" "NCCL_BUFFSIZE=8388608" efa
has "$line" "NCCL_P2P_NET_CHUNKSIZE=524288" efa
has "$line" "SCALEGUARD_OFI_NCCL_VERSION=1.17.1" efa
has "$line" "SCALEGUARD_INSTANCE_TYPE=p4d.24xlarge" efa
for obsolete in FI_PROVIDER= FI_EFA_FORK_SAFE= FI_EFA_USE_DEVICE_RDMA= NCCL_PROTO= NCCL_TUNER_PLUGIN=; do
  hasnt "$line" "$obsolete" efa
done
# The running process cannot extend its own library path: it says what to pass to mpirun.
has "$line" "mpirun -x LD_LIBRARY_PATH=$lib" efa

# What the user set wins and is reported as kept.
line=$(profile_line user SCALEGUARD_NODE_ROOT="$node" NCCL_NET=Socket NCCL_BUFFSIZE=4194304)
echo "user: $line"
hasnt "$line" "NCCL_NET=AWS Libfabric" user
hasnt "$line" "NCCL_BUFFSIZE=8388608" user
has "$line" "kept the user's NCCL_NET=Socket NCCL_BUFFSIZE=4194304" user
has "$line" "NCCL_P2P_NET_CHUNKSIZE=524288" user

# The EFA installer registers the plugin directory with ld.so: no LD_LIBRARY_PATH advice.
mkdir -p "$node/etc/ld.so.conf.d"
echo /opt/amazon/ofi-nccl/lib/x86_64-linux-gnu > "$node/etc/ld.so.conf.d/100_ofinccl.conf"
line=$(profile_line ldconf SCALEGUARD_NODE_ROOT="$node")
hasnt "$line" "LD_LIBRARY_PATH" ldconf

# A profile a Slurm step already applied (or SCALEGUARD_NCCL_PROFILE=none): nothing again.
line=$(profile_line slurm SCALEGUARD_NODE_ROOT="$node" SCALEGUARD_NCCL_PROFILE=efa-v2)
[ -z "$line" ] || fail "slurm: applied again: $line"

# A node without EFA: NCCL's defaults (tcp-v1 is the SPANK plugin's, for Slurm steps).
mkdir -p "$work/plain"
line=$(profile_line plain SCALEGUARD_NODE_ROOT="$work/plain")
[ -z "$line" ] || fail "plain: a profile on a node without EFA: $line"
