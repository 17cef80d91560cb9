/* Every rank contributes rank+1 to an MPI_SUM all-reduce and prints what it received. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  int rank, size, mine, sum;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  mine = rank + 1;
  MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  printf("rank=%d sum=%d size=%d\n", rank, sum, size);
  MPI_Finalize();
  return 0;
}
