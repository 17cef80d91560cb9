// The process grid: world = pp x dp x tp ranks, tp fastest (tensor-parallel peers share a
// node), then dp, then pp. Each strategy uses the sub-communicator of its dimension; data
// parallel alone is the grid tp = pp = 1, where the dp group is the whole world.
#pragma once
#include <memory>

#include "comm.h"

namespace scaleguard::run {

struct ProcessGrid {
  int tp = 1, dp = 1, pp = 1;
  int tp_rank = 0, dp_rank = 0, pp_rank = 0;
  std::unique_ptr<Communicator> world;
  std::unique_ptr<Communicator> tp_group;  // same (pp, dp) coordinates
  std::unique_ptr<Communicator> dp_group;  // same (pp, tp)
  std::unique_ptr<Communicator> pp_group;  // same (dp, tp)
};

// Collective over `world`; throws RunError when tp * dp * pp != world->size().
ProcessGrid make_grid(std::unique_ptr<Communicator> world, int tp, int dp, int pp);

}  // namespace scaleguard::run
