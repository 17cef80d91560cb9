// multi_node_fabric: more than one node only on a fabric fit for it (efa, ib). Rewrite moves
// the job to a partition with the same GPUs and capacity on efa/ib (decide.cpp judges it there
// too), else, for a request, to one node and its GPUs.
#include <algorithm>

#include "judge.h"
#include "scaleguard/text.h"

namespace scaleguard::rules {

namespace {
std::string twin_note(const Partition* twin) {
  return twin ? "; partition " + twin->name + " has the same GPUs on " + to_string(twin->fabric) : "";
}
}  // namespace

// The request's nodes.
void multi_node_fabric_request(Judge& j) {
  if (j.nodes <= 1 || j.fast_fabric || !j.on(RuleId::multi_node_fabric)) return;
  const Partition* twin = fast_twin(j.policy, j.part);
  if (j.fire(RuleId::multi_node_fabric, text::format("%d nodes on fabric %s: multi-node jobs need efa or ib", j.nodes,
                                                     to_string(j.part.fabric)) +
                                            twin_note(twin))) {
    if (twin) j.d.rewrite.partition = twin->name;
    else j.new_nodes = 1, j.new_gpus = std::min(j.gpus, j.gpn);
  }
  if (twin) j.ask_partition = twin->name;
  else j.ask(std::min(j.gpus, j.gpn), std::nullopt);
}

// The nodes of the plan kept.
void multi_node_fabric_plan(Judge& j) {
  if (!j.have_plan || j.chosen.nodes <= 1 || j.fast_fabric || !j.on(RuleId::multi_node_fabric)) return;
  const Partition* twin = fast_twin(j.policy, j.part);
  if (j.fire(RuleId::multi_node_fabric, text::format("the plan needs %d nodes but fabric %s is not efa or ib",
                                                     j.chosen.nodes, to_string(j.part.fabric)) +
                                            twin_note(twin)) &&
      twin)
    j.d.rewrite.partition = twin->name;
  if (twin) j.ask_partition = twin->name;
}

}  // namespace scaleguard::rules
