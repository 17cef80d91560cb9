#include "launch/launch.h"

#include <dirent.h>
#include <malloc.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "config/config.h"
#include "config/exit_codes.h"
#include "launch/nccl_profile.h"

namespace scaleguard::run {

void tune_malloc() {
  // Tensors of a few MB otherwise go through mmap/munmap on every step (page faults):
  // keep them on the heap and do not hand freed memory back eagerly.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

void wait_or_abort(const Launch& l, MPI_Request* req, const char* what) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(l.startup_timeout_s);
  int done = 0;
  while (true) {
    MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (done) return;
    if (std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::fprintf(stderr,
               "scaleguard-run: rank %d: start-up step '%s' did not complete within %.0f s: another rank "
               "failed or never started; aborting all ranks\n",
               l.rank, what, l.startup_timeout_s);
  std::fflush(stderr);
  MPI_Abort(l.world_comm, kExitStartupTimeout);
}

Launch init_mpi(int* argc, char*** argv, double startup_timeout_s) {
  Launch l;
  l.startup_timeout_s = startup_timeout_s;
  // Before MPI_Init: libfabric (Open MPI's ofi components) reads FI_* when it is opened.
  const std::string nccl_profile = apply_nccl_profile();
  // Open MPI 4.1's libnbc MPI_Iallreduce (data-parallel buckets launched during backward, every
  // Work-based all-reduce) takes the binomial algorithm for every in-place call and for < 4
  // ranks: reduce to rank 0, then broadcast, two serial whole-buffer transfers (4.6-4.9 ms for
  // 9 MB on 2 ranks); its ring does it in 1.5-1.6 ms (BENCHMARKS.md, Runner data parallel).
  // Unless the user chose one.
  setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", 0);
  // MULTIPLE lets a background thread (asynchronous checkpoints) use its own communicator.
  MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &l.thread_level);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  MPI_Comm_rank(MPI_COMM_WORLD, &l.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &l.world);
  char host[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(host, &len);
  l.host.assign(host, static_cast<size_t>(len));

  // Every later start-up collective blocks; first make sure all ranks arrived at all.
  MPI_Request arrived;
  MPI_Ibarrier(MPI_COMM_WORLD, &arrived);
  wait_or_abort(l, &arrived, "all ranks started");
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, l.rank, MPI_INFO_NULL, &l.node_comm);
  MPI_Comm_rank(l.node_comm, &l.local_rank);
  MPI_Comm_size(l.node_comm, &l.local_size);
  // Node index = number of node leaders with a lower world rank; one guarded exchange.
  std::vector<int> leader(static_cast<size_t>(l.world));
  int me = l.local_rank == 0;
  MPI_Request req;
  MPI_Iallgather(&me, 1, MPI_INT, leader.data(), 1, MPI_INT, MPI_COMM_WORLD, &req);
  wait_or_abort(l, &req, "node discovery");
  int node_leader_rank = l.rank;
  MPI_Request req2;
  MPI_Ibcast(&node_leader_rank, 1, MPI_INT, 0, l.node_comm, &req2);
  wait_or_abort(l, &req2, "node discovery");
  l.nodes = 0;
  l.node = 0;
  for (int r = 0; r < l.world; ++r) {
    if (!leader[static_cast<size_t>(r)]) continue;
    if (r < node_leader_rank) ++l.node;
    ++l.nodes;
  }
  if (l.rank == 0 && !nccl_profile.empty()) std::fprintf(stderr, "scaleguard-run: %s\n", nccl_profile.c_str());
  return l;
}

std::string check_launcher_env(const Launch& l) {
  struct Var { const char* name; int expected; };
  const Var vars[] = {
      {"OMPI_COMM_WORLD_RANK", l.rank},        {"OMPI_COMM_WORLD_SIZE", l.world},
      {"OMPI_COMM_WORLD_LOCAL_RANK", l.local_rank}, {"OMPI_COMM_WORLD_LOCAL_SIZE", l.local_size},
      {"PMIX_RANK", l.rank},                   {"SLURM_PROCID", l.rank},
      {"SLURM_NTASKS", l.world},               {"SLURM_LOCALID", l.local_rank},
  };
  std::string problems;
  // Under mpirun inside an allocation the SLURM_* variables describe the batch step, not
  // these ranks; trust them only when srun started us (SLURM_STEP_ID set, no OMPI_*).
  bool srun = std::getenv("SLURM_STEP_ID") && !std::getenv("OMPI_COMM_WORLD_RANK");
  for (const auto& v : vars) {
    const char* value = std::getenv(v.name);
    if (!value) continue;
    if (!srun && std::strncmp(v.name, "SLURM_", 6) == 0) continue;
    if (std::atoi(value) != v.expected)
      problems += std::string(problems.empty() ? "" : "; ") + v.name + "=" + value + " but MPI says " +
                  std::to_string(v.expected);
  }
  if (!problems.empty())
    problems = "launcher environment disagrees with MPI (" + problems +
               "): was the MPI library built for this launcher (srun --mpi=pmix / mpirun)?";
  return problems;
}

bool any_failed(const Launch& l, const std::string& local_error, const char* stage) {
  constexpr size_t kLen = 1024;
  char mine[kLen] = {};
  std::strncpy(mine, local_error.c_str(), kLen - 1);
  std::vector<char> all(kLen * static_cast<size_t>(l.world));
  MPI_Request req;
  MPI_Iallgather(mine, kLen, MPI_CHAR, all.data(), kLen, MPI_CHAR, l.world_comm, &req);
  wait_or_abort(l, &req, stage);
  std::map<std::string, std::string> by_message;  // message -> "0,1"
  for (int r = 0; r < l.world; ++r) {
    std::string msg(&all[kLen * static_cast<size_t>(r)]);
    if (msg.empty()) continue;
    auto& ranks = by_message[msg];
    ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
  }
  if (by_message.empty()) return false;
  if (l.rank == 0) {
    for (const auto& [msg, ranks] : by_message)
      std::fprintf(stderr, "scaleguard-run: error (%s, rank%s %s): %s\n", stage,
                   ranks.find(',') == std::string::npos ? "" : "s", ranks.c_str(), msg.c_str());
    std::fflush(stderr);
  }
  return true;
}

int choose_threads(const Launch& l, int requested) {
  if (requested > 0) return requested;
  cpu_set_t set;
  CPU_ZERO(&set);
  int allowed = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  int online = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  // Bound by the launcher (mpirun's default): the mask is already this rank's share.
  if (allowed < online) return std::max(1, allowed);
  return std::max(1, online / l.local_size);
}

bool gpu_visible(std::string* evidence) {
  const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  if (cvd && (std::strcmp(cvd, "") == 0 || std::strcmp(cvd, "-1") == 0 || std::strcmp(cvd, "NoDevFiles") == 0))
    return false;  // hidden on purpose (Slurm sets NoDevFiles for a job without GPUs)
  const char* dir_env = std::getenv("SCALEGUARD_DEVICE_NODE_DIR");
  std::string dir = dir_env && *dir_env ? dir_env : "/dev";
  DIR* d = opendir(dir.c_str());
  if (!d) return false;
  std::string found;
  while (dirent* e = readdir(d)) {
    const char* n = e->d_name;
    if (std::strncmp(n, "nvidia", 6) != 0 || !n[6]) continue;
    bool digits = true;
    for (const char* c = n + 6; *c; ++c) digits = digits && *c >= '0' && *c <= '9';
    if (digits && (found.empty() || std::strcmp(n, found.c_str()) < 0)) found = n;
  }
  closedir(d);
  if (found.empty()) return false;
  if (evidence) *evidence = dir + "/" + found + " exists";
  return true;
}

bool check_comm_requested() {
  const char* v = std::getenv("SCALEGUARD_CHECK_COMM");
  return v && *v && std::strcmp(v, "0") != 0;
}

}  // namespace scaleguard::run
