// scaleguard report: sacct parsing, aggregation and rendering against hand-computed numbers.
// Fixture tests/unit/data/sacct-mixed.txt is Slurm 22.05 `sacct -a -X -D --parsable2
// --delimiter=$'\x1f'` output
// written by hand; every expected value below is worked out in the comments.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include "scaleguard/decide.h"
#include "scaleguard/policy.h"
#include "scaleguard/report.h"

namespace rp = scaleguard::report;

namespace {

std::string read(const std::string& name) {
  std::ifstream in(std::string(SCALEGUARD_TEST_DATA) + "/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// p4d.24xlarge (8 x A100): $32.77/h on demand, $9.83/h spot (the seed article's prices).
constexpr double kOd = 32.77 / 8, kSpot = 9.83 / 8;

rp::Options window_options() {
  rp::Options o;
  o.since = *rp::parse_time("2026-12-01T00:00:00");
  o.until = *rp::parse_time("2026-12-03T00:00:00");
  o.prices["gpu-od"] = {"p4d.24xlarge", false, kOd};
  o.prices["gpu-spot"] = {"p4d.24xlarge", true, kSpot};
  return o;
}

rp::Report mixed_report() {
  auto runs = rp::parse_sacct(read("sacct-mixed.txt"), "sacct-mixed.txt");
  EXPECT_TRUE(runs.ok()) << runs.error().str();
  return rp::build_report(*runs, window_options());
}

const rp::JobSummary* job(const rp::Report& r, const std::string& id) {
  for (const auto& j : r.jobs)
    if (j.job_id == id) return &j;
  return nullptr;
}

bool has_flag(const rp::JobSummary& j, const std::string& prefix) {
  for (const auto& f : j.flags)
    if (f.rfind(prefix, 0) == 0) return true;
  return false;
}

constexpr double kEps = 1e-6;

}  // namespace

TEST(ReportTime, ParsesAndFormatsCivilTimes) {
  EXPECT_EQ(*rp::parse_time("1970-01-02"), 86400);
  EXPECT_EQ(*rp::parse_time("2026-12-01T01:02:03") - *rp::parse_time("2026-12-01"), 3723);
  EXPECT_EQ(*rp::parse_time("2024-03-01") - *rp::parse_time("2024-02-28"), 2 * 86400);  // leap
  EXPECT_EQ(rp::format_time(*rp::parse_time("2026-12-31T23:59:59")), "2026-12-31T23:59:59");
  EXPECT_EQ(rp::format_day(*rp::parse_time("2026-02-01T10:00")), "2026-02-01");
  for (const char* bad : {"", "2026-13-01", "2026-02-29", "2026-12-01T24:00:00", "12/01/2026",
                          "2026-12-01T10", "2026-12-01T10:00:00Z", "Unknown"})
    EXPECT_FALSE(rp::parse_time(bad).ok()) << bad;
}

TEST(ReportSacct, ParsesEveryKindOfRecord) {
  auto runs = rp::parse_sacct(read("sacct-mixed.txt"), "sacct-mixed.txt");
  ASSERT_TRUE(runs.ok()) << runs.error().str();
  ASSERT_EQ(runs->size(), 15u);  // 16 records, the 101.batch step skipped
  const auto& failed = (*runs)[2];
  EXPECT_EQ(failed.job_id, "102");
  EXPECT_EQ(failed.state, "FAILED");
  EXPECT_EQ(failed.gpus, 2);  // gres/gpu=2, not doubled by gres/gpu:a100=2
  EXPECT_EQ(failed.exit_code, "1:0");
  EXPECT_EQ(failed.line, 5);
  EXPECT_EQ((*runs)[6].state, "CANCELLED");  // "CANCELLED by 1001"
  EXPECT_EQ((*runs)[8].nodes, 2);
  EXPECT_EQ((*runs)[8].node_list, "gpu-st-p4d-[1-2]");
  // The AdminComment's '|' is text: the fixture's delimiter is 0x1f.
  EXPECT_EQ((*runs)[10].admin_comment,
            "ops: nightly | scaleguard: warn: single gpus=1 nodes=1 tp=1 pp=1 dp=1 11h $11");
  const auto& running = (*runs)[13];
  EXPECT_EQ(running.state, "RUNNING");
  EXPECT_EQ(running.end, -1);
  const auto& pending = (*runs)[14];
  EXPECT_EQ(pending.start, -1);
  EXPECT_EQ(pending.gpus, 0);
  EXPECT_EQ(pending.gpus_requested, 8);
  EXPECT_EQ((*runs)[3].gpus, 0);  // CPU-only job
}

TEST(ReportSacct, ColumnsAreFoundByName) {
  const std::string text =
      "State|ElapsedRaw|AllocTRES|Partition|User|End|Start|JobID\n"
      "COMPLETED|60|gres/gpu:h100=3,cpu=1|p|u|2026-12-01T00:01:00|2026-12-01T00:00:00|7\n";
  auto runs = rp::parse_sacct(text, "t");
  ASSERT_TRUE(runs.ok()) << runs.error().str();
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ((*runs)[0].gpus, 3);  // typed entries summed when no untyped one exists
  EXPECT_EQ((*runs)[0].elapsed_s, 60);
}

// Issue 36 class 9: shard and mps jobs report the GPUs the policy counts them as
// (shared_gpu_gres; shard:1, mps:100 by default), as at submission and in the budget ledger;
// with shared_gpu_gres = off they are not GPUs. Lines as sacct prints them when
// AccountingStorageTRES tracks gres/shard and gres/mps.
TEST(ReportSacct, SharedGpusCountByThePolicysDefinition) {
  const std::string text =
      "JobID|User|Partition|State|Start|End|ElapsedRaw|AllocTRES|ReqTRES\n"
      "8|u|p|COMPLETED|2026-12-01T00:00:00|2026-12-01T01:00:00|3600|billing=1,cpu=1,gres/shard=2,mem=1M,node=1|"
      "billing=1,cpu=1,gres/shard=2,mem=1M,node=1\n"
      "9|u|p|COMPLETED|2026-12-01T00:00:00|2026-12-01T01:00:00|3600|cpu=1,gres/mps=250,gres/mps:a100=250,node=1|\n";
  auto runs = rp::parse_sacct(text, "t");
  ASSERT_TRUE(runs.ok()) << runs.error().str();
  EXPECT_EQ((*runs)[0].gpus, 2);
  EXPECT_EQ((*runs)[0].gpus_requested, 2);
  EXPECT_EQ((*runs)[1].gpus, 3);   // 250% of a GPU, rounded up as at submission
  const rp::Report r = rp::build_report(*runs, rp::Options{});
  EXPECT_DOUBLE_EQ(r.total.gpu_hours, 5);
  auto off = rp::parse_sacct(text, "t", nullptr, scaleguard::SharedGpuGres{});
  ASSERT_TRUE(off.ok());
  EXPECT_EQ((*off)[0].gpus, 0);
}

// Slurm 22.05 stamps Start = End on a job cancelled while pending (seen with --state=RUNNING
// after `scontrol requeue` + `scancel`): no allocation and no elapsed time mean it never ran.
TEST(ReportSacct, CancelledWhilePendingWithAStartTimeNeverStarted) {
  const std::string text =
      "JobID|User|Partition|State|Start|End|ElapsedRaw|AllocTRES\n"
      "31|u|p|REQUEUED|2026-12-03T11:58:38|2026-12-03T11:58:40|2|billing=1,cpu=1,gres/gpu=1,node=1\n"
      "31|u|p|CANCELLED by 0|2026-12-03T11:58:42|2026-12-03T11:58:42|0|\n"
      "32|u|p|COMPLETED|2026-12-03T11:58:42|2026-12-03T11:58:42|0|billing=1,cpu=1,gres/gpu=1,node=1\n";
  auto runs = rp::parse_sacct(text, "t");
  ASSERT_TRUE(runs.ok()) << runs.error().str();
  EXPECT_EQ((*runs)[1].start, -1);
  EXPECT_GE((*runs)[2].start, 0);  // allocated, ran for less than a second
  const rp::Report r = rp::build_report(*runs, rp::Options{});
  EXPECT_EQ(r.total.runs, 2);
  ASSERT_NE(job(r, "31"), nullptr);
  EXPECT_EQ(job(r, "31")->runs, 1);
  EXPECT_EQ(job(r, "31")->state, "CANCELLED");
}

// A job name may hold the delimiter (Slurm 22.05 accepts '|' and 0x1f in --job-name, and sacct
// prints them raw). `scaleguard report` no longer asks for JobName, but a saved file may have
// it. Job 9 of user "eve" is named so as to forge a record of user "alice" on 64 GPUs with a
// checkpointed plan in AdminComment: the record is skipped and counted, in either delimiter,
// never rejoined into the last (AdminComment) column, and the other records are still read.
TEST(ReportSacct, AJobNameHoldingTheDelimiterCannotForgeARecord) {
  for (const char d : {'|', '\x1f'}) {
    const std::string D(1, d);
    const std::string header = "JobID" + D + "JobName" + D + "User" + D + "Partition" + D +
                               "State" + D + "Start" + D + "End" + D + "ElapsedRaw" + D +
                               "AllocTRES" + D + "AdminComment\n";
    const std::string forged_name = "x" + D + "alice" + D + "gpu-spot" + D + "COMPLETED" + D +
                                    "2026-12-01T00:00:00" + D + "2026-12-01T01:00:00" + D +
                                    "3600" + D + "gres/gpu=64" + D +
                                    "scaleguard: accept: ddp gpus=64 ckpt=60s";
    const std::string real_tail = D + "eve" + D + "gpu-od" + D + "COMPLETED" + D +
                                  "2026-12-01T00:00:00" + D + "2026-12-01T01:00:00" + D + "3600" +
                                  D + "gres/gpu=1" + D + "\n";
    const std::string ok = "8" + D + "fine" + real_tail;
    rp::SacctSkips skips;
    auto runs = rp::parse_sacct(header + ok + "9" + D + forged_name + real_tail + ok, "t", &skips);
    ASSERT_TRUE(runs.ok()) << runs.error().str();
    ASSERT_EQ(runs->size(), 2u) << "delimiter " << int(d);
    for (const auto& r : *runs) EXPECT_EQ(r.user, "eve");
    EXPECT_EQ(skips.count, 1);
    EXPECT_EQ(skips.first_lines, std::vector<std::string>{"3"});
    EXPECT_NE(skips.first_reason.find("has 18 fields, header has 10"), std::string::npos)
        << skips.first_reason;
    EXPECT_EQ(skips.user_text_column, "JobName");
    EXPECT_EQ(skips.message().rfind("skipped 1 malformed sacct record (first at lines 3; ", 0), 0u)
        << skips.message();
    // The same file without the forged record skips nothing, in either delimiter.
    runs = rp::parse_sacct(header + ok, "t", &skips);
    ASSERT_TRUE(runs.ok()) << runs.error().str();
    ASSERT_EQ(runs->size(), 1u);
    EXPECT_EQ(skips.count, 0);
    EXPECT_EQ(skips.message(), "");
  }
  // In a 0x1f file a '|' in a job name or in AdminComment is plain text.
  std::string text =
      "JobID^JobName^User^Partition^State^Start^End^ElapsedRaw^AllocTRES^AdminComment\n"
      "9^a|alice|b^eve^gpu-od^COMPLETED^2026-12-01T00:00:00^2026-12-01T01:00:00^3600^gres/gpu=1^"
      "ops | scaleguard: accept: single gpus=1\n";
  std::replace(text.begin(), text.end(), '^', '\x1f');
  auto runs = rp::parse_sacct(text, "t");
  ASSERT_TRUE(runs.ok()) << runs.error().str();
  EXPECT_EQ((*runs)[0].user, "eve");
  EXPECT_EQ((*runs)[0].admin_comment, "ops | scaleguard: accept: single gpus=1");
  // A '|' file with a JobName column: a '|' in the last AdminComment is no longer joined back
  // (it cannot be told from one in the name): the record is skipped.
  rp::SacctSkips skips;
  runs = rp::parse_sacct("JobID|JobName|User|Partition|State|Start|End|ElapsedRaw|"
                         "AllocTRES|AdminComment\n"
                         "9|n|eve|gpu-od|COMPLETED|2026-12-01T00:00:00|2026-12-01T01:00:00|"
                         "3600|gres/gpu=1|ops | scaleguard: accept\n",
                         "t", &skips);
  ASSERT_TRUE(runs.ok()) << runs.error().str();
  EXPECT_TRUE(runs->empty());
  EXPECT_EQ(skips.count, 1);
}

// Slurm 22.05 also lets a job name hold newlines. In a saved file with a JobName column, eve's
// job 9 is named "x\n<a whole record of alice's, 64 GPUs>\ny": the forged line has the right
// field count, but it lies between the head ("9|x", too few fields) and the tail of eve's
// record. Head to tail is skipped as one record; jobs 8 and 11 around it are read.
TEST(ReportSacct, AMultiLineJobNameForgesNoRecord) {
  for (const char d : {'|', '\x1f'}) {
    const std::string D(1, d);
    const std::string header = "JobID" + D + "JobName" + D + "User" + D + "Partition" + D +
                               "State" + D + "Start" + D + "End" + D + "ElapsedRaw" + D +
                               "AllocTRES" + D + "AdminComment\n";
    const std::string times = "2026-12-01T00:00:00" + D + "2026-12-01T01:00:00" + D + "3600";
    const std::string forged = "10" + D + "n" + D + "alice" + D + "gpu-spot" + D + "COMPLETED" +
                               D + times + D + "gres/gpu=64" + D +
                               "scaleguard: accept: ddp gpus=64 ckpt=60s";
    const std::string tail = D + "eve" + D + "gpu-od" + D + "COMPLETED" + D + times + D +
                             "gres/gpu=1" + D + "\n";
    const std::string text = header + "8" + D + "a" + tail +       // line 2
                             "9" + D + "x\n" + forged + "\ny" + tail +  // lines 3-5
                             "11" + D + "b" + tail;                 // line 6
    rp::SacctSkips skips;
    auto runs = rp::parse_sacct(text, "saved.txt", &skips);
    ASSERT_TRUE(runs.ok()) << runs.error().str();
    ASSERT_EQ(runs->size(), 2u) << "delimiter " << int(d);
    EXPECT_EQ((*runs)[0].job_id, "8");
    EXPECT_EQ((*runs)[1].job_id, "11");
    for (const auto& r : *runs) {
      EXPECT_EQ(r.user, "eve");
      EXPECT_EQ(r.gpus, 1);
    }
    EXPECT_EQ(skips.count, 1);
    EXPECT_EQ(skips.first_lines, std::vector<std::string>{"3-5"});
    EXPECT_NE(skips.first_reason.find("line 3: has 2 fields, header has 10"), std::string::npos)
        << skips.first_reason;
    const rp::Report r = rp::build_report(*runs, rp::Options{});
    EXPECT_EQ(r.by_user.count("alice"), 0u);
    EXPECT_NEAR(r.total.gpu_hours, 2, kEps);
  }
  // A name with newlines and no delimiter ("a\nb\nc"): head, middle and tail, one record.
  const std::string header = "JobID|JobName|User|Partition|State|Start|End|ElapsedRaw|AllocTRES\n";
  const std::string rest = "|u|p|COMPLETED|2026-12-01T00:00:00|2026-12-01T01:00:00|3600|gres/gpu=1\n";
  rp::SacctSkips skips;
  auto runs = rp::parse_sacct(header + "1|a\nb\nc" + rest + "2|d" + rest, "t", &skips);
  ASSERT_TRUE(runs.ok()) << runs.error().str();
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ((*runs)[0].job_id, "2");
  EXPECT_EQ(skips.count, 1);
  EXPECT_EQ(skips.first_lines, std::vector<std::string>{"2-4"});
}

// A line with the wrong field count (here cut short, line 3) is skipped and counted; the
// records around it are read.
TEST(ReportSacct, AWrongFieldCountLineIsSkippedAndCounted) {
  rp::SacctSkips skips;
  auto runs = rp::parse_sacct(read("sacct-malformed.txt"), "sacct-malformed.txt", &skips);
  ASSERT_TRUE(runs.ok()) << runs.error().str();
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ((*runs)[0].job_id, "201");
  EXPECT_EQ((*runs)[1].job_id, "203");
  EXPECT_EQ(skips.count, 1);
  EXPECT_EQ(skips.first_lines, std::vector<std::string>{"3"});
  EXPECT_NE(skips.message().find("skipped 1 malformed sacct record (first at lines 3; line 3: "
                                 "has 7 fields, header has 15"),
            std::string::npos)
      << skips.message();
}

// A bad value skips its record (the reason names the field); a bad header is an error.
TEST(ReportSacct, BadValuesSkipTheRecordWithAClearReason) {
  const std::string header = "JobID|User|Partition|State|Start|End|ElapsedRaw|AllocTRES\n";
  struct Case { const char* line; const char* field; const char* says; };
  const Case cases[] = {
      {"1|u|p|COMPLETED|2026-12-01T00:00:00|2026-12-01T01:00:00|01:00:00|gres/gpu=1", "ElapsedRaw",
       "not a number of seconds"},
      {"1|u|p|COMPLETED|yesterday|2026-12-01T01:00:00|3600|gres/gpu=1", "Start", "not a time"},
      {"1|u|p|COMPLETED|2026-12-01T00:00:00|2026-12-01T01:00:00|3600|gres/gpu=lots", "AllocTRES",
       "not a whole number"},
      {"1|u|p|COMPLETED|2026-12-01T00:00:00|2026-12-01T01:00:00|3600|gres/gpu", "AllocTRES",
       "not NAME=COUNT"},
      {"1|u|p|COMPLETED|2026-12-01T00:00:00|2026-12-01T01:00:00|3600|gres/gpu=99999999999",
       "AllocTRES", "whole number up to"},
      {"1|u|p|COMPLETED|Unknown|Unknown|3600|gres/gpu=1", "Start", "unknown but the job ran"},
      {"|u|p|COMPLETED|Unknown|Unknown|0|", "JobID", "is empty"},
      {"1|u|p||Unknown|Unknown|0|", "State", "is empty"},
      {"1|u|p|COMPLETED|Unknown|Unknown|0||extra", "", "has 9 fields, header has 8"},
  };
  const std::string good =
      "2|u|p|COMPLETED|2026-12-01T00:00:00|2026-12-01T01:00:00|3600|gres/gpu=1\n";
  for (const auto& c : cases) {
    rp::SacctSkips skips;
    auto runs = rp::parse_sacct(header + c.line + "\n" + good, "x.txt", &skips);
    ASSERT_TRUE(runs.ok()) << c.line << ": " << runs.error().str();
    ASSERT_EQ(runs->size(), 1u) << c.line;
    EXPECT_EQ((*runs)[0].job_id, "2");
    EXPECT_EQ(skips.count, 1) << c.line;
    const std::string at = std::string("line 2: ") + (*c.field ? std::string(c.field) + ": " : "");
    EXPECT_EQ(skips.first_reason.rfind(at, 0), 0u) << skips.first_reason;
    EXPECT_NE(skips.first_reason.find(c.says), std::string::npos) << skips.first_reason;
  }
  auto no_elapsed = rp::parse_sacct("JobID|User|Partition|State|Start|End|Elapsed|AllocTRES\n", "y");
  ASSERT_FALSE(no_elapsed.ok());
  EXPECT_EQ(no_elapsed.error().field, "ElapsedRaw");
  EXPECT_FALSE(rp::parse_sacct("", "empty").ok());
  EXPECT_FALSE(rp::parse_sacct("<html>not sacct</html>\n", "page").ok());
}

// The plan note is read from AdminComment only: a user's own --comment="scaleguard: ..." must
// not make a job look checkpointed (less waste), planned (no small_distributed flag) or
// efficient. Job 1: 8 GPUs, REQUEUED for 1 h, a forged "ckpt=60s gpus=8" in Comment.
TEST(ReportSacct, AForgedPlanInTheUserCommentIsNotRead) {
  const std::string header =
      "JobID|User|Partition|State|Start|End|ElapsedRaw|AllocTRES|Comment|AdminComment\n";
  const std::string forged = "scaleguard: accept: ddp gpus=8 nodes=1 comm=0.01 ckpt=60s";
  auto runs = rp::parse_sacct(
      header + "1|u|p|REQUEUED|2026-12-01T00:00:00|2026-12-01T01:00:00|3600|gres/gpu=8|" + forged +
          "|\n",
      "t");
  ASSERT_TRUE(runs.ok()) << runs.error().str();
  EXPECT_EQ((*runs)[0].admin_comment, "");
  rp::Report r = rp::build_report(*runs, rp::Options{});
  // Not read: no checkpoint known, so the whole run (8 GPU-h) is waste, not 8 x 30 s.
  EXPECT_NEAR(r.total.wasted_gpu_hours, 8, kEps);
  ASSERT_NE(job(r, "1"), nullptr);

  // The same note in AdminComment (written by job_submit/scaleguard) is read.
  runs = rp::parse_sacct(header + "1|u|p|REQUEUED|2026-12-01T00:00:00|2026-12-01T01:00:00|3600|"
                                  "gres/gpu=8|my note|" + forged + " [sg=sg-1-1]\n",
                         "t");
  ASSERT_TRUE(runs.ok()) << runs.error().str();
  r = rp::build_report(*runs, rp::Options{});
  EXPECT_NEAR(r.total.wasted_gpu_hours, 8 * 30 / 3600.0, kEps);

  // A '|' in a Comment column that is not last cannot be told from a field separator: the
  // line is an error rather than the user's text shifted into AdminComment.
  rp::SacctSkips skips;
  auto shifted = rp::parse_sacct(
      header + "1|u|p|REQUEUED|2026-12-01T00:00:00|2026-12-01T01:00:00|3600|gres/gpu=8|x|" +
          forged + "|\n",
      "t", &skips);
  ASSERT_TRUE(shifted.ok()) << shifted.error().str();
  EXPECT_TRUE(shifted->empty());
  EXPECT_NE(skips.first_reason.find("has 11 fields, header has 10"), std::string::npos)
      << skips.first_reason;

  // A saved file of the old format (Comment, no AdminComment) parses; its notes are ignored.
  auto old = rp::parse_sacct(
      "JobID|User|Partition|State|Start|End|ElapsedRaw|AllocTRES|Comment\n"
      "1|u|p|REQUEUED|2026-12-01T00:00:00|2026-12-01T01:00:00|3600|gres/gpu=8|a | " + forged + "\n",
      "t");
  ASSERT_TRUE(old.ok()) << old.error().str();
  EXPECT_EQ((*old)[0].admin_comment, "");
  EXPECT_NEAR(rp::build_report(*old, rp::Options{}).total.wasted_gpu_hours, 8, kEps);
}

TEST(ReportSacct, AsksSacctForAdminCommentLast) {
  const std::string format = rp::kSacctFormat;
  const std::string tail = ",AdminComment";
  ASSERT_GE(format.size(), tail.size());
  EXPECT_EQ(format.substr(format.size() - tail.size()), tail);
  EXPECT_EQ(("," + format + ",").find(",Comment,"), std::string::npos);
}

TEST(ReportPlanNote, ReadsTheJobSubmitSummary) {
  auto n = rp::parse_plan_note("scaleguard: accept strategy=ddp gpus=8 nodes=1 comm=0.08 ckpt=1800s");
  EXPECT_TRUE(n.present);
  EXPECT_EQ(n.action, "accept");
  EXPECT_EQ(n.strategy, "ddp");
  EXPECT_EQ(n.gpus, 8);
  EXPECT_DOUBLE_EQ(n.comm_ratio, 0.08);
  EXPECT_EQ(n.ckpt_interval_s, 1800);
  // The form decide() writes today.
  auto d = rp::parse_plan_note("scaleguard: warn: zero gpus=4 nodes=1 tp=1 pp=1 dp=4 11h $48");
  EXPECT_EQ(d.action, "warn");
  EXPECT_EQ(d.strategy, "zero");
  EXPECT_EQ(d.gpus, 4);
  EXPECT_EQ(d.ckpt_interval_s, 0);
  auto r = rp::parse_plan_note(
      "scaleguard: warn [distributed_min_gpu_hours,max_comm_ratio]: use single gpus=1 nodes=1 "
      "tp=1 pp=1 dp=1 zero=0 11h ~$11 spot");
  EXPECT_EQ(r.action, "warn");
  EXPECT_EQ(r.strategy, "single");
  EXPECT_EQ(r.gpus, 1);
  EXPECT_EQ(rp::parse_plan_note("x; scaleguard: comm=35%, ckpt=20m").ckpt_interval_s, 1200);
  EXPECT_DOUBLE_EQ(rp::parse_plan_note("scaleguard: comm=35%").comm_ratio, 0.35);
  EXPECT_EQ(rp::parse_plan_note("scaleguard: ckpt_interval_min=15").ckpt_interval_s, 900);
  EXPECT_FALSE(rp::parse_plan_note("my own comment").present);
  // What job_submit/scaleguard writes into AdminComment: the summary and the decision id,
  // maybe after an admin's own text; the last annotation wins (a later decision on update).
  auto a = rp::parse_plan_note(
      "hold for review | scaleguard: warn [max_comm_ratio]: ddp gpus=8 nodes=1 tp=1 pp=1 dp=8 "
      "zero=0 1.5h ~$48 on-demand comm=0.31 ckpt=1800s [sg=sg-1733248200-42]");
  EXPECT_TRUE(a.present);
  EXPECT_EQ(a.action, "warn");
  EXPECT_EQ(a.strategy, "ddp");
  EXPECT_EQ(a.gpus, 8);
  EXPECT_DOUBLE_EQ(a.comm_ratio, 0.31);
  EXPECT_EQ(a.ckpt_interval_s, 1800);
  EXPECT_EQ(a.decision_id, "sg-1733248200-42");
  auto later = rp::parse_plan_note(
      "scaleguard: accept: ddp gpus=8 nodes=1 ckpt=600s [sg=sg-1-1] | "
      "scaleguard: rewrite: zero gpus=4 nodes=1 ckpt=900s [sg=sg-2-7]");
  EXPECT_EQ(later.action, "rewrite");
  EXPECT_EQ(later.gpus, 4);
  EXPECT_EQ(later.ckpt_interval_s, 900);
  EXPECT_EQ(later.decision_id, "sg-2-7");
  EXPECT_EQ(rp::parse_plan_note("scaleguard: accept: ddp gpus=8 [sg=]").decision_id, "");
  // job_submit's record of the request follows the id inside the brackets; its items (gj=,
  // t=, p=, m=, st=, ...) are not plan tokens and change nothing.
  auto rec = rp::parse_plan_note(
      "scaleguard: accept: hybrid gpus=16 nodes=2 tp=8 pp=1 dp=2 zero=0 1.5h ~$98 on-demand "
      "comm=0.15 ckpt=1200s [sg=sg-1733248200-42;gj=16;gn=8;n0=2;n1=2;t=10080;p=gpu-od;"
      "m=llama2-7b;tok=3e%2B11;sgh=0;dl=0;st=hybrid]");
  EXPECT_EQ(rec.decision_id, "sg-1733248200-42");
  EXPECT_EQ(rec.strategy, "hybrid");
  EXPECT_EQ(rec.gpus, 16);
  EXPECT_DOUBLE_EQ(rec.comm_ratio, 0.15);
  EXPECT_EQ(rec.ckpt_interval_s, 1200);
  // Garbage values are ignored, not trusted.
  auto g = rp::parse_plan_note("scaleguard: gpus=-3 comm=abc ckpt=soon ckpt=1e99");
  EXPECT_EQ(g.gpus, 0);
  EXPECT_LT(g.comm_ratio, 0);
  EXPECT_EQ(g.ckpt_interval_s, 0);
}

TEST(ReportBuild, TotalsMatchHandComputedNumbers) {
  const rp::Report r = mixed_report();
  // GPU-hours in the window (job 100 ran on 11-30: outside):
  //   101: 8 GPU x 2 h = 16          102: 2 x 0.5 = 1         103: 8 x 1 + 8 x 1 = 16
  //   104: 1 x 0.25 = 0.25           105: 4 x 4 = 16          106: no GPU = 0
  //   107: 16 x 0.5 + 16 x 1 = 24    108: 1 x 1 (2 h running, 1 h before --until) = 1
  //   109: 8 x 1 = 8                 110: pending, not counted  111_1, 111_2: 1 x 0.5 each = 1
  EXPECT_NEAR(r.total.gpu_hours, 83.25, kEps);
  // Waste: 102 FAILED whole = 1; 103 REQUEUED with ckpt 600 s: 8 GPU x 300 s = 0.6667;
  //        105 TIMEOUT without checkpoints: whole 16; 107 NODE_FAIL with ckpt 20 min:
  //        16 GPU x 600 s = 2.6667; 104 CANCELLED: none.
  EXPECT_NEAR(r.total.wasted_gpu_hours, 1 + 8 * 300 / 3600.0 + 16 + 16 * 600 / 3600.0, kEps);
  EXPECT_EQ(r.total.jobs, 11);  // 101..109 and two array tasks (110 never started)
  EXPECT_EQ(r.total.runs, 13);  // + the second runs of 103 and 107
  // Cost: on-demand 16 + 1 + 0.25 + 24 + 1 + 8 = 50.25 GPU-h, spot 16 + 16 + 1 = 33 GPU-h.
  EXPECT_NEAR(r.by_partition.at("gpu-od").gpu_hours, 50.25, kEps);
  EXPECT_NEAR(r.by_partition.at("gpu-spot").gpu_hours, 33, kEps);
  EXPECT_NEAR(r.total.cost_usd, 50.25 * kOd + 33 * kSpot, 1e-6);
  EXPECT_NEAR(r.total.cost_usd, 246.3853125, 1e-6);
  EXPECT_NEAR(r.total.wasted_usd, (1 + 16 * 600 / 3600.0) * kOd + (8 * 300 / 3600.0 + 16) * kSpot,
              1e-6);
  EXPECT_TRUE(r.notes.empty());
  EXPECT_EQ(rp::format_time(r.since), "2026-12-01T00:00:00");
  EXPECT_EQ(rp::format_time(r.until), "2026-12-03T00:00:00");
}

TEST(ReportBuild, GroupsByUserAccountStateAndDay) {
  const rp::Report r = mixed_report();
  EXPECT_NEAR(r.by_user.at("alice").gpu_hours, 16 + 16 + 24, kEps);
  EXPECT_EQ(r.by_user.at("alice").jobs, 3);
  EXPECT_EQ(r.by_user.at("alice").runs, 5);
  EXPECT_NEAR(r.by_user.at("bob").gpu_hours, 17, kEps);
  EXPECT_NEAR(r.by_user.at("bob").wasted_gpu_hours, 17, kEps);
  EXPECT_NEAR(r.by_account.at("nlp").gpu_hours, 1 + 0.25 + 16, kEps);
  EXPECT_NEAR(r.by_account.at("ops").gpu_hours, 0, kEps);
  EXPECT_NEAR(r.by_state.at("TIMEOUT").wasted_gpu_hours, 16, kEps);
  EXPECT_NEAR(r.by_state.at("CANCELLED").gpu_hours, 0.25, kEps);
  EXPECT_NEAR(r.by_state.at("CANCELLED").wasted_gpu_hours, 0, kEps);
  // Job 105 (4 GPUs, 22:00 -> 02:00) is split at midnight: 8 GPU-h on each day.
  const auto d1 = *rp::parse_time("2026-12-01"), d2 = *rp::parse_time("2026-12-02");
  ASSERT_EQ(r.by_day.size(), 2u);
  EXPECT_NEAR(r.by_day.at(d1).gpu_hours, 16 + 1 + 16 + 0.25 + 8, kEps);
  EXPECT_NEAR(r.by_day.at(d2).gpu_hours, 8 + 24 + 1 + 8 + 1, kEps);
  EXPECT_NEAR(r.by_day.at(d1).wasted_gpu_hours, 1 + 8 * 300 / 3600.0 + 8, kEps);
  EXPECT_EQ(r.by_day.at(d2).jobs, 6);  // 105, 107, 108, 109, 111_1, 111_2
}

TEST(ReportBuild, FlagsInefficientJobs) {
  const rp::Report r = mixed_report();
  ASSERT_NE(job(r, "109"), nullptr);
  // No gres/gpuutil in this sacct output: the plan's estimate, labelled so.
  EXPECT_TRUE(has_flag(*job(r, "109"), "low_gpu_efficiency (plan estimate, no GPU utilisation in accounting): "
                                       "8 GPUs allocated, plan uses 1"));
  EXPECT_TRUE(has_flag(*job(r, "102"), "comm_heavy: plan communicates 35%"));
  EXPECT_TRUE(has_flag(*job(r, "105"), "small_distributed"));
  EXPECT_TRUE(has_flag(*job(r, "105"), "spot_without_checkpoint"));
  EXPECT_TRUE(job(r, "101")->flags.empty());
  EXPECT_TRUE(job(r, "103")->flags.empty());  // spot, but checkpoints every 10 minutes
  EXPECT_TRUE(job(r, "107")->flags.empty());
  EXPECT_EQ(job(r, "103")->runs, 2);
  EXPECT_EQ(job(r, "103")->state, "COMPLETED");
  EXPECT_EQ(job(r, "107")->state, "COMPLETED");
  EXPECT_EQ(job(r, "100"), nullptr);  // ran before the window
  EXPECT_EQ(job(r, "110"), nullptr);  // never started
}

// Captured from real Slurm 22.05.8 with slurmdbd + MariaDB (scripts/dev-cluster/accounting):
// jobs that completed, failed (exit 3), were cancelled running and pending, requeued (then
// cancelled while waiting) and timed out.
TEST(ReportBuild, RealSacctOutputOfSlurm2205) {
  auto runs = rp::parse_sacct(read("sacct-live-22.05.txt"), "sacct-live-22.05.txt");
  ASSERT_TRUE(runs.ok()) << runs.error().str();
  ASSERT_EQ(runs->size(), 7u);
  EXPECT_EQ((*runs)[3].start, -1);  // "None": cancelled while pending
  rp::Options o;
  o.prices["gpu-od"] = {"p4d.24xlarge", false, kOd};
  const rp::Report r = rp::build_report(*runs, o);
  // GPUs x ElapsedRaw: 1x3 + 2x2 + 1x3 + 2x3 (the requeued run) + 1x88 = 104 GPU-seconds.
  EXPECT_NEAR(r.total.gpu_hours, 104 / 3600.0, kEps);
  // Waste: FAILED 2x2; REQUEUED with ckpt=20s: min(3, 10) x 2; TIMEOUT without checkpoints 88.
  EXPECT_NEAR(r.total.wasted_gpu_hours, (4 + 6 + 88) / 3600.0, kEps);
  EXPECT_EQ(r.total.jobs, 5);  // job 4 never started
  EXPECT_EQ(r.total.runs, 5);
  ASSERT_NE(job(r, "5"), nullptr);
  EXPECT_EQ(job(r, "5")->state, "CANCELLED");  // its last record, though it never restarted
  EXPECT_EQ(job(r, "5")->runs, 1);
  EXPECT_EQ(job(r, "4"), nullptr);
  EXPECT_EQ(rp::format_time(r.since), "2026-12-02T18:25:04");
  EXPECT_EQ(rp::format_time(r.until), "2026-12-02T18:28:57");
}

TEST(ReportBuild, OpenWindowUsesTheDataSpanAndUnpricedPartitionsAreNoted) {
  auto runs = rp::parse_sacct(read("sacct-mixed.txt"), "sacct-mixed.txt");
  ASSERT_TRUE(runs.ok());
  rp::Options o;  // no window, no prices
  const rp::Report r = rp::build_report(*runs, o);
  EXPECT_NEAR(r.total.gpu_hours, 83.25 + 8 + 1, kEps);  // + job 100 and 108's second hour
  EXPECT_EQ(rp::format_time(r.since), "2026-11-30T10:00:00");
  EXPECT_EQ(rp::format_time(r.until), "2026-12-03T01:00:00");
  EXPECT_EQ(r.total.cost_usd, 0);
  ASSERT_EQ(r.notes.size(), 2u);
  EXPECT_NE(r.notes[0].find("'gpu-od' has no price"), std::string::npos);
}

TEST(ReportBuild, EmptyWindowHasNoRuns) {
  auto runs = rp::parse_sacct(read("sacct-mixed.txt"), "sacct-mixed.txt");
  rp::Options o = window_options();
  o.since = *rp::parse_time("2027-01-01");
  o.until = *rp::parse_time("2027-01-02");
  EXPECT_EQ(rp::build_report(*runs, o).total.runs, 0);
}

TEST(ReportRender, TextCsvAndHtmlCarryTheNumbers) {
  const rp::Report r = mixed_report();
  const std::string text = rp::render_text(r);
  EXPECT_NE(text.find("11 jobs, 13 runs, 83.25 GPU-hours, 20.33 wasted (24.4%), cost $246.39"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("! low_gpu_efficiency"), std::string::npos);

  const std::string csv = rp::render_csv(r);
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "by,key,user,account,partition,state,jobs,runs,gpus,gpu_hours,wasted_gpu_hours,"
            "cost_usd,wasted_usd,flags");
  EXPECT_NE(csv.find("\npartition,gpu-spot,,,,,4,5,,33.0000,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\njob,105,bob,nlp,gpu-spot,TIMEOUT,1,1,4,16.0000,16.0000,19.66,19.66,"),
            std::string::npos)
      << csv;

  const std::string html = rp::render_html(r);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  // Self-contained: the only URL is the SVG namespace name, which is never fetched.
  for (auto at = html.find("http"); at != std::string::npos; at = html.find("http", at + 1))
    EXPECT_EQ(html.compare(at, 26, "http://www.w3.org/2000/svg"), 0) << html.substr(at, 40);
  EXPECT_EQ(html.find("url("), std::string::npos);
  EXPECT_NE(html.find("aria-label=\"GPU-hours per day\""), std::string::npos);
  EXPECT_NE(html.find("aria-label=\"waste share\""), std::string::npos);
  EXPECT_NE(html.find("aria-label=\"cost by partition\""), std::string::npos);
  EXPECT_NE(html.find("$246.39"), std::string::npos);
}

// Job names are not shown (nor read); other text from sacct is escaped.
TEST(ReportRender, HostileTextIsEscapedAndJobNamesAreNotShown) {
  const std::string text =
      "JobID|JobName|User|Partition|State|Start|End|ElapsedRaw|AllocTRES\n"
      "1|secret-name|=cmd()|<script>alert(1)</script>|COMPLETED|2026-12-01T00:00:00|"
      "2026-12-01T01:00:00|3600|gres/gpu=1\n";
  auto runs = rp::parse_sacct(text, "t");
  ASSERT_TRUE(runs.ok());
  const rp::Report r = rp::build_report(*runs, rp::Options{});
  const std::string html = rp::render_html(r);
  EXPECT_EQ(html.find("<script>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(rp::render_csv(r).find(",'=cmd(),"), std::string::npos);  // no spreadsheet formula
  for (const auto& out : {html, rp::render_csv(r), rp::render_text(r), rp::render_json(r)})
    EXPECT_EQ(out.find("secret-name"), std::string::npos);
}

TEST(ReportPolicy, PricesComeFromThePolicyPartitions) {
  const std::string policy_file = std::string(SCALEGUARD_SOURCE_DIR) + "/configs/policy.ini";
  auto policy = scaleguard::load_policy(policy_file);
  ASSERT_TRUE(policy.ok()) << policy.error().str();
  const rp::Options o = rp::options_from_policy(**policy);
  ASSERT_EQ(o.prices.count("gpu-od"), 1u);
  ASSERT_EQ(o.prices.count("gpu-spot"), 1u);
  EXPECT_EQ(o.prices.at("gpu-od").instance, "p4d.24xlarge");
  EXPECT_FALSE(o.prices.at("gpu-od").spot);
  EXPECT_TRUE(o.prices.at("gpu-spot").spot);
  EXPECT_NEAR(o.prices.at("gpu-od").usd_per_gpu_hour, 32.77 / 8, 1e-9);
  EXPECT_NEAR(o.prices.at("gpu-spot").usd_per_gpu_hour, 9.83 / 8, 1e-9);
}
