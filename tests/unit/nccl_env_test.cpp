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
  EXPECT_EQ(efa->name, "efa-v2");
  EXPECT_EQ(efa->version, 2);
  // Older versions stay loadable: a job log naming efa-v1 can still be reproduced.
  const auto v1 = load_profile_file(kProfiles + "/efa-v1.ini");
  ASSERT_TRUE(v1.ok()) << v1.error().str();
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

// An aws-ofi-nccl library as the release installs it: the start-up message holds the
// release ("NET/OFI Initializing aws-ofi-nccl 1.17.1"), among binary bytes.
std::string plugin_library(const std::string& version) {
  std::string bytes(3000, '\x7f');
  bytes += std::string("\0NET/OFI Initializing aws-ofi-nccl ", 35) + version + std::string("\0", 1);
  bytes += std::string(5000, '\x01');
  return bytes;
}

// One EFA node: instance type, and the plugin (release "" = a library without the string).
class EfaNode : public NcclFakeNode {
 protected:
  EnvList env_for(const std::string& instance, const std::string& ofi, const std::string& lib,
                  const Env& user = {}, const std::string& dir = "opt/amazon/ofi-nccl/lib") {
    add_ib_device("rdmap16s27", "efa");
    if (!instance.empty()) write("sys/devices/virtual/dmi/id/product_name", instance + "\n");
    if (!lib.empty()) write(dir + "/" + lib, ofi.empty() ? std::string("ELF") : plugin_library(ofi));
    node = detect_node(probe());
    const auto profile = load_profile(kProfiles, profile_family(node));
    EXPECT_TRUE(profile.ok()) << profile.error().str();
    return profile.ok() ? nccl_env(node, *profile, user) : EnvList{};
  }
  NodeInfo node;
};

TEST_F(EfaNode, CurrentPluginOnP5GetsNetPinnedAndBuffersNoLegacyVariables) {
  write("opt/amazon/ofi-nccl/lib/libnccl-net.so", "");
  write("opt/amazon/ofi-nccl/lib/libnccl-ofi-tuner.so", "");  // 1.15+: the net library again
  const EnvList env = env_for("p5.48xlarge", "1.17.1", "libnccl-net-ofi.so");
  EXPECT_EQ(node.ofi_nccl_version.str(), "1.17.1");
  EXPECT_EQ(node.ofi_nccl_version_known, NodeInfo::VersionKnown::exact);
  ASSERT_NE(find(env, "NCCL_NET"), nullptr);
  EXPECT_EQ(*find(env, "NCCL_NET"), "AWS Libfabric");
  EXPECT_EQ(*find(env, "NCCL_BUFFSIZE"), "8388608");
  EXPECT_EQ(*find(env, "NCCL_P2P_NET_CHUNKSIZE"), "524288");
  for (const char* obsolete : {"FI_PROVIDER", "FI_EFA_FORK_SAFE", "FI_EFA_USE_DEVICE_RDMA", "NCCL_PROTO", "NCCL_TUNER_PLUGIN"})
    EXPECT_EQ(find(env, obsolete), nullptr) << obsolete;
  EXPECT_EQ(*find(env, "LD_LIBRARY_PATH"), (root / "opt/amazon/ofi-nccl/lib").string());
  EXPECT_EQ(*find(env, "SCALEGUARD_NCCL_PROFILE"), "efa-v2");
  EXPECT_EQ(*find(env, "SCALEGUARD_OFI_NCCL_VERSION"), "1.17.1");
  EXPECT_EQ(*find(env, "SCALEGUARD_INSTANCE_TYPE"), "p5.48xlarge");
}

TEST_F(EfaNode, BuffersOnlyWhereThePluginSetsThem) {
  // The plugin's platform table: p4d/p4de, p5.48xlarge/p5e, p5en, p6 and later.
  const std::vector<std::pair<std::string, bool>> cases = {
      {"p4d.24xlarge", true},  {"p4de.24xlarge", true}, {"p5.48xlarge", true}, {"p5e.48xlarge", true},
      {"p5en.48xlarge", true}, {"p6-b200.48xlarge", true}, {"p5.4xlarge", false}, {"g5.48xlarge", false},
      {"g6e.48xlarge", false}, {"trn1.32xlarge", false}, {"p3dn.24xlarge", false}, {"", false}};
  for (const auto& [instance, buffers] : cases) {
    fs::remove_all(root);
    fs::create_directories(root);
    const EnvList env = env_for(instance, "1.16.3", "libnccl-net-ofi.so");
    EXPECT_EQ(find(env, "NCCL_BUFFSIZE") != nullptr, buffers) << instance;
    EXPECT_EQ(find(env, "NCCL_P2P_NET_CHUNKSIZE") != nullptr, buffers) << instance;
    EXPECT_NE(find(env, "NCCL_NET"), nullptr) << instance;  // every EFA node
  }
}

