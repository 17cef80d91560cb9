// nccl_env: node detection on fake sysfs trees, the shipped profiles, never-override merge,
// and the rendezvous helpers.
#include "scaleguard/nccl_env.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using namespace scaleguard;

namespace {

const std::string kProfiles = std::string(SCALEGUARD_SOURCE_DIR) + "/configs/nccl";

// A fresh directory per test, removed afterwards.
class NcclFakeNode : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "sg-nccl-XXXXXX").string();
    ASSERT_NE(mkdtemp(&tmpl[0]), nullptr);
    root = tmpl;
  }
  void TearDown() override { fs::remove_all(root); }

  void write(const std::string& rel, const std::string& text) {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text;
  }
  // An RDMA device as the kernel shows it: class entry -> device dir with a driver link.
  void add_ib_device(const std::string& name, const std::string& driver) {
    fs::create_directories(root / "sys/bus/pci/drivers" / driver);
    fs::create_directories(root / "sys/class/infiniband" / name / "device");
    fs::create_symlink(root / "sys/bus/pci/drivers" / driver, root / "sys/class/infiniband" / name / "device/driver");
  }
  NodeProbe probe() const {
    NodeProbe p;
    p.root = root.string();
    return p;
  }
  fs::path root;
};

const std::string* find(const EnvList& env, const std::string& name) {
  for (const auto& kv : env)
    if (kv.first == name) return &kv.second;
  return nullptr;
}

TEST_F(NcclFakeNode, EmptyTreeHasNothing) {
  const NodeInfo node = detect_node(probe());
  EXPECT_TRUE(node.efa_devices.empty());
  EXPECT_EQ(node.instance_type, "");
  EXPECT_EQ(node.ofi_nccl_dir, "");
  EXPECT_EQ(profile_family(node), "tcp");
}

TEST_F(NcclFakeNode, DetectsEfaByDriverNotMellanox) {
  add_ib_device("rdmap16s27", "efa");
  add_ib_device("rdmap32s27", "efa");
  add_ib_device("mlx5_0", "mlx5_core");
  const NodeInfo node = detect_node(probe());
  EXPECT_EQ(node.efa_devices, (std::vector<std::string>{"rdmap16s27", "rdmap32s27"}));
  EXPECT_EQ(profile_family(node), "efa");
}

TEST_F(NcclFakeNode, DetectsEfaByNameWithoutDriverLink) {
  fs::create_directories(root / "sys/class/infiniband/efa_0");
  fs::create_directories(root / "sys/class/infiniband/mlx5_1");
  EXPECT_EQ(detect_node(probe()).efa_devices, std::vector<std::string>{"efa_0"});
}

TEST_F(NcclFakeNode, InstanceTypeFromDmi) {
  write("sys/devices/virtual/dmi/id/product_name", "p4d.24xlarge\n");
  const NodeInfo node = detect_node(probe());
  EXPECT_EQ(node.instance_type, "p4d.24xlarge");
  EXPECT_EQ(node.instance_source, "dmi");
}

TEST_F(NcclFakeNode, NonInstanceDmiFallsBackToParallelCluster) {
  write("sys/devices/virtual/dmi/id/product_name", "Standard PC (Q35 + ICH9, 2009)\n");
  write("etc/parallelcluster/slurm_plugin/fleet-config.json", R"({
    "gpu": {"p4d": {"Api": "run-instances", "Instances": [{"InstanceType": "p4d.24xlarge"}]},
            "p5-big": {"Instances": [{"InstanceType": "p5.48xlarge"}]}},
    "gpu-spot": {"p4d": {"Instances": [{"InstanceType": "p4de.24xlarge"}]}}})");
  NodeProbe p = probe();
  p.node_name = "gpu-st-p4d-1";
  EXPECT_EQ(detect_node(p).instance_type, "p4d.24xlarge");
  EXPECT_EQ(detect_node(p).instance_source, "parallelcluster");
  p.node_name = "gpu-dy-p5-big-12";
  EXPECT_EQ(detect_node(p).instance_type, "p5.48xlarge");
  p.node_name = "gpu-spot-st-p4d-2";  // hyphenated queue: matched against the config's keys
  EXPECT_EQ(detect_node(p).instance_type, "p4de.24xlarge");
  p.node_name = "gpu-st-p4d-x";
  EXPECT_EQ(detect_node(p).instance_type, "");
}

