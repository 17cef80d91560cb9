// MASTER_ADDR must be an address every node of the step can reach. A Slurm node name is only
// that where DNS or /etc/hosts knows it (not for the dev cluster's fake nodes; ParallelCluster
// nodes do resolve, but their NodeAddr is the private IP anyway); the node's NodeAddr is what
// slurmd itself is reached by, and slurmctld fills it with the node name when slurm.conf
// sets none. So ask slurmctld, once per node and job (prolog) and only as a fallback per task.
#include <algorithm>
#include <cctype>

#include "plugin.h"

namespace scaleguard::spank {

bool plain_address(const std::string& addr) {
  return !addr.empty() && addr.size() < 256 && std::all_of(addr.begin(), addr.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' || c == '_';
  });
}

std::string node_address(const std::string& node) {
  if (!plain_address(node)) return "";
  node_info_msg_t* msg = nullptr;
  std::string name = node;  // the API takes a char*
  if (slurm_load_node_single(&msg, name.data(), SHOW_ALL) != SLURM_SUCCESS || !msg) return "";
  std::string addr;
  if (msg->record_count == 1 && msg->node_array[0].node_addr) {
    addr = msg->node_array[0].node_addr;
    // NodeAddr may list several addresses (comma separated): the first is the node's.
    addr = addr.substr(0, addr.find(','));
  }
  slurm_free_node_info_msg(msg);
  return plain_address(addr) ? addr : "";
}

}  // namespace scaleguard::spank