TEST_F(EfaNode, LegacyVariablesOnlyForTheReleasesThatNeedThem) {
  struct Case { std::string instance, ofi; bool rdma, provider_proto; };
  // doc/efa-env-var.md: FI_EFA_USE_DEVICE_RDMA=1 below 1.7.0 on p4/p5; FI_PROVIDER=efa and
  // NCCL_PROTO=simple up to 1.5.0.
  const std::vector<Case> cases = {
      {"p4d.24xlarge", "1.5.0", true, true},  {"g5.48xlarge", "1.5.0", false, true},
      {"p4d.24xlarge", "1.6.0", true, false}, {"p5.48xlarge", "1.6.2", true, false},
      {"g5.48xlarge", "1.6.0", false, false}, {"p4d.24xlarge", "1.7.0", false, false},
      {"p5.48xlarge", "1.7.3", false, false}, {"p4de.24xlarge", "1.14.2", false, false}};
  for (const auto& c : cases) {
    fs::remove_all(root);
    fs::create_directories(root);
    const EnvList env = env_for(c.instance, c.ofi, "libnccl-net.so");
    EXPECT_EQ(node.ofi_nccl_version.str(), c.ofi);
    EXPECT_EQ(find(env, "FI_EFA_USE_DEVICE_RDMA") != nullptr, c.rdma) << c.instance << " " << c.ofi;
    EXPECT_EQ(find(env, "FI_PROVIDER") != nullptr, c.provider_proto) << c.instance << " " << c.ofi;
    EXPECT_EQ(find(env, "NCCL_PROTO") != nullptr, c.provider_proto) << c.instance << " " << c.ofi;
    EXPECT_EQ(find(env, "FI_EFA_FORK_SAFE"), nullptr);
    if (c.provider_proto) {
      EXPECT_EQ(*find(env, "NCCL_PROTO"), "simple");
    }
  }
}

TEST_F(EfaNode, SeparateTunerLibraryOnlyBefore115) {
  write("opt/aws-ofi-nccl/lib/libnccl-ofi-tuner.so", "");
  const EnvList old = env_for("p5.48xlarge", "1.12.1", "libnccl-net.so", {}, "opt/aws-ofi-nccl/lib");
  ASSERT_NE(find(old, "NCCL_TUNER_PLUGIN"), nullptr);
  EXPECT_EQ(*find(old, "NCCL_TUNER_PLUGIN"), (root / "opt/aws-ofi-nccl/lib/libnccl-ofi-tuner.so").string());
  // 1.8: no tuner library at all.
  fs::remove_all(root);
  fs::create_directories(root);
  EXPECT_EQ(find(env_for("p5.48xlarge", "1.8.1", "libnccl-net.so"), "NCCL_TUNER_PLUGIN"), nullptr);
}

TEST_F(EfaNode, ReleaseFromLibraryNameWhenTheStringIsMissing) {
  // libnccl-net-ofi.so exists from 1.15.0 on: a lower bound, enough to drop every legacy variable.
  const EnvList env = env_for("p4d.24xlarge", "", "libnccl-net-ofi.so");
  EXPECT_EQ(node.ofi_nccl_version_known, NodeInfo::VersionKnown::at_least);
  EXPECT_EQ(*find(env, "SCALEGUARD_OFI_NCCL_VERSION"), ">=1.15.0");
  EXPECT_EQ(find(env, "FI_EFA_USE_DEVICE_RDMA"), nullptr);
  EXPECT_EQ(find(env, "NCCL_TUNER_PLUGIN"), nullptr);
  EXPECT_NE(find(env, "NCCL_BUFFSIZE"), nullptr);
  // libnccl-net.so without the string: release unknown, legacy variables left out.
  fs::remove_all(root);
  fs::create_directories(root);
  const EnvList unknown = env_for("p4d.24xlarge", "", "libnccl-net.so");
  EXPECT_EQ(node.ofi_nccl_version_known, NodeInfo::VersionKnown::no);
  EXPECT_EQ(find(unknown, "SCALEGUARD_OFI_NCCL_VERSION"), nullptr);
  EXPECT_EQ(find(unknown, "FI_PROVIDER"), nullptr);
  EXPECT_NE(find(unknown, "NCCL_NET"), nullptr);
}

TEST_F(EfaNode, MultiarchPluginDirectory) {
  const EnvList env = env_for("p5en.48xlarge", "1.16.3", "libnccl-net-ofi.so", {}, "opt/amazon/ofi-nccl/lib/x86_64-linux-gnu");
  EXPECT_EQ(node.ofi_nccl_dir, (root / "opt/amazon/ofi-nccl/lib/x86_64-linux-gnu").string());
  EXPECT_EQ(*find(env, "LD_LIBRARY_PATH"), node.ofi_nccl_dir);
  EXPECT_EQ(*find(env, "SCALEGUARD_OFI_NCCL_VERSION"), "1.16.3");
}

TEST_F(EfaNode, MissingPluginStillPinsNetSoNcclFailsLoudly) {
  const EnvList env = env_for("g5.48xlarge", "", "");
  EXPECT_EQ(node.ofi_nccl_dir, "");
  EXPECT_EQ(*find(env, "NCCL_NET"), "AWS Libfabric");
  EXPECT_EQ(find(env, "LD_LIBRARY_PATH"), nullptr);
  EXPECT_EQ(find(env, "NCCL_TUNER_PLUGIN"), nullptr);
}