TEST_F(NcclFakeNode, BrokenFleetConfigIsUnknownNotACrash) {
  NodeProbe p = probe();
  p.node_name = "gpu-st-p4d-1";
  for (const std::string text : {R"({"gpu": [1, 2,)", R"({"gpu": {"p4d": {"Instances": [{"InstanceType": 5}]}}})",
                                 R"({"gpu": {"p4d": {"Instances": {"InstanceType": "p4d.24xlarge"}}}})",
                                 R"({"gpu": {"p4d": {"Instances": [{"InstanceType": "p4d; rm -rf /"}]}}})",
                                 R"({"gpu": {"p4d": []}})", R"([])"}) {
    write("etc/parallelcluster/slurm_plugin/fleet-config.json", text);
    EXPECT_EQ(detect_node(p).instance_type, "") << text;
  }
}

TEST_F(NcclFakeNode, FindsOfiNcclPluginAndItsLibraries) {
  write("opt/aws-ofi-nccl/lib/libnccl-net.so", "");
  write("opt/amazon/ofi-nccl/lib/README", "no plugin here");
  const NodeInfo node = detect_node(probe());
  EXPECT_EQ(node.ofi_nccl_dir, (root / "opt/aws-ofi-nccl/lib").string());
  EXPECT_EQ(node.ofi_nccl_libs, std::vector<std::string>{"libnccl-net.so"});
}

TEST(NcclProfile, ShippedProfilesLoad) {
  const auto efa = load_profile(kProfiles, "efa");
  ASSERT_TRUE(efa.ok()) << efa.error().str();
  EXPECT_EQ(efa->name, "efa-v1");
  EXPECT_EQ(efa->version, 1);
  const auto tcp = load_profile(kProfiles, "tcp");
  ASSERT_TRUE(tcp.ok()) << tcp.error().str();
  EXPECT_EQ(tcp->name, "tcp-v1");
  EXPECT_FALSE(load_profile(kProfiles, "ib").ok());
}

TEST_F(NcclFakeNode, HighestVersionWins) {
  write("p/efa-v1.ini", "version = 1\n[env]\nNCCL_BUFFSIZE = 1\n");
  write("p/efa-v12.ini", "version = 12\n[env]\nNCCL_BUFFSIZE = 12\n");
  write("p/efa-v2.ini", "version = 2\n[env]\nNCCL_BUFFSIZE = 2\n");
  write("p/efa-vx.ini", "not a profile");
  const auto p = load_profile((root / "p").string(), "efa");
  ASSERT_TRUE(p.ok()) << p.error().str();
  EXPECT_EQ(p->version, 12);
}

TEST_F(NcclFakeNode, BadProfilesNameFileLineAndKey) {
  struct Case { std::string text, field, needle; int line; };
  const std::vector<Case> cases = {
      {"version = 1\nbogus = 2\n", "bogus", "unknown key", 2},
      {"version = 1\n[envv]\n", "envv", "unknown section", 2},
      {"version = 1\n[env extra]\n", "env", "unknown section", 2},
      {"version = 1\n[env]\nPATH = /tmp\n", "[env] PATH", "not an NCCL", 3},
      {"version = 1\n[env]\nnccl_debug = INFO\n", "[env] nccl_debug", "not an NCCL", 3},
      {"version = 1\n[env]\nNCCL_DEBUG = INFO\nNCCL_DEBUG = WARN\n", "", "twice", 4},
      {"version = 1\n[env]\nNCCL_DEBUG =\n", "[env] NCCL_DEBUG", "empty", 3},
      {"version = 1\n[env]\nNCCL_NET_PLUGIN = ${HOME}/x\n", "[env] NCCL_NET_PLUGIN", "placeholder", 3},
      {"version = 1\n[prepend]\nPATH = /x\n", "[prepend] PATH", "path list", 3},
      {"version = 1\n[env\n", "", "section header", 2},
      {"version = 1\njust words\n", "", "key = value", 2},
      {"version = one\n", "version", "positive integer", 1},
      {"[env]\nNCCL_DEBUG = INFO\n", "version", "missing", 0},
      {"version = 2\n", "version", "does not match", 0},
  };
  for (const auto& c : cases) {
    write("bad-v1.ini", c.text);
    const auto p = load_profile_file((root / "bad-v1.ini").string());
    ASSERT_FALSE(p.ok()) << c.text;
    EXPECT_EQ(p.error().field, c.field) << c.text;
    EXPECT_EQ(p.error().line, c.line) << c.text;
    EXPECT_EQ(p.error().file, (root / "bad-v1.ini").string());
    EXPECT_NE(p.error().message.find(c.needle), std::string::npos) << c.text << " -> " << p.error().message;
  }
  EXPECT_FALSE(load_profile_file((root / "missing-v1.ini").string()).ok());
}

