// Issue 16: the probe store (records, atomic writes under concurrent writers, trust from the file
// owner, bounded reading) and decide() acting on measurements.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <thread>

#include "scaleguard/decide.h"
#include "scaleguard/measurement.h"
#include "scaleguard/model.h"
#include "scaleguard/policy.h"
#include "scaleguard/probe_store.h"
#include "test_support.h"

using namespace scaleguard;
using namespace scaleguard::test;

namespace {

constexpr long long kNow = 1796342400;  // 2026-12-04 00:00:00 UTC

Measurement sample(const std::string& fp = "0123456789abcdef") {
  Measurement m;
  m.fingerprint = fp;
  m.instance = "p4d.24xlarge";
  m.device = "cuda";  // what a GPU probe on p4d.24xlarge records (issue 37)
  m.gpu = "A100-40GB";
  m.ranks = 2;
  m.nodes = 2;
  m.micro_batch = 8;
  m.step_s_1 = 0.1;
  m.step_s_n = 0.153;
  m.speedup = 1.31;
  m.comm_ratio = 0.12;
  m.peak_bytes = 1e9;
  m.gpu_hours = 0.01;
  m.time = kNow - 3600;
  m.date = "2026-12-04";
  m.version = "0.1.0";
  m.job_id = "12";
  m.user = "alice";
  return m;
}

// A store directory: root-owned (the test runs as root where it can), mode 1777 like /tmp.
struct Store {
  std::string dir;
  Store() {
    char tmpl[] = "/tmp/scaleguard-probe-XXXXXX";
    dir = mkdtemp(tmpl);
    chmod(dir.c_str(), 01777);
  }
  ~Store() { std::system(("rm -rf '" + dir + "'").c_str()); }
  // The owner's directory u<owner> (made as `dir_owner`, default: the owner), as write_record makes it.
  std::string sub(uid_t owner, uid_t dir_owner) const {
    const std::string d = probe::owner_dir(dir, owner);
    mkdir(d.c_str(), 0755);
    if (chown(d.c_str(), dir_owner, dir_owner) != 0) ADD_FAILURE() << "chown " << d;
    return d;
  }
  std::string sub(uid_t owner) const { return sub(owner, owner); }
  // A file owned by `owner` in the directory of `in` (default: its owner's own).
  std::string put(const std::string& name, const std::string& text, uid_t owner, uid_t in) const {
    const std::string p = sub(in, in) + "/" + name;
    std::ofstream(p) << text;
    if (chown(p.c_str(), owner, owner) != 0) ADD_FAILURE() << "chown " << p;
    return p;
  }
  std::string put(const std::string& name, const std::string& text, uid_t owner) const {
    return put(name, text, owner, owner);
  }
};

bool root() { return geteuid() == 0; }

}  // namespace

TEST(ProbeRecord, RoundTripsAndKeysByModelShape) {
  const Measurement m = sample();
  auto back = probe::parse_record(probe::format_record(m, "100M"));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back.value().fingerprint, m.fingerprint);
  EXPECT_EQ(back.value().instance, "p4d.24xlarge");
  EXPECT_EQ(back.value().device, "cuda");
  EXPECT_EQ(back.value().gpu, "A100-40GB");
  EXPECT_EQ(back.value().nodes, 2);
  EXPECT_DOUBLE_EQ(back.value().speedup, 1.31);
  EXPECT_EQ(back.value().job_id, "12");
  EXPECT_EQ(back.value().time, m.time);
  auto a = parse_model_spec("100M", real_catalog());
  auto b = parse_model_spec("100M,precision=fp32", real_catalog());
  auto c = parse_model_spec("layers=2,hidden=128,heads=4,seq=64,vocab=256", real_catalog());
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(model_fingerprint(a.value()), model_fingerprint(parse_model_spec("100M", real_catalog()).value()));
  EXPECT_NE(model_fingerprint(a.value()), model_fingerprint(b.value()));
  EXPECT_NE(model_fingerprint(a.value()), model_fingerprint(c.value()));
  EXPECT_EQ(model_fingerprint(a.value()).size(), 16u);
}

