// Process start-up: MPI, where this rank sits (node, local rank), threads, and the
// fail-fast helpers that keep every rank from hanging when one of them cannot start.
#pragma once
#include <mpi.h>

#include <string>

namespace scaleguard::run {

struct Launch {
  int rank = 0, world = 1;
  int local_rank = 0, local_size = 1;  // ranks sharing this node (MPI_COMM_TYPE_SHARED)
  int node = 0, nodes = 1;             // node index (by lowest rank on it) and count
  int thread_level = MPI_THREAD_SINGLE;
  std::string host;
  MPI_Comm world_comm = MPI_COMM_WORLD;
  MPI_Comm node_comm = MPI_COMM_NULL;
  double startup_timeout_s = 60;
};

// glibc malloc tuning for tensor-sized allocations; call first thing in main().
void tune_malloc();

// MPI_Init_thread + topology. Collectives here are guarded by `startup_timeout_s`.
Launch init_mpi(int* argc, char*** argv, double startup_timeout_s);

// Launcher variables (SLURM_PROCID/NTASKS/LOCALID, OMPI_COMM_WORLD_*, PMIX_RANK) that
// disagree with MPI; empty when consistent or absent.
std::string check_launcher_env(const Launch& l);

// Waits for a non-blocking start-up collective, polling until the deadline; past it the
// rank prints what it waited for and calls MPI_Abort, so a peer that died or never
// arrived cannot make the job hang.
void wait_or_abort(const Launch& l, MPI_Request* req, const char* what);

// Every rank contributes its error (empty = fine). When any rank has one, rank 0 prints
// each distinct message with the ranks that reported it, and every rank returns true so
// all of them exit non-zero together.
bool any_failed(const Launch& l, const std::string& local_error, const char* stage);

// Threads for this rank's torch/OpenMP pool: `requested` if > 0, else the cores this
// rank may use (its affinity mask, shared with the other ranks on the node when unbound).
int choose_threads(const Launch& l, int requested);

// Whether this node shows an NVIDIA GPU to this rank, independent of how LibTorch was
// built: a device node /dev/nvidia<N> (SCALEGUARD_DEVICE_NODE_DIR replaces /dev, for tests), unless
// CUDA_VISIBLE_DEVICES hides every GPU ("", "-1", "NoDevFiles"). `evidence` says what was
// found. A CPU-only build uses it to refuse device=auto on a GPU node.
bool gpu_visible(std::string* evidence);

// SCALEGUARD_CHECK_COMM=1: wrap the communicators in the device check (comm.h).
bool check_comm_requested();

}  // namespace scaleguard::run
