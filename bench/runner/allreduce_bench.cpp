// Raw MPI_Allreduce (sum, in place, float) of --bytes, one message, --iters times after a
// barrier each; rank 0 prints the median and mean milliseconds of its own calls.
// GAP_US (optional, default 0): busy-wait that long (untimed) before each barrier, like the
// forward/backward a training step computes between two gradient all-reduces. Back to back
// (0) the call is faster than the same call between ~10+ ms of computation on the 2-core VM
// (1.5 vs 2.8-3.1 ms for 9 MB, BENCHMARKS.md Runner data parallel); both are reported.
// FRESH=1 (environment): rewrite the whole buffer (untimed) before each call, as backward
// writes the gradients just before their all-reduce; back to back, the buffer is the one the
// previous call left in the caches.
// HUGE=1 (environment): the buffer in 2 MB-aligned memory with transparent huge pages
// requested, as scaleguard-run allocates its gradient buckets (runner/src/parallel/data_parallel.cpp).
//   mpirun -np 2 [-x FRESH=1] [-x HUGE=1] runner_allreduce_bench BYTES ITERS [GAP_US]
#include <mpi.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc != 3 && argc != 4) {
    if (rank == 0) std::fprintf(stderr, "usage: runner_allreduce_bench BYTES ITERS [GAP_US]\n");
    MPI_Finalize();
    return 64;
  }
  long bytes = std::atol(argv[1]);
  int iters = std::atoi(argv[2]);
  double gap_s = argc == 4 ? std::atof(argv[3]) * 1e-6 : 0.0;
  const char* fresh_env = std::getenv("FRESH");
  const bool fresh = fresh_env && std::atoi(fresh_env) != 0;
  const char* huge_env = std::getenv("HUGE");
  const bool huge = huge_env && std::atoi(huge_env) != 0;
  const size_t n = static_cast<size_t>(bytes) / sizeof(float);
  std::vector<float> plain;
  float* data = nullptr;
  if (huge) {
    const size_t rounded = (n * sizeof(float) + (2u << 20) - 1) / (2u << 20) * (2u << 20);
    data = static_cast<float*>(std::aligned_alloc(2u << 20, rounded));
    if (!data) MPI_Abort(MPI_COMM_WORLD, 1);
    madvise(data, rounded, MADV_HUGEPAGE);
    std::fill(data, data + n, 1.0f);
  } else {
    plain.assign(n, 1.0f);
    data = plain.data();
  }
  std::vector<double> ms;
  for (int i = -5; i < iters; ++i) {  // 5 warm-up calls
    for (double s = MPI_Wtime(); MPI_Wtime() - s < gap_s;) {
    }
    if (fresh) std::fill(data, data + n, 1e-3f * static_cast<float>(i + 7 + rank));
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (i >= 0) ms.push_back((MPI_Wtime() - t0) * 1e3);
  }
  if (rank == 0) {
    std::sort(ms.begin(), ms.end());
    double mean = 0;
    for (double m : ms) mean += m / static_cast<double>(ms.size());
    std::printf("{\"bytes\":%ld,\"iters\":%d,\"gap_us\":%.0f,\"fresh\":%d,\"huge\":%d,\"median_ms\":%.4f,\"mean_ms\":%.4f}\n",
                bytes, iters, gap_s * 1e6, fresh ? 1 : 0, huge ? 1 : 0, ms[ms.size() / 2], mean);
  }
  if (huge) std::free(data);
  MPI_Finalize();
  return 0;
}