TEST(ProbeRecord, MalformedRecordsAreRefused) {
  const std::string good = probe::format_record(sample());
  EXPECT_FALSE(probe::parse_record(good.substr(0, good.size() - 1)).ok());  // partial: no final newline
  EXPECT_FALSE(probe::parse_record(good.substr(0, good.size() / 2)).ok());
  EXPECT_FALSE(probe::parse_record(good + "speedup=9\n").ok());             // twice
  EXPECT_FALSE(probe::parse_record(good + "trust=admin\n").ok());           // unknown key: trust is not data
  EXPECT_FALSE(probe::parse_record(good + "# " + std::string(5000, 'x') + "\n").ok());  // huge
  std::string nan = good;
  nan.replace(nan.find("speedup=1.31"), 12, "speedup=nan");
  EXPECT_FALSE(probe::parse_record(nan).ok());
  std::string neg = good;
  neg.replace(neg.find("comm_ratio=0.12"), 15, "comm_ratio=-1");
  EXPECT_FALSE(probe::parse_record(neg).ok());
  std::string ctl = good;
  ctl.replace(ctl.find("user=alice"), 10, std::string("user=a\x1b[2Jb"));
  EXPECT_FALSE(probe::parse_record(ctl).ok());
  EXPECT_FALSE(probe::parse_record("format=1\nspeedup=2\n").ok());          // misses keys
}

// Issue 37: a record says what hardware it was measured on; one that does not (format 1, or
// without device/gpu) or names an unknown device is refused, never used as a GPU's.
TEST(ProbeRecord, ARecordWithoutItsHardwareIsRefused) {
  const std::string good = probe::format_record(sample());
  ASSERT_TRUE(probe::parse_record(good).ok());
  EXPECT_NE(good.find("format=2\n"), std::string::npos);
  EXPECT_NE(good.find("device=cuda\ngpu=A100-40GB\n"), std::string::npos);
  auto without = [&](const std::string& key) {
    std::string t = good;
    const auto at = t.find("\n" + key + "=");
    t.erase(at + 1, t.find('\n', at + 1) - at);
    return t;
  };
  std::string v1 = without("gpu");  // as a probe before issue 37 wrote it
  v1.replace(v1.find("format=2"), 8, "format=1");
  v1.erase(v1.find("device=cuda\n"), 12);
  auto r1 = probe::parse_record(v1);
  ASSERT_FALSE(r1.ok());  // a pre-issue-37 record: it could be a CPU run filed under a GPU instance
  EXPECT_NE(r1.error().message.find("does not say which device and GPU"), std::string::npos) << r1.error().message;
  EXPECT_FALSE(probe::parse_record(without("device")).ok());
  EXPECT_FALSE(probe::parse_record(without("gpu")).ok());
  std::string tpu = good;
  tpu.replace(tpu.find("device=cuda"), 11, "device=tpu");
  EXPECT_FALSE(probe::parse_record(tpu).ok());
  Measurement cpu = sample();
  cpu.device = "cpu", cpu.gpu = "devhost";
  auto back = probe::parse_record(probe::format_record(cpu));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back.value().device, "cpu");
  EXPECT_EQ(back.value().gpu, "devhost");
}

