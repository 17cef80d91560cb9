// Catalog and policy files: the shipped ones load; every kind of mistake is an error that
// names the file, the line, the key and a fix.
#include <gtest/gtest.h>

#include "scaleguard/policy.h"
#include "test_support.h"

using namespace scaleguard;
using namespace scaleguard::test;

TEST(Catalog, ShippedCatalogLoads) {
  const Catalog& cat = real_catalog();
  for (const char* g : {"V100-16GB", "V100-32GB", "A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB", "L4", "T4"})
    EXPECT_NE(cat.find_gpu(g), nullptr) << g;
  EXPECT_EQ(cat.find_gpu("a100"), cat.find_gpu("A100-40GB"));  // gres alias
  // The article's seed prices (us-east-1, July 2026).
  struct Seed { const char* name; int gpus; double od, spot; };
  for (auto s : {Seed{"p3.2xlarge", 1, 3.06, 0.92}, Seed{"p4d.24xlarge", 8, 32.77, 9.83},
                 Seed{"p5.48xlarge", 8, 44.64, 13.39}, Seed{"trn1.32xlarge", 16, 24.48, 7.34}}) {
    const Instance* i = cat.find_instance(s.name);
    ASSERT_NE(i, nullptr) << s.name;
    EXPECT_EQ(i->gpus, s.gpus);
    EXPECT_DOUBLE_EQ(i->on_demand, s.od);
    EXPECT_DOUBLE_EQ(i->spot, s.spot);
  }
  for (const char* i : {"p3.8xlarge", "p3.16xlarge", "p4de.24xlarge", "p5e.48xlarge", "g5.48xlarge", "g6.48xlarge"})
    EXPECT_NE(cat.find_instance(i), nullptr) << i;
  EXPECT_EQ(cat.find_instance("p4d.24xlarge")->efa, 4);
}

TEST(Policy, ShippedPolicyLoads) {
  auto p = load_policy(source("configs/policy.ini"));
  ASSERT_TRUE(p.ok()) << p.error().str();
  const Policy& pol = *p.value();
  ASSERT_NE(pol.default_partition(), nullptr);
  EXPECT_EQ(pol.default_partition()->name, "gpu-od");
  const Partition* spot = pol.find_partition("gpu-spot");
  ASSERT_NE(spot, nullptr);
  EXPECT_EQ(spot->capacity, Capacity::spot);
  EXPECT_EQ(spot->inst.name, "p4d.24xlarge");
  EXPECT_EQ(pol.checkpoint_roots.size(), 3u);
  const Rule& r = pol.default_partition()->rules[static_cast<int>(RuleId::distributed_min_gpu_hours)];
  EXPECT_EQ(r.threshold, 100);
  EXPECT_EQ(r.action, Action::reject);
  // The spot partition's override.
  EXPECT_EQ(spot->rules[static_cast<int>(RuleId::distributed_min_gpu_hours)].action, Action::warn);
  EXPECT_NE(describe(pol).find("gpu-spot"), std::string::npos);
}

TEST(Policy, CatalogOverrideWins) {
  TempFile f(policy_text(), "policy.ini");
  auto p = load_policy(f.path(), "/nonexistent/catalog.ini");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().file, "/nonexistent/catalog.ini");
}

namespace {
// Loads `text` as a policy and returns its error (the test fails if it loads).
Error policy_error(const std::string& text) {
  TempFile f(text, "policy.ini");
  auto p = load_policy(f.path());
  EXPECT_FALSE(p.ok()) << text;
  if (p.ok()) return {};
  Error e = p.error();
  EXPECT_EQ(e.file.empty(), false);
  return e;
}
Error catalog_error(const std::string& text) {
  TempFile f(text, "catalog.ini");
  auto c = load_catalog(f.path());
  EXPECT_FALSE(c.ok()) << text;
  return c.ok() ? Error{} : c.error();
}
const std::string kGpu = "[gpu X]\nmemory_gib = 80\ntflops_fp32 = 19.5\ntflops_fp16 = 312\nnvlink_gb_s = 600\nefficiency = 0.4\n";
}  // namespace

TEST(Policy, UnknownKeyNamesFileLineKeyAndSuggestion) {
  std::string text = policy_text();
  text.replace(text.find("fabric = efa\ndefault_time"), 12, "fabirc = efa");
  Error e = policy_error(text);
  EXPECT_EQ(e.line, 8);
  EXPECT_NE(e.field.find("fabirc"), std::string::npos);
  EXPECT_NE(e.message.find("unknown key"), std::string::npos);
  EXPECT_NE(e.hint.find("did you mean 'fabric'"), std::string::npos);
  EXPECT_NE(e.str().find("policy.ini:8:"), std::string::npos);
}

