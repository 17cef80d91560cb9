// The process grid: world = pp x dp x tp ranks, tp fastest (tensor-parallel peers share a
// node), then dp, then pp. Each strategy uses the sub-communicator of its dimension; data
// parallel alone is the grid tp = pp = 1, where the dp group is the whole world.
//
// World rank r sits at tp_rank = r % tp, dp_rank = (r / tp) % dp, pp_rank = r / (tp * dp).
#pragma once
#include <memory>

#include "comm/comm.h"

namespace scaleguard::run {

struct ProcessGrid {
  int tp = 1, dp = 1, pp = 1;
  int tp_rank = 0, dp_rank = 0, pp_rank = 0;
  std::unique_ptr<Communicator> world;
  std::unique_ptr<Communicator> tp_group;  // same (pp, dp) coordinates
  std::unique_ptr<Communicator> dp_group;  // same (pp, tp)
  std::unique_ptr<Communicator> pp_group;  // same (dp, tp); rank in it = pp_rank
  // First and last pipeline stage with the same (dp, tp): they sum the gradient of the
  // tied token embedding. Null on middle stages and when pp == 1.
  std::unique_ptr<Communicator> embedding_group;

  bool first_stage() const { return pp_rank == 0; }
  bool last_stage() const { return pp_rank == pp - 1; }
};

// Collective over `world`; throws RunError when a degree is < 1 or tp * dp * pp differs
// from world->size().
ProcessGrid make_grid(std::unique_ptr<Communicator> world, int tp, int dp, int pp);

}  // namespace scaleguard::run
