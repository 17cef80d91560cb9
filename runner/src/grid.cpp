#include "grid.h"

#include <string>

#include "config.h"

namespace scaleguard::run {

ProcessGrid make_grid(std::unique_ptr<Communicator> world, int tp, int dp, int pp) {
  int rank = world->rank();
  if (tp * dp * pp != world->size())
    throw RunError("process grid tp=" + std::to_string(tp) + " x dp=" + std::to_string(dp) + " x pp=" +
                   std::to_string(pp) + " does not match " + std::to_string(world->size()) + " ranks");
  ProcessGrid g;
  g.tp = tp, g.dp = dp, g.pp = pp;
  g.tp_rank = rank % tp;
  g.dp_rank = (rank / tp) % dp;
  g.pp_rank = rank / (tp * dp);
  // Color = the coordinates the group members share; key = the coordinate along the group.
  g.tp_group = world->split(g.pp_rank * dp + g.dp_rank, g.tp_rank);
  g.dp_group = world->split(g.pp_rank * tp + g.tp_rank, g.dp_rank);
  g.pp_group = world->split(g.dp_rank * tp + g.tp_rank, g.pp_rank);
  g.world = std::move(world);
  return g;
}

}  // namespace scaleguard::run
