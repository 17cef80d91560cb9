// The NCCL/EFA profile (configs/nccl/, fabric/'s nccl_env) applied by the runner itself when
// nothing applied it before: under srun the SPANK plugin exports it into the task
// environment (SCALEGUARD_NCCL_PROFILE set); under mpirun outside Slurm nothing does.
#pragma once
#include <string>

namespace scaleguard::run {

// Call before MPI_Init (Open MPI may open libfabric, which reads FI_* then) and before any
// NCCL call. Does nothing when SCALEGUARD_NCCL_PROFILE is set (a profile was applied, or
// the user set it, e.g. to `none`, to keep the runner from applying one), and on nodes
// without EFA devices (NCCL's defaults; tcp-v1's NCCL_SOCKET_IFNAME=^lo would leave a
// container whose only interface is lo without a bootstrap interface). Otherwise detects the
// node (EFA devices, instance type, aws-ofi-nccl directory and release), loads the highest
// efa-v<N>.ini from SCALEGUARD_NCCL_PROFILES (default: the installed configs/nccl) and sets
// each variable that is not set: what the user set always wins.
// LD_LIBRARY_PATH cannot change the running process's library search, so the plugin
// directory is reported instead when neither it nor ld.so.conf.d names it.
// SCALEGUARD_NODE_ROOT replaces / for the detection (tests with a fake sysfs tree).
// Returns a line for rank 0 to print (what was applied, what the user kept), or "".
std::string apply_nccl_profile();

}  // namespace scaleguard::run