TEST_F(NcclFakeNode, EfaNodeGetsProfileWithPluginPaths) {
  add_ib_device("rdmap16s27", "efa");
  write("sys/devices/virtual/dmi/id/product_name", "p4d.24xlarge");
  write("opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so", "");
  write("opt/amazon/ofi-nccl/lib/libnccl-ofi-tuner.so", "");
  const NodeInfo node = detect_node(probe());
  const auto profile = load_profile(kProfiles, profile_family(node));
  ASSERT_TRUE(profile.ok()) << profile.error().str();
  const EnvList env = nccl_env(node, *profile, {});
  const std::string dir = (root / "opt/amazon/ofi-nccl/lib").string();
  ASSERT_NE(find(env, "FI_PROVIDER"), nullptr);
  EXPECT_EQ(*find(env, "FI_PROVIDER"), "efa");
  ASSERT_NE(find(env, "FI_EFA_USE_DEVICE_RDMA"), nullptr);  // p4d is an RDMA instance
  EXPECT_EQ(*find(env, "NCCL_TUNER_PLUGIN"), dir + "/libnccl-ofi-tuner.so");
  EXPECT_EQ(*find(env, "LD_LIBRARY_PATH"), dir);
  EXPECT_EQ(*find(env, "SCALEGUARD_NCCL_PROFILE"), "efa-v1");
  EXPECT_EQ(*find(env, "SCALEGUARD_EFA_DEVICES"), "1");
  EXPECT_EQ(*find(env, "SCALEGUARD_INSTANCE_TYPE"), "p4d.24xlarge");
}

TEST_F(NcclFakeNode, EfaWithoutRdmaOrPluginLeavesThoseOut) {
  add_ib_device("rdmap0s6", "efa");
  write("sys/devices/virtual/dmi/id/product_name", "g5.48xlarge");
  const NodeInfo node = detect_node(probe());
  const auto profile = load_profile(kProfiles, profile_family(node));
  ASSERT_TRUE(profile.ok());
  const EnvList env = nccl_env(node, *profile, {});
  EXPECT_NE(find(env, "FI_PROVIDER"), nullptr);
  EXPECT_EQ(find(env, "FI_EFA_USE_DEVICE_RDMA"), nullptr);
  EXPECT_EQ(find(env, "NCCL_TUNER_PLUGIN"), nullptr);
  EXPECT_EQ(find(env, "LD_LIBRARY_PATH"), nullptr);
}

TEST_F(NcclFakeNode, TunerLeftOutWhenThatPluginVersionHasNone) {
  add_ib_device("rdmap16s27", "efa");
  write("opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so", "");
  const NodeInfo node = detect_node(probe());
  const auto profile = load_profile(kProfiles, "efa");
  ASSERT_TRUE(profile.ok());
  const EnvList env = nccl_env(node, *profile, {});
  EXPECT_EQ(find(env, "NCCL_TUNER_PLUGIN"), nullptr);
  EXPECT_NE(find(env, "LD_LIBRARY_PATH"), nullptr);
}