TEST_F(EfaNode, UserNetAndBuffersWin) {
  const EnvList env = env_for("p5.48xlarge", "1.5.0", "libnccl-net.so",
                              {{"NCCL_NET", "Socket"}, {"NCCL_BUFFSIZE", "4194304"}, {"NCCL_PROTO", "LL128"}});
  EXPECT_EQ(find(env, "NCCL_NET"), nullptr);
  EXPECT_EQ(find(env, "NCCL_BUFFSIZE"), nullptr);
  EXPECT_EQ(find(env, "NCCL_PROTO"), nullptr);
  EXPECT_NE(find(env, "FI_PROVIDER"), nullptr);  // the rest of the 1.5.0 set still applies
}

TEST(NcclProfile, OfiVersions) {
  OfiVersion v;
  ASSERT_TRUE(parse_ofi_version("1.7.3", v));
  EXPECT_EQ(v.str(), "1.7.3");
  ASSERT_TRUE(parse_ofi_version("1.13.2-aws", v));
  EXPECT_EQ(v.str(), "1.13.2");
  ASSERT_TRUE(parse_ofi_version("v1.9", v));
  EXPECT_EQ(v.str(), "1.9.0");
  for (const char* bad : {"", "1", "x.1", "1.x", "1.2.3x", "-1.2"}) EXPECT_FALSE(parse_ofi_version(bad, v)) << bad;
  EXPECT_TRUE(OfiVersion({1, 6, 9}) < OfiVersion({1, 7, 0}));
  EXPECT_TRUE(OfiVersion({1, 9, 0}) < OfiVersion({1, 15, 0}));  // numeric, not text order
}

TEST_F(NcclFakeNode, WhenSectionsParseAndBadOnesNameTheLine) {
  write("good-v1.ini", "version = 1\n[when ofi<1.7.0&instance=p4d.24xlarge,p5*]\nFI_EFA_USE_DEVICE_RDMA = 1\n"
                       "[when ofi>=1.15.0]\nNCCL_DEBUG = WARN\n");
  const auto p = load_profile_file((root / "good-v1.ini").string());
  ASSERT_TRUE(p.ok()) << p.error().str();
  ASSERT_EQ(p->when.size(), 2u);
  EXPECT_EQ(p->when[0].instances, (std::vector<std::string>{"p4d.24xlarge", "p5*"}));
  EXPECT_TRUE(p->when[0].has_below);
  EXPECT_EQ(p->when[0].env.size(), 1u);
  EXPECT_EQ(p->when[1].env[0].first, "NCCL_DEBUG");
  for (const std::string header : {"[when]", "[when ofi<1]", "[when ofi<x.y]", "[when gpu=a100]",
                                   "[when instance=P4D.24xlarge]", "[when instance=]", "[when ofi<1.7.0&]"}) {
    write("bad-v1.ini", "version = 1\n" + header + "\nNCCL_DEBUG = INFO\n");
    const auto bad = load_profile_file((root / "bad-v1.ini").string());
    ASSERT_FALSE(bad.ok()) << header;
    EXPECT_EQ(bad.error().line, 2) << header;
    EXPECT_EQ(bad.error().field, "when") << header;
  }
}

TEST(NcclProfile, ConditionsOnAnUnknownOrBoundedRelease) {
  ProfileCondition below, at_least;
  below.has_below = true, below.below = {1, 7, 0};
  at_least.has_at_least = true, at_least.at_least = {1, 16, 0};
  NodeInfo node;
  EXPECT_FALSE(condition_holds(below, node));  // unknown release: legacy settings stay out
  EXPECT_FALSE(condition_holds(at_least, node));
  node.ofi_nccl_version = {1, 15, 0};
  node.ofi_nccl_version_known = NodeInfo::VersionKnown::at_least;
  EXPECT_FALSE(condition_holds(below, node));     // >= 1.15.0 is never < 1.7.0
  EXPECT_FALSE(condition_holds(at_least, node));  // >= 1.15.0 may be 1.15.x
  at_least.at_least = {1, 15, 0};
  EXPECT_TRUE(condition_holds(at_least, node));
  node.ofi_nccl_version_known = NodeInfo::VersionKnown::exact;
  node.ofi_nccl_version = {1, 6, 0};
  EXPECT_TRUE(condition_holds(below, node));
}

TEST_F(NcclFakeNode, UserValuesAreNeverOverridden) {
  add_ib_device("rdmap16s27", "efa");
  write("sys/devices/virtual/dmi/id/product_name", "p5.48xlarge");
  write("opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so", "");
  const NodeInfo node = detect_node(probe());
  const auto profile = load_profile(kProfiles, "efa");
  ASSERT_TRUE(profile.ok());
  const Env user = {{"FI_PROVIDER", "tcp"},
                    {"NCCL_NET", "Socket"},
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
