#!/usr/bin/env bash
# A peer that never joins the start-up collectives (here: an MPI program that initialises
# and then sleeps) must not hang scaleguard-run: after --startup-timeout it aborts the job.
source "$(dirname "$0")/lib.sh"
cat > late.c <<'C'
#include <mpi.h>
#include <unistd.h>
int main(int argc, char** argv) { MPI_Init(&argc, &argv); sleep(600); MPI_Finalize(); return 0; }
C
mpicc -o late late.c
status=0
timeout 120 "$mpiexec" --oversubscribe --bind-to none \
  -np 1 "$run" train --synthetic 10000 --model mlp --steps 1 --global-batch 2 --startup-timeout 3 \
  : -np 1 ./late > run.log 2>&1 || status=$?
cat run.log
[ "$status" -ne 124 ] || fail "hung until the test's own timeout"
[ "$status" -ne 0 ] || fail "exited 0"
grep -q "start-up step 'all ranks started' did not complete within 3 s" run.log || fail "no start-up timeout message"