TEST_F(NcclFakeNode, UserValuesAreNeverOverridden) {
  add_ib_device("rdmap16s27", "efa");
  write("sys/devices/virtual/dmi/id/product_name", "p5.48xlarge");
  write("opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so", "");
  const NodeInfo node = detect_node(probe());
  const auto profile = load_profile(kProfiles, "efa");
  ASSERT_TRUE(profile.ok());
  const Env user = {{"FI_PROVIDER", "tcp"},
                    {"NCCL_SOCKET_IFNAME", "eth7"},
                    {"FI_EFA_USE_DEVICE_RDMA", "0"},
                    {"SCALEGUARD_NCCL_PROFILE", "mine"},
                    {"LD_LIBRARY_PATH", "/home/u/lib:/usr/lib"}};
  const EnvList env = nccl_env(node, *profile, user);
  for (const auto& [name, value] : user)
    if (name != "LD_LIBRARY_PATH") {
      EXPECT_EQ(find(env, name), nullptr) << name << " was overridden";
    }
  // Prepended, the user's entries kept in order after ours.
  EXPECT_EQ(*find(env, "LD_LIBRARY_PATH"), (root / "opt/amazon/ofi-nccl/lib").string() + ":/home/u/lib:/usr/lib");
  EXPECT_NE(find(env, "NCCL_BUFFSIZE"), nullptr);
}

TEST_F(NcclFakeNode, PathAlreadyPresentOrEmptyUserPath) {
  write("opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so", "");
  add_ib_device("rdmap16s27", "efa");
  const NodeInfo node = detect_node(probe());
  const auto profile = load_profile(kProfiles, "efa");
  ASSERT_TRUE(profile.ok());
  const std::string dir = node.ofi_nccl_dir;
  EXPECT_EQ(find(nccl_env(node, *profile, {{"LD_LIBRARY_PATH", "/a:" + dir}}), "LD_LIBRARY_PATH"), nullptr);
  // An empty user value must not become "dir:" (an empty element means the working directory).
  EXPECT_EQ(*find(nccl_env(node, *profile, {{"LD_LIBRARY_PATH", ""}}), "LD_LIBRARY_PATH"), dir);
}

TEST(NcclEnv, TcpProfileOnPlainNode) {
  const auto profile = load_profile(kProfiles, profile_family(NodeInfo{}));
  ASSERT_TRUE(profile.ok());
  const EnvList env = nccl_env(NodeInfo{}, *profile, {});
  EXPECT_EQ(*find(env, "NCCL_IB_DISABLE"), "1");
  EXPECT_EQ(find(env, "FI_PROVIDER"), nullptr);
  EXPECT_EQ(*find(env, "SCALEGUARD_EFA_DEVICES"), "0");
  EXPECT_EQ(find(env, "SCALEGUARD_INSTANCE_TYPE"), nullptr);
}

TEST(NcclRendezvous, FirstHost) {
  const std::vector<std::pair<std::string, std::string>> ok = {
      {"gpu-st-p4d-[1-2]", "gpu-st-p4d-1"}, {"gpu-st-p4d-2", "gpu-st-p4d-2"},
      {"n[001-004,9]", "n001"},             {"n[7,3-4]", "n7"},
      {"a,b", "a"},                         {"r[1-2]-n[3-4],x", "r1-n3"},
      {"node[5]", "node5"},                 {"ip-10-0-0-1.ec2.internal", "ip-10-0-0-1.ec2.internal"}};
  for (const auto& [list, host] : ok) {
    const auto h = first_host(list);
    ASSERT_TRUE(h.ok()) << list << ": " << h.error().str();
    EXPECT_EQ(*h, host) << list;
  }
  for (const std::string& bad : std::vector<std::string>{"", "n[", "n[]", "n[1-2", "n]1", "n[a-b]", "n[[1]]", "n;rm", "n\n1",
                                ",", "n[-2]", std::string(70000, 'a')})
    EXPECT_FALSE(first_host(bad).ok()) << bad.substr(0, 20);
}

TEST(NcclRendezvous, MasterPortIsDeterministicAndUnprivileged) {
  EXPECT_EQ(master_port(1), 20001);
  EXPECT_EQ(master_port(1), master_port(1));
  EXPECT_NE(master_port(1), master_port(2));
  for (std::uint32_t id : {0u, 9999u, 10000u, 4294967295u}) {
    EXPECT_GE(master_port(id), 20000);
    EXPECT_LT(master_port(id), 30000);
  }
}

}  // namespace
