#include "comm/grid.h"

#include <string>

#include "config/config.h"

namespace scaleguard::run {

ProcessGrid make_grid(std::unique_ptr<Communicator> world, int tp, int dp, int pp) {
  int rank = world->rank();
  const std::string shape =
      "process grid tp=" + std::to_string(tp) + " x dp=" + std::to_string(dp) + " x pp=" + std::to_string(pp);
  if (tp < 1 || dp < 1 || pp < 1) throw RunError(shape + ": every degree must be at least 1");
  if (static_cast<long long>(tp) * dp * pp != world->size())
    throw RunError(shape + " = " + std::to_string(static_cast<long long>(tp) * dp * pp) + " ranks does not match the " +
                   std::to_string(world->size()) + " ranks launched; launch tp*dp*pp ranks or fix --tp/--dp/--pp");
  ProcessGrid g;
  g.tp = tp, g.dp = dp, g.pp = pp;
  g.tp_rank = rank % tp;
  g.dp_rank = (rank / tp) % dp;
  g.pp_rank = rank / (tp * dp);
  // Color = the coordinates the group members share; key = the coordinate along the group.
  g.tp_group = world->split(g.pp_rank * dp + g.dp_rank, g.tp_rank);
  g.dp_group = world->split(g.pp_rank * tp + g.tp_rank, g.dp_rank);
  g.pp_group = world->split(g.dp_rank * tp + g.tp_rank, g.pp_rank);
  if (pp > 1) {
    // split is collective over the world: middle stages take part with a color of their
    // own and drop the result.
    bool ends = g.first_stage() || g.last_stage();
    auto group = world->split(ends ? g.dp_rank * tp + g.tp_rank : dp * tp + rank, g.pp_rank);
    if (ends) g.embedding_group = std::move(group);
  }
  g.world = std::move(world);
  return g;
}

}  // namespace scaleguard::run