TEST(Policy, EveryMistakeIsAnError) {
  const std::string part = "[partition a]\ninstance = p4d.24xlarge\ndefault = yes\n";
  struct Case { std::string text; int line; const char* words; };
  const std::string head = "catalog = " + catalog_file() + "\n";
  for (const auto& c : std::vector<Case>{
           {head + "[rules]\nmax_comm_ratio = 0.2 explode\n" + part, 3, "unknown action"},
           {head + "[rules]\nmax_com_ratio = 0.2\n" + part, 3, "unknown rule"},
           {head + "[rules]\nmax_comm_ratio = lots warn\n" + part, 3, "not a threshold"},
           {head + "[rules]\none_gpu_type = 3 reject\n" + part, 3, "takes no threshold"},
           {head + "[rules]\ndistributed_min_gpu_hours = -5 reject\n" + part, 3, "out of range"},
           {head + "[rules]\ndistributed_min_gpu_hours = 1 2 3\n" + part, 3, "malformed rule"},
           {head + "[partition a]\ndefault = yes\n", 2, "missing key 'instance'"},
           {head + "[partition a]\ninstance = p9.huge\ndefault = yes\n", 3, "not in the catalog"},
           {head + "[partition a]\ninstance = p4d.24xlarge\ncapacity = cheap\ndefault = yes\n", 4, "unknown capacity"},
           {head + "[partition a]\ninstance = p4d.24xlarge\nfabric = carrier-pigeon\ndefault = yes\n", 4, "unknown fabric"},
           {head + "[partition a]\ninstance = p4d.24xlarge\nmax_time = 1:00:00\ndefault_time = 2:00:00\ndefault = yes\n", 5,
            "longer than max_time"},
           {head + "[partition a]\ninstance = p4d.24xlarge\nmax_time = soon\ndefault = yes\n", 4, "not a time"},
           {head + "[partition a]\ninstance = p4d.24xlarge\ndefault = maybe\n", 4, "yes or no"},
           {head + part + "[partition b]\ninstance = p4d.24xlarge\ndefault = yes\n", 5, "second default"},
           {head + "[partition a]\ninstance = p4d.24xlarge\n", 0, "no default partition"},
           {head, 0, "no [partition"},
           {head + "[queue a]\n", 2, "unknown section"},
           {head + part + "[partition a]\ninstance = p4d.24xlarge\n", 5, "appears twice"},
           {head + "just some words\n" + part, 2, "expected 'key = value'"},
           {head + "[partition a\n", 2, "without closing"},
           {head + "checkpoint_roots = scratch\n" + part, 2, "not an absolute path"},
           {head + "signal_before_s = 5\n" + part, 2, "out of range"},
           {head + "catalog = other.ini\n" + part, 2, "set twice"},
           {"catalog = /nonexistent/catalog.ini\n" + part, 0, "cannot open"},
       }) {
    Error e = policy_error(c.text);
    EXPECT_NE(e.str().find(c.words), std::string::npos) << "expected '" << c.words << "' in: " << e.str();
    EXPECT_EQ(e.line, c.line) << e.str();
    EXPECT_FALSE(e.hint.empty()) << e.str();
  }
}

TEST(Catalog, EveryMistakeIsAnError) {
  struct Case { std::string text; int line; const char* words; };
  for (const auto& c : std::vector<Case>{
           {kGpu + "memroy_gib = 3\n", 7, "did you mean 'memory_gib'"},
           {"[gpu X]\ntflops_fp32 = 19.5\ntflops_fp16 = 312\nnvlink_gb_s = 600\nefficiency = 0.4\n", 1,
            "missing key 'memory_gib'"},
           {"[gpu X]\nmemory_gib = lots\n", 2, "not a number"},
           {"[gpu X]\nmemory_gib = -80\n", 2, "out of range"},
           {"[gpu X]\nmemory_gib = 1e30\n", 2, "out of range"},
           {"[gpu X]\nmemory_gib = 80\ntflops_fp32 = 19.5\ntflops_fp16 = 312\nefficiency = 0.4\n", 1, "no intra-node link"},
           {kGpu + "[instance i]\ngpu = Y\ngpus = 8\nnetwork_gbps = 400\non_demand = 1\nspot = 1\n", 8, "unknown GPU type"},
           {kGpu + "[instance i]\ngpu = X\ngpus = 0\nnetwork_gbps = 400\non_demand = 1\nspot = 1\n", 9, "out of range"},
           {kGpu + "[instance i]\ngpu = X\ngpus = 2.5\nnetwork_gbps = 400\non_demand = 1\nspot = 1\n", 9, "whole number"},
           {kGpu + "[model m]\nlayers = 0\nhidden = 1024\nheads = 8\nseq = 1024\nvocab = 5\n", 8, "out of range"},
           {kGpu + "[model m]\nlayers = 2\nhidden = 1000\nheads = 3\nseq = 1024\nvocab = 5\n", 7, "multiple of heads"},
           {kGpu + "[model m]\nparams = lots\nlayers = 2\nhidden = 1024\nheads = 8\nseq = 1024\nvocab = 5\n", 8,
            "not a count"},
           {kGpu + "[assumptions]\ncomm_overlap = 2\n", 8, "out of range"},
           {kGpu + "version = 2\n", 7, "unknown key"},
           {"[assumptions]\n", 0, "no [gpu NAME]"},
           {kGpu + "[gpu]\n", 7, "without a name"},
           {kGpu + "[gpu  Y]\n", 7, "repeated blanks"},
           {kGpu + "= 5\n", 7, "missing key"},
           {kGpu + "bad key = 5\n", 7, "malformed key"},
       }) {
    Error e = catalog_error(c.text);
    EXPECT_NE(e.str().find(c.words), std::string::npos) << "expected '" << c.words << "' in: " << e.str();
    EXPECT_EQ(e.line, c.line) << e.str();
  }
}

TEST(Catalog, MissingFileAndHugeFile) {
  auto c = load_catalog("/nonexistent/catalog.ini");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().str().find("cannot open"), std::string::npos);
  TempFile big(std::string(2 << 20, '#'), "catalog.ini");
  auto b = load_catalog(big.path());
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("1 MiB"), std::string::npos);
}
