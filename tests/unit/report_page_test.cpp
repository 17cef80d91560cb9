// The one-page report (issue 40): chart ticks at any scale, GPU utilisation from accounting
// (sacct's gres/gpuutil) or else the plan's estimate, dollars avoided, and the page's sections.
// Fixtures: tests/unit/data/sacct-gpuutil.txt and sacct-no-gpuutil.txt are the same jobs as
// sacct prints them with steps and TRESUsageInAve, on a cluster whose GPU plugin (gpu/nvml)
// records gres/gpuutil and gres/gpumem (AccountingStorageTRES=gres/gpu,gres/gpumem,
// gres/gpuutil) and on one that records neither; the values are in the comments below.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "scaleguard/policy.h"
#include "scaleguard/report.h"
#include "scaleguard/report_axis.h"
#include "scaleguard/report_decisions.h"
#include "scaleguard/report_page.h"

namespace rp = scaleguard::report;

namespace {

std::string read(const std::string& name) {
  std::ifstream in(std::string(SCALEGUARD_TEST_DATA) + "/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A label back to its value: "1,500" -> 1500, "2.5k" -> 2500, "0.005" -> 0.005.
double label_value(std::string s) {
  s.erase(std::remove(s.begin(), s.end(), ','), s.end());
  double scale = 1;
  const std::string suffixes = "kMGTP";
  if (const auto at = suffixes.find(s.back()); !s.empty() && at != std::string::npos) {
    scale = std::pow(1000.0, static_cast<double>(at + 1));
    s.pop_back();
  }
  return std::stod(s) * scale;
}

TEST(ReportAxis, TicksAreDistinctNiceAndReadableFrom1eMinus4To1e7) {
  const std::regex shape(R"(0|[0-9]{1,3}(,[0-9]{3})*(\.[0-9]+)?|[0-9]{1,3}(\.[0-9]+)?[kMGTP])");
  int scales = 0;
  for (int e = -4; e <= 7; ++e)
    for (double m : {1.0, 1.2, 1.5, 2.0, 2.5, 3.3, 4.99, 5.0, 7.1, 9.99}) {
      const double max = m * std::pow(10.0, e);
      const rp::AxisTicks t = rp::nice_ticks(max, 5);
      SCOPED_TRACE("max " + std::to_string(max));
      ++scales;
      // Steps of 1, 2 or 5 x 10^k; at most 5 intervals, at least 2; the top covers max by < 1 step.
      const double mantissa = t.step / std::pow(10.0, std::floor(std::log10(t.step) + 1e-9));
      EXPECT_TRUE(std::fabs(mantissa - 1) < 1e-9 || std::fabs(mantissa - 2) < 1e-9 || std::fabs(mantissa - 5) < 1e-9)
          << t.step;
      EXPECT_GE(t.intervals, 2);
      EXPECT_LE(t.intervals, 5);
      EXPECT_GE(t.top(), max * (1 - 1e-12));
      EXPECT_LT(t.top() - t.step, max);
      ASSERT_EQ(t.labels.size(), static_cast<std::size_t>(t.intervals + 1));
      EXPECT_EQ(std::set<std::string>(t.labels.begin(), t.labels.end()).size(), t.labels.size());
      for (int i = 0; i <= t.intervals; ++i) {
        const std::string& l = t.labels[i];
        EXPECT_TRUE(std::regex_match(l, shape)) << l;
        EXPECT_LE(l.size(), 9u) << l;   // fits the chart's 64-pixel margin
        // Each label reads as its own value, exactly (no rounding to a neighbour's text).
        EXPECT_NEAR(label_value(l), t.step * i, t.step * 1e-6) << l;
      }
    }
  EXPECT_EQ(scales, 120);
}

TEST(ReportAxis, LabelsOfTheIssuesCases) {
  // A small window: 0.02 GPU-hours used to read 0.01, 0.01, 0.01, 0.00 (two decimals for all).
  EXPECT_EQ(rp::nice_ticks(0.02).labels, (std::vector<std::string>{"0", "0.005", "0.010", "0.015", "0.020"}));
  EXPECT_EQ(rp::nice_ticks(0.0137).labels, (std::vector<std::string>{"0", "0.005", "0.010", "0.015"}));
  EXPECT_EQ(rp::nice_ticks(2500).labels, (std::vector<std::string>{"0", "500", "1,000", "1,500", "2,000", "2,500"}));
  EXPECT_EQ(rp::nice_ticks(12345).labels, (std::vector<std::string>{"0", "5k", "10k", "15k"}));
  EXPECT_EQ(rp::nice_ticks(3.2e6).labels, (std::vector<std::string>{"0", "1M", "2M", "3M", "4M"}));
  EXPECT_EQ(rp::nice_ticks(0).labels, (std::vector<std::string>{"0", "0.2", "0.4", "0.6", "0.8", "1.0"}));
}

const rp::JobSummary& job(const rp::Report& r, const std::string& id) {
  for (const auto& j : r.jobs)
    if (j.job_id == id) return j;
  throw std::runtime_error("no job " + id);
}

bool has_flag(const rp::JobSummary& j, const std::string& start) {
  for (const auto& f : j.flags)
    if (f.rfind(start, 0) == 0) return true;
  return false;
}

TEST(ReportGpuUtil, FromAccountingWhereSacctRecordsIt) {
  auto runs = rp::parse_sacct(read("sacct-gpuutil.txt"), "sacct-gpuutil.txt");
  ASSERT_TRUE(runs.ok()) << runs.error().str();
  ASSERT_EQ(runs->size(), 4u);
  // The highest gres/gpuutil of each run's steps: 201.0 (23; batch and extern 0), 202.batch
  // (91), 203's two runs (40, 80).
  EXPECT_DOUBLE_EQ((*runs)[0].gpu_util, 23);
  EXPECT_DOUBLE_EQ((*runs)[1].gpu_util, 91);
  EXPECT_DOUBLE_EQ((*runs)[2].gpu_util, 40);
  EXPECT_DOUBLE_EQ((*runs)[3].gpu_util, 80);
  const rp::Report r = rp::build_report(*runs, rp::Options{});
  // 201: its plan uses all 8 GPUs, yet accounting saw them busy 23% of the time: flagged.
  EXPECT_DOUBLE_EQ(job(r, "201").gpu_util, 23);
  EXPECT_EQ(job(r, "201").gpu_util_source, "accounting");
  EXPECT_TRUE(has_flag(job(r, "201"), "low_gpu_efficiency: 8 GPUs busy 23% of the time (accounting"));
  // 202: its plan uses 1 of 8 GPUs (the estimate would flag it); accounting says 91%: not flagged.
  EXPECT_DOUBLE_EQ(job(r, "202").gpu_util, 91);
  EXPECT_FALSE(has_flag(job(r, "202"), "low_gpu_efficiency"));
  // 203: 4 GPUs x 1 h at 40% and 4 x 3 h at 80%: (160 + 960) / 16 = 70%.
  EXPECT_DOUBLE_EQ(job(r, "203").gpu_util, 70);
  EXPECT_FALSE(has_flag(job(r, "203"), "low_gpu_efficiency"));
  // The threshold is the report's option.
  rp::Options strict;
  strict.min_gpu_util = 75;
  EXPECT_TRUE(has_flag(job(rp::build_report(*runs, strict), "203"), "low_gpu_efficiency: 4 GPUs busy 70%"));
}

TEST(ReportGpuUtil, ThePlansEstimateOnlyWhereAccountingHasNoneAndLabelledSo) {
  auto runs = rp::parse_sacct(read("sacct-no-gpuutil.txt"), "sacct-no-gpuutil.txt");
  ASSERT_TRUE(runs.ok()) << runs.error().str();
  for (const auto& run : *runs) EXPECT_EQ(run.gpu_util, -1) << run.job_id;
  const rp::Report r = rp::build_report(*runs, rp::Options{});
  EXPECT_EQ(job(r, "202").gpu_util_source, "plan estimate");
  EXPECT_DOUBLE_EQ(job(r, "202").gpu_util, 12.5);   // 1 of 8 GPUs
  EXPECT_TRUE(has_flag(job(r, "202"), "low_gpu_efficiency (plan estimate, no GPU utilisation in accounting): "
                                      "8 GPUs allocated, plan uses 1"));
  EXPECT_FALSE(has_flag(job(r, "201"), "low_gpu_efficiency"));
  EXPECT_DOUBLE_EQ(job(r, "201").gpu_util, 100);
  // The text and HTML say which is which.
  EXPECT_NE(rp::render_text(r).find("12% plan"), std::string::npos);
  EXPECT_NE(rp::render_html(r).find("12% (plan estimate)"), std::string::npos);
}

TEST(ReportGpuUtil, ReadsSlurmsTresUsageStrings) {
  const std::string head = "JobID|User|Partition|State|Start|End|ElapsedRaw|AllocTRES|TRESUsageInAve\n"
                           "1|u|p|COMPLETED|2026-12-01T00:00:00|2026-12-01T01:00:00|3600|gres/gpu=1|\n";
  const auto util = [&](const std::string& tres) {
    auto runs = rp::parse_sacct(head + "1.0|||COMPLETED|2026-12-01T00:00:00|2026-12-01T01:00:00|3600||" + tres + "\n", "t");
    EXPECT_TRUE(runs.ok());
    return runs.ok() && !runs->empty() ? (*runs)[0].gpu_util : -2;
  };
  EXPECT_EQ(util("cpu=00:01:00,gres/gpumem=1.50G,gres/gpuutil=87,mem=1G"), 87);
  EXPECT_EQ(util("gres/gpuutil=5"), 5);
  EXPECT_EQ(util("cpu=00:01:00,mem=1G"), -1);            // not tracked
  EXPECT_EQ(util("xgres/gpuutil=50,mem=1G"), -1);        // not the TRES
  EXPECT_EQ(util("gres/gpuutil=,mem=1G"), -1);           // empty
  EXPECT_EQ(util("gres/gpuutil=-3"), -1);                // not a percentage
  EXPECT_EQ(util(""), -1);
}

TEST(ReportDecisions, DollarsAvoidedAtThePartitionsPrice) {
  const std::string policy_file = std::string(SCALEGUARD_SOURCE_DIR) + "/configs/policy.ini";
  auto policy = scaleguard::load_policy(policy_file);
  ASSERT_TRUE(policy.ok()) << policy.error().str();
  rp::DecisionOptions o;
  o.usd_per_gpu_hour = rp::decision_prices(**policy);
  // p4d.24xlarge: $32.77/h on demand for 8 GPUs; the dev policy's default partition is gpu-od.
  ASSERT_EQ(o.usd_per_gpu_hour.count("(default)"), 1u);
  EXPECT_NEAR(o.usd_per_gpu_hour["(default)"], o.usd_per_gpu_hour["gpu-od"], 1e-12);
  const std::string line =
      R"({"ts":"2026-12-03T08:00:00Z","id":"a","partition":"PART","mode":"enforce","enforced":true,)"
      R"("action":"reject","rules":["distributed_min_gpu_hours"],"judged_gpu_hours":16,"granted_gpu_hours":0})";
  std::string log;
  for (const char* part : {"(default)", "gpu-od", "gpu-od,gpu-spot", "nowhere"})
    log += std::regex_replace(line, std::regex("PART"), part) + "\n";
  const rp::DecisionReport r = rp::summarize_decisions(log, o);
  const double od = o.usd_per_gpu_hour["gpu-od"], spot = o.usd_per_gpu_hour["gpu-spot"];
  ASSERT_LT(spot, od);
  EXPECT_TRUE(r.priced);
  EXPECT_NEAR(r.enforced.total.avoided_gpu_hours, 64, 1e-9);
  // default and gpu-od at the on-demand price, the list at its cheapest, the unknown at $0.
  EXPECT_NEAR(r.enforced.total.avoided_usd, 16 * (2 * od + spot), 1e-9);
  EXPECT_EQ(r.unpriced, std::vector<std::string>{"nowhere"});
  EXPECT_NE(rp::render_decisions_text(r).find("GPU-hours ($" ), std::string::npos);
  // Without prices (report --decisions alone) no dollars are claimed.
  const rp::DecisionReport bare = rp::summarize_decisions(log, rp::DecisionOptions{});
  EXPECT_FALSE(bare.priced);
  EXPECT_EQ(rp::render_decisions_text(bare).find('$'), std::string::npos);
}

TEST(ReportPage, SectionsSayWhyTheyAreAbsent) {
  rp::Page page;
  auto runs = rp::parse_sacct(read("sacct-gpuutil.txt"), "t");
  ASSERT_TRUE(runs.ok());
  page.usage = rp::build_report(*runs, rp::Options{});
  page.decisions_missing = "no decision log at /var/log/x.jsonl";
  page.budgets_missing = "no budgets in the policy p.ini";
  for (const std::string& out : {rp::render_page_text(page), rp::render_page_html(page), rp::render_page_json(page)}) {
    EXPECT_NE(out.find("no decision log at /var/log/x.jsonl"), std::string::npos) << out;
    EXPECT_NE(out.find("no budgets in the policy p.ini"), std::string::npos) << out;
  }
  page.decisions = rp::summarize_decisions(read("decisions.jsonl"), rp::DecisionOptions{});
  page.decision_log = "d.jsonl";
  const std::string html = rp::render_page_html(page), text = rp::render_page_text(page);
  EXPECT_NE(html.find("<section id=\"decisions\">"), std::string::npos);
  EXPECT_NE(html.find("refused<b>" + std::to_string(page.decisions->enforced.total.refused) + "</b>"), std::string::npos);
  EXPECT_NE(text.find("saved: " + std::to_string(page.decisions->enforced.total.refused) + " refused"), std::string::npos);
  EXPECT_EQ(html.find("no decision log"), std::string::npos);
}

}  // namespace