TEST(ProbeStore, ConcurrentWritersNeverLeaveAPartialRecord) {
  Store s;
  const std::string name = probe::record_name(sample(), geteuid());
  std::atomic<bool> done{false};
  std::atomic<long> reads{0}, bad{0};
  std::thread reader([&] {
    while (!done) {
      std::ifstream in(probe::owner_dir(s.dir, geteuid()) + "/" + name);
      if (!in) continue;
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      ++reads;
      if (!probe::parse_record(text).ok()) ++bad;
    }
  });
  // Real processes writing the same record with different values, as parallel probe jobs would.
  std::vector<pid_t> kids;
  for (int w = 0; w < 6; ++w) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      Measurement m = sample();
      for (int i = 0; i < 60; ++i) {
        m.speedup = 1 + w * 0.1 + i * 0.001;
        m.user = std::string(static_cast<std::size_t>(w * 30 + i), 'u');  // records of different sizes
        if (!probe::write_record(s.dir, m)) _exit(1);
      }
      _exit(0);
    }
    kids.push_back(pid);
  }
  for (pid_t k : kids) {
    int st = 0;
    waitpid(k, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  done = true;
  reader.join();
  EXPECT_GT(reads.load(), 0);
  EXPECT_EQ(bad.load(), 0) << "a reader saw a partial record";
  // One record left, no temporary files.
  int entries = 0;
  for (const auto& n : {std::string("ls -A '") + probe::owner_dir(s.dir, geteuid()) + "' | wc -l"}) {
    FILE* p = popen(n.c_str(), "r");
    ASSERT_TRUE(fscanf(p, "%d", &entries) == 1);
    pclose(p);
  }
  EXPECT_EQ(entries, 1);
}

TEST(ProbeStore, TrustComesFromTheFileOwner) {
  if (!root()) GTEST_SKIP() << "needs root to create files owned by other users";
  Store s;
  Measurement m = sample();
  s.put(probe::record_name(m, 0), probe::format_record(m), 0);
  m.speedup = 0.5;
  s.put(probe::record_name(m, 1001), probe::format_record(m), 1001);
  m.speedup = 9;
  s.put(probe::record_name(m, 1002), probe::format_record(m), 1002);
  // A file in root's directory but owned by a user is not root's.
  m.speedup = 7;
  s.put(m.fingerprint + ".other.r2n2.u0.rec", probe::format_record(m), 1002, 0);
  probe::StoreReader r;
  probe::ReadReport report;
  auto got = r.lookup(s.dir, m.fingerprint, 1001, {0}, &report);
  ASSERT_EQ(got.size(), 2u);
  int admin = 0, own = 0;
  for (const auto& g : got) {
    if (g.trust == Trust::admin) {
      ++admin;
      EXPECT_DOUBLE_EQ(g.speedup, 1.31);
    } else {
      ++own;
      EXPECT_DOUBLE_EQ(g.speedup, 0.5);
    }
  }
  EXPECT_EQ(admin, 1);
  EXPECT_EQ(own, 1);
  EXPECT_FALSE(report.problems.empty());  // the squatter is reported
  // Another user sees root's record only.
  EXPECT_EQ(r.lookup(s.dir, m.fingerprint, 1003, {0}).size(), 1u);
  // A user squatting on another's directory name (u1004 made by 1002) hides only 1004's own
  // records, and says so; root's record still applies.
  s.sub(1004, 1002);
  m.speedup = 0.4;
  s.put(probe::record_name(m, 1004), probe::format_record(m), 1004, 1004);
  chown(probe::owner_dir(s.dir, 1004).c_str(), 1002, 1002);
  probe::ReadReport squat;
  got = r.lookup(s.dir, m.fingerprint, 1004, {0}, &squat);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].trust, Trust::admin);
  ASSERT_FALSE(squat.problems.empty());
  EXPECT_NE(squat.problems.back().find("not the uid it names"), std::string::npos);
}

// Issue 25, class 8: users' names in the store (65,536 and more) cost a submission nothing and
// hide no admin record: the reader never lists the store itself, only the owners' directories.
TEST(ProbeStore, AFloodedStoreHidesNoAdminRecordAndIsNeverListed) {
  Store s;
  const uid_t me = geteuid();
  Measurement m = sample();
  ASSERT_TRUE(probe::write_record(s.dir, m).ok());
  for (int i = 0; i < 70000; ++i) {  // junk, some of it named like records of this model
    const std::string p = s.dir + "/" + m.fingerprint + ".junk" + std::to_string(i) + ".u0.rec";
    const int fd = open(p.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    close(fd);
  }
  probe::StoreReader r;
  probe::ReadReport report;
  auto got = r.lookup(s.dir, m.fingerprint, me + 1, {me}, &report);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].trust, Trust::admin);
  EXPECT_TRUE(report.problems.empty()) << report.problems[0];
  const long scans = r.scans();
  for (int i = 0; i < 100; ++i) {  // more junk: the owners' directories did not change, no rescan
    const std::string p = s.dir + "/more" + std::to_string(i);
    close(open(p.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
    EXPECT_EQ(r.lookup(s.dir, m.fingerprint, me + 1, {me}).size(), 1u);
  }
  EXPECT_EQ(r.scans(), scans);
}

TEST(ProbeStore, AnOwnersFloodDropsOnlyThatOwnersRecords) {
  if (!root()) GTEST_SKIP() << "needs root to create files owned by other users";
  Store s;
  Measurement m = sample();
  s.put(probe::record_name(m, 0), probe::format_record(m), 0);
  m.speedup = 0.5;
  s.put(probe::record_name(m, 1001), probe::format_record(m), 1001);
  for (std::size_t i = 0; i <= probe::kMaxOwnerEntries; ++i)
    s.put("junk" + std::to_string(i), "", 1001);
  probe::StoreReader r;
  probe::ReadReport report;
  auto got = r.lookup(s.dir, m.fingerprint, 1001, {0}, &report);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].trust, Trust::admin);
  ASSERT_FALSE(report.problems.empty());
  EXPECT_NE(report.problems[0].find("entries"), std::string::npos);
}

