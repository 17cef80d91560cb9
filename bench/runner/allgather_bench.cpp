// Raw MPI_Allgather (float, out of place) of --bytes gathered (each rank contributes
// bytes / ranks), --iters times after a barrier each; rank 0 prints the median and mean
// milliseconds of its own calls. The baseline for ZeRO-3's parameter all-gathers
// (bench/runner/zero3.sh): one call per gathered block bucket.
//   mpirun -np 2 runner_allgather_bench BYTES ITERS
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 3) {
    if (rank == 0) std::fprintf(stderr, "usage: runner_allgather_bench BYTES ITERS\n");
    MPI_Finalize();
    return 64;
  }
  const long bytes = std::atol(argv[1]);
  const int iters = std::atoi(argv[2]);
  const size_t shard = (static_cast<size_t>(bytes) / sizeof(float) + size - 1) / size;  // padded as the runner pads
  std::vector<float> in(shard, 1.0f + static_cast<float>(rank)), out(shard * static_cast<size_t>(size));
  std::vector<double> ms;
  for (int i = -5; i < iters; ++i) {  // 5 warm-up calls
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    MPI_Allgather(in.data(), static_cast<int>(shard), MPI_FLOAT, out.data(), static_cast<int>(shard), MPI_FLOAT,
                  MPI_COMM_WORLD);
    if (i >= 0) ms.push_back((MPI_Wtime() - t0) * 1e3);
  }
  if (rank == 0) {
    std::sort(ms.begin(), ms.end());
    double mean = 0;
    for (double m : ms) mean += m / static_cast<double>(ms.size());
    std::printf("{\"bytes\":%ld,\"ranks\":%d,\"iters\":%d,\"median_ms\":%.4f,\"mean_ms\":%.4f}\n", bytes, size, iters,
                ms[ms.size() / 2], mean);
  }
  MPI_Finalize();
  return 0;
}
