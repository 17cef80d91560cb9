// NCCL/EFA environment for one node: detect the node's fabric (EFA devices, instance type,
// aws-ofi-nccl plugin), load a versioned profile from configs/nccl/, and compute the
// variables to add to a task's environment without overriding anything the user set.
// Also the torch.distributed rendezvous helpers (first host, port) the SPANK plugin and the
// runner share. Pure C++17: no Slurm, no MPI; every path is relative to a root so tests
// run against fake sysfs trees.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "scaleguard/result.h"

namespace scaleguard {

// Where detect_node() looks. Every path except `root` is relative to `root`.
struct NodeProbe {
  std::string root = "/";
  std::string node_name;  // Slurm node name: the key into the ParallelCluster fleet config
  std::string infiniband = "sys/class/infiniband";
  std::string dmi_product = "sys/devices/virtual/dmi/id/product_name";
  // Written by ParallelCluster 3: {queue: {compute_resource: {Instances: [{InstanceType}]}}}.
  std::string pcluster_fleet = "etc/parallelcluster/slurm_plugin/fleet-config.json";
  // aws-ofi-nccl install locations: EFA installer >= 1.30 (plain and the multiarch layout
  // some AMIs and containers use), older installer, source builds. First one holding the
  // net library wins.
  std::vector<std::string> ofi_nccl_dirs = {"opt/amazon/ofi-nccl/lib",
                                            "opt/amazon/ofi-nccl/lib/x86_64-linux-gnu",
                                            "opt/amazon/ofi-nccl/lib/aarch64-linux-gnu",
                                            "opt/amazon/ofi-nccl/lib64",
                                            "opt/aws-ofi-nccl/lib",
                                            "opt/aws-ofi-nccl/install/lib",
                                            "usr/local/lib"};
};

// An aws-ofi-nccl release, e.g. {1, 15, 0}; ordered.
struct OfiVersion {
  int major = 0, minor = 0, patch = 0;
  bool operator<(const OfiVersion& o) const {
    return major != o.major ? major < o.major : minor != o.minor ? minor < o.minor : patch < o.patch;
  }
  std::string str() const;
};
// "1.7.3", "1.13.2-aws", "v1.9" -> version; false on anything else.
bool parse_ofi_version(const std::string& text, OfiVersion& out);

struct NodeInfo {
  std::vector<std::string> efa_devices;  // e.g. rdmap16s27, sorted
  std::string instance_type;             // e.g. p4d.24xlarge; empty = unknown
  std::string instance_source;           // "dmi", "parallelcluster" or empty
  std::string ofi_nccl_dir;              // full path of the plugin's lib dir; empty = absent
  std::vector<std::string> ofi_nccl_libs;  // lib*.so file names in that dir, sorted
  // The plugin's release: read from the library ("NET/OFI Initializing aws-ofi-nccl 1.17.1",
  // exact), else inferred from the file name (libnccl-net-ofi.so exists from 1.15.0 on: a
  // lower bound), else unknown.
  OfiVersion ofi_nccl_version;
  enum class VersionKnown { no, at_least, exact } ofi_nccl_version_known = VersionKnown::no;
};

// Never fails: a missing or unreadable file means "not present" on this node.
NodeInfo detect_node(const NodeProbe& probe);

// A `[when CONDITIONS]` section: its variables apply only where every condition holds.
// Conditions, joined with '&' (the header is one word): `ofi<V` / `ofi>=V` (plugin
// release; false when the release is unknown or only bounded on the wrong side) and
// `instance=GLOB[,GLOB...]` (fnmatch * and ? on the instance type; false when unknown).
// E.g. [when ofi<1.7.0&instance=p4d.24xlarge,p5.*].
struct ProfileCondition {
  std::string text;  // the header's condition text, for messages
  int line = 0;
  bool has_below = false, has_at_least = false;
  OfiVersion below, at_least;
  std::vector<std::string> instances;  // empty = any
  std::vector<std::pair<std::string, std::string>> env;
};
bool condition_holds(const ProfileCondition& c, const NodeInfo& node);

// A profile file `<name>-v<N>.ini` (see configs/nccl/README.md for the format).
struct Profile {
  std::string name;     // "efa-v1"
  int version = 0;
  std::string description;
  std::vector<std::string> rdma_instance_types;  // [rdma] applies only on these
  std::vector<std::pair<std::string, std::string>> env;      // set when unset
  std::vector<std::pair<std::string, std::string>> rdma;     // set when unset, RDMA nodes
  std::vector<std::pair<std::string, std::string>> prepend;  // path lists (LD_LIBRARY_PATH)
  std::vector<ProfileCondition> when;                        // [when ...] sections, file order
};

Result<Profile> load_profile_file(const std::string& path);
// The highest version `<family>-v<N>.ini` in `dir`, e.g. family "efa" -> efa-v2.ini.
Result<Profile> load_profile(const std::string& dir, const std::string& family);
// "efa" when the node has EFA devices, else "tcp".
std::string profile_family(const NodeInfo& node);

using Env = std::map<std::string, std::string>;
using EnvList = std::vector<std::pair<std::string, std::string>>;

// Variables to set for a task on `node`. Names already in `current` are never included,
// except the prepend lists, whose value is the full new list (missing entries first, then
// the current value). An entry naming ${OFI_NCCL_DIR} is left out when the plugin is absent,
// and one naming ${OFI_NCCL_DIR}/FILE when FILE is not there (plugin versions differ).
// [env] first, then the [when] sections that hold on `node` in file order (the first
// value of a name wins), then [rdma] on rdma_instance_types.
// Adds SCALEGUARD_NCCL_PROFILE, SCALEGUARD_EFA_DEVICES and (when known)
// SCALEGUARD_INSTANCE_TYPE and SCALEGUARD_OFI_NCCL_VERSION ("1.17.1", ">=1.15.0") so a job
// can see what was applied.
EnvList nccl_env(const NodeInfo& node, const Profile& profile, const Env& current);

// First host of a Slurm hostlist expression: "gpu-st-p4d-[1-2],x" -> "gpu-st-p4d-1";
// "n[001-004]" -> "n001"; "r[1-2]-n[3-4]" -> "r1-n3". Bounded; malformed -> error.
Result<std::string> first_host(const std::string& nodelist);
// Deterministic rendezvous port for a job: 20000 + job_id % 10000, unprivileged and below
// Linux's default ephemeral range (32768+), so it cannot collide with outgoing sockets.
int master_port(std::uint32_t job_id);

}  // namespace scaleguard