TEST(ProbeStore, SymlinksHardLinksFifosAndHugeFilesAreRefused) {
  Store s;
  const uid_t me = geteuid();
  Measurement m = sample();
  const std::string real = s.dir + "/../" + std::string("scaleguard-probe-target-") + std::to_string(getpid());
  std::ofstream(real) << probe::format_record(m);
  const std::string base = s.sub(me) + "/" + m.fingerprint + ".p4d.24xlarge.";
  const std::string tag = ".u" + std::to_string(me) + ".rec";
  ASSERT_EQ(symlink(real.c_str(), (base + "r2n2" + tag).c_str()), 0);
  ASSERT_EQ(link(real.c_str(), (base + "r2n3" + tag).c_str()), 0);
  ASSERT_EQ(mkfifo((base + "r2n4" + tag).c_str(), 0644), 0);
  std::ofstream(base + "r2n5" + tag) << probe::format_record(m) << "# " << std::string(8000, 'x') << "\n";
  std::ofstream(base + "r2n6" + tag) << "format=1\nfingerprint=" << m.fingerprint << "\n";  // partial
  probe::StoreReader r;
  probe::ReadReport report;
  EXPECT_TRUE(r.lookup(s.dir, m.fingerprint, me, {me}, &report).empty());  // no hang on the fifo either
  EXPECT_EQ(report.problems.size(), 5u);
  std::remove(real.c_str());
}

TEST(ProbeStore, AStoreOthersCouldTamperWithIsNotUsed) {
  Store s;
  const uid_t me = geteuid();
  Measurement m = sample();
  ASSERT_TRUE(probe::write_record(s.dir, m).ok());
  probe::StoreReader r;
  EXPECT_EQ(r.lookup(s.dir, m.fingerprint, me, {me}).size(), 1u);
  chmod(s.dir.c_str(), 0777);  // world-writable, no sticky bit: anyone could replace root's record
  probe::ReadReport report;
  EXPECT_TRUE(r.lookup(s.dir, m.fingerprint, me, {me}, &report).empty());
  ASSERT_FALSE(report.problems.empty());
  EXPECT_NE(report.problems[0].find("sticky"), std::string::npos);
  chmod(s.dir.c_str(), 01777);
  EXPECT_TRUE(r.lookup(s.dir, m.fingerprint, me, {me + 1}).empty());  // directory owner not trusted
}

TEST(ProbeStore, AnUnchangedDirectoryCostsOneStat) {
  Store s;
  const uid_t me = geteuid();
  Measurement m = sample();
  ASSERT_TRUE(probe::write_record(s.dir, m).ok());
  probe::StoreReader r;
  EXPECT_EQ(r.lookup(s.dir, m.fingerprint, me, {me}).size(), 1u);
  const long scans = r.scans();
  for (int i = 0; i < 100; ++i) r.lookup(s.dir, m.fingerprint, me, {me});
  EXPECT_EQ(r.scans(), scans);
  usleep(20000);
  m.speedup = 0.9;
  ASSERT_TRUE(probe::write_record(s.dir, m).ok());  // rename changes the directory
  auto got = r.lookup(s.dir, m.fingerprint, me, {me});
  EXPECT_EQ(r.scans(), scans + 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_DOUBLE_EQ(got[0].speedup, 0.9);
}

TEST(ProbeStore, AChurningDirectoryIsRescannedAtMostEightTimesASecond) {
  Store s;
  const uid_t me = geteuid();
  Measurement m = sample();
  probe::StoreReader r;
  const time_t start = std::time(nullptr);
  for (int i = 0; i < 60; ++i) {
    m.speedup = 1 + i * 0.01;
    ASSERT_TRUE(probe::write_record(s.dir, m).ok());
    EXPECT_EQ(r.lookup(s.dir, m.fingerprint, me, {me}).size(), 1u);
  }
  const long seconds = static_cast<long>(std::time(nullptr) - start) + 1;
  EXPECT_LE(r.scans(), probe::kMaxRescansPerSecond * seconds);
}

// --- decide() with measurements ------------------------------------------------------------

namespace {

const Policy& shipped() {
  static auto p = load_policy(source("configs/policy.ini"));
  if (!p) ADD_FAILURE() << p.error().str();
  return *p.value();
}

// The seed's 100M example on 2 nodes: the model alone sees nothing wrong with 16 GPUs.
JobRequest hundred_m() {
  JobRequest j;
  j.gpus_total = 16;
  j.nodes_min = j.nodes_max = 2;
  j.time_limit_min = 3 * 24 * 60;
  j.model = "100M";
  j.tokens = 100e9;
  j.now = kNow;
  return j;
}

Measurement measured(double speedup, double comm, Trust trust) {
  Measurement m = sample(model_fingerprint(parse_model_spec("100M", real_catalog()).value()));
  m.speedup = speedup;
  m.comm_ratio = comm;
  m.trust = trust;
  return m;
}

const RuleHit* hit(const Decision& d, const std::string& id) {
  for (const auto& r : d.rules)
    if (r.id == id) return &r;
  return nullptr;
}

}  // namespace

TEST(DecideMeasured, TheSeedsHundredMExampleIsRewrittenOnTheMeasuredSpeedup) {
  const Decision model_only = decide(hundred_m(), shipped());
  EXPECT_EQ(hit(model_only, "min_doubling_speedup"), nullptr) << model_only.message;
  JobRequest j = hundred_m();
  j.measurements = {measured(1.31, 0.12, Trust::admin)};
  const Decision d = decide(j, shipped());
  EXPECT_EQ(d.action, Action::rewrite) << d.message;
  const RuleHit* h = hit(d, "min_doubling_speedup");
  ASSERT_NE(h, nullptr) << d.message;
  EXPECT_NE(h->detail.find("measured 1.31x on 2 GPUs across 2 nodes on 2026-12-04 (probe job 12)"), std::string::npos)
      << h->detail;
  EXPECT_NE(d.message.find("measured 1.31x"), std::string::npos);
  EXPECT_EQ(d.rewrite.gpus_total.value_or(0), 8);
  EXPECT_EQ(d.rewrite.nodes.value_or(0), 1);
}

TEST(DecideMeasured, MeasuredCommRatioFires) {
  JobRequest j = hundred_m();
  j.measurements = {measured(1.9, 0.6, Trust::admin)};
  const Decision d = decide(j, shipped());
  const RuleHit* h = hit(d, "max_comm_ratio");
  ASSERT_NE(h, nullptr) << d.message;
  EXPECT_NE(h->detail.find("measured comm ratio 0.6 > 0.2"), std::string::npos) << h->detail;
  EXPECT_EQ(d.rewrite.nodes.value_or(0), 1);
}

TEST(DecideMeasured, AdminMeasurementLoosensTheModelsEstimateOwnDoesNot) {
  // A policy so strict that the model itself caps the 16 GPUs.
  TempFile f(policy_text("max_comm_ratio = 0.001 rewrite\ncheckpoint_required_gpu_hours = off"));
  auto p = load_policy(f.path());
  ASSERT_TRUE(p) << p.error().str();
  JobRequest j = hundred_m();
  j.partition = "od";
  const Decision model_only = decide(j, *p.value());
  ASSERT_NE(hit(model_only, "max_comm_ratio"), nullptr) << model_only.message;
  // The user's own (possibly forged) great measurement does not loosen anything.
  j.measurements = {measured(1.99, 0.0, Trust::own)};
  const Decision own = decide(j, *p.value());
  EXPECT_NE(hit(own, "max_comm_ratio"), nullptr) << own.message;
  EXPECT_EQ(own.action, model_only.action);
  // An admin's measurement replaces the estimate.
  j.measurements = {measured(1.99, 0.0, Trust::admin)};
  const Decision admin = decide(j, *p.value());
  EXPECT_EQ(hit(admin, "max_comm_ratio"), nullptr) << admin.message;
  ASSERT_NE(hit(admin, "measured"), nullptr);
  EXPECT_EQ(admin.action, Action::accept) << admin.message;
}

TEST(DecideMeasured, OwnMeasurementTightensTheUsersJob) {
  JobRequest j = hundred_m();
  j.measurements = {measured(1.99, 0.0, Trust::admin), measured(1.1, 0.1, Trust::own)};
  const Decision d = decide(j, shipped());
  const RuleHit* h = hit(d, "min_doubling_speedup");
  ASSERT_NE(h, nullptr) << d.message;
  EXPECT_NE(h->detail.find("your own probe"), std::string::npos);
}

TEST(DecideMeasured, StaleFutureForeignAndOtherLayoutRecordsAreIgnored) {
  JobRequest j = hundred_m();
  Measurement old = measured(1.1, 0.1, Trust::admin);
  old.time = kNow - 31LL * 86400;  // probe_max_age 30d
  Measurement future = measured(1.1, 0.1, Trust::admin);
  future.time = kNow + 10 * 86400;
  Measurement other_gpu = measured(1.1, 0.1, Trust::admin);
  other_gpu.instance = "p3.8xlarge";
  Measurement other_model = measured(1.1, 0.1, Trust::admin);
  other_model.fingerprint = "ffffffffffffffff";
  Measurement in_node = measured(1.1, 0.1, Trust::admin);
  in_node.nodes = 1;  // a 2-GPU probe inside one node says nothing about the network between nodes
  // Issue 37: filed under the partition's instance, but measured on other hardware.
  Measurement on_cpu = measured(1.1, 0.1, Trust::admin);
  on_cpu.device = "cpu", on_cpu.gpu = "cpu";
  Measurement on_v100 = measured(1.1, 0.1, Trust::admin);
  on_v100.gpu = "V100-16GB";
  j.measurements = {old, future, other_gpu, other_model, in_node, on_cpu, on_v100};
  const Decision d = decide(j, shipped());
  EXPECT_EQ(hit(d, "min_doubling_speedup"), nullptr) << d.message;
  EXPECT_EQ(hit(d, "measured"), nullptr);
}

// Issue 37, item 5: a CPU measurement never judges a GPU partition, whoever stored it and
// whatever instance it is filed under; on a partition whose hardware is that CPU host (a
// catalog override's [host NAME]) the same record applies.
TEST(DecideMeasured, ACpuMeasurementNeverJudgesAGpuPartition) {
  JobRequest j = hundred_m();
  Measurement cpu = measured(0.9, 3.0, Trust::admin);
  cpu.device = "cpu";
  cpu.gpu = "A100-40GB";  // even labelled with the partition's GPU name: the device differs
  j.measurements = {cpu};
  Decision d = decide(j, shipped());
  EXPECT_EQ(hit(d, "min_doubling_speedup"), nullptr) << d.message;
  EXPECT_EQ(hit(d, "max_comm_ratio"), nullptr) << d.message;
  EXPECT_EQ(d.message.find("measured"), std::string::npos) << d.message;
  // The same GPU record with the hardware it ran on fires.
  j.measurements[0].device = "cuda";
  d = decide(j, shipped());
  EXPECT_NE(hit(d, "min_doubling_speedup"), nullptr) << d.message;
}

TEST(DecideMeasured, ACpuMeasurementJudgesACpuHostPartition) {
  TempFile ovr("[host devhost]\npeak_gflops = 20\nlink_gb_s = 5\nranks_per_node = 8\nmemory_gib = 64\nefficiency = 1\n");
  Catalog cat = real_catalog();
  ASSERT_TRUE(apply_catalog_override(cat, ovr.path()).ok());
  const GpuType* host = cat.find_gpu("devhost");
  ASSERT_NE(host, nullptr);
  EXPECT_TRUE(host->host);
  EXPECT_STREQ(device_of(*host), "cpu");
  EXPECT_STREQ(device_of(*cat.find_gpu("A100-40GB")), "cuda");
  Measurement m = measured(1.1, 0.1, Trust::admin);
  m.device = "cpu", m.gpu = "devhost";
  EXPECT_TRUE(measurement_matches(m, *host));
  EXPECT_FALSE(measurement_matches(m, *cat.find_gpu("A100-40GB")));
  m.device = "cuda";
  EXPECT_FALSE(measurement_matches(m, *host));
  m.device = "cpu", m.gpu = "otherhost";
  EXPECT_FALSE(measurement_matches(m, *host));
}

TEST(DecideProbeBudget, AProbeJobIsBoundedByTheProbeBudget) {
  TempFile f("probe_max_gpu_hours = 1\nprobe_max_fraction = 0.02\n" + policy_text());
  auto p = load_policy(f.path());
  ASSERT_TRUE(p) << p.error().str();
  JobRequest j;
  j.probe = true;
  j.model = "100M";
  j.tokens = 100e9;
  j.nodes_min = j.nodes_max = 2;
  j.gpus_per_node = 1;
  j.time_limit_min = 10;
  Decision d = decide(j, *p.value());
  EXPECT_EQ(d.action, Action::accept) << d.message;
  ASSERT_NE(hit(d, "probe_budget"), nullptr);
  // 16 GPUs for an hour: far beyond a probe.
  j.gpus_per_node = 8;
  j.time_limit_min = 60;
  d = decide(j, *p.value());
  EXPECT_EQ(d.action, Action::reject);
  EXPECT_NE(d.message.find("allowed for a probe"), std::string::npos) << d.message;
  // A small training job: 2% of it is less than the absolute cap.
  j.gpus_per_node = 1;
  j.time_limit_min = 30;
  j.tokens = 1e9;
  d = decide(j, *p.value());
  EXPECT_EQ(d.action, Action::reject) << d.message;
  EXPECT_NE(d.message.find("probe_max_fraction"), std::string::npos) << d.message;
  // An array of probes counts as a whole (10 x 0.33 GPU-hours > 1).
  j.tokens = 100e9;
  j.time_limit_min = 10;
  j.array_tasks = 10;
  d = decide(j, *p.value());
  EXPECT_EQ(d.action, Action::reject) << d.message;
  EXPECT_NE(d.message.find("10 array elements"), std::string::npos) << d.message;
  j.array_tasks = 0;
  // No intent: nothing bounds the share: refused.
  j.model.clear();
  j.tokens = 0;
  d = decide(j, *p.value());
  EXPECT_NE(d.action, Action::accept);
}

TEST(PolicyProbeKeys, ParseAndCheck) {
  TempFile good("probe_store = /fsx/probes\nprobe_max_age = 7d\nprobe_max_gpu_hours = 3\nprobe_max_fraction = 0.05\n" +
                policy_text());
  auto p = load_policy(good.path());
  ASSERT_TRUE(p) << p.error().str();
  EXPECT_EQ(p.value()->probe_store, "/fsx/probes");
  EXPECT_DOUBLE_EQ(p.value()->probe_max_age_s, 7 * 86400.0);
  EXPECT_DOUBLE_EQ(p.value()->probe_max_gpu_hours, 3);
  EXPECT_DOUBLE_EQ(p.value()->probe_max_fraction, 0.05);
  TempFile rel("probe_store = probes/../x\n" + policy_text());
  EXPECT_FALSE(load_policy(rel.path()).ok());
  TempFile age("probe_max_age = soon\n" + policy_text());
  EXPECT_FALSE(load_policy(age.path()).ok());
}
