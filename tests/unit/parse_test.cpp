// The value parsers shared by the CLI and both Slurm plugins.
#include <gtest/gtest.h>

#include "scaleguard/decide.h"

using namespace scaleguard;

TEST(ParseCount, SuffixesAndScientific) {
  EXPECT_DOUBLE_EQ(parse_count("350M").value(), 350e6);
  EXPECT_DOUBLE_EQ(parse_count("40B").value(), 40e9);
  EXPECT_DOUBLE_EQ(parse_count("1.5T").value(), 1.5e12);
  EXPECT_DOUBLE_EQ(parse_count("7b").value(), 7e9);
  EXPECT_DOUBLE_EQ(parse_count("12k").value(), 12e3);
  EXPECT_DOUBLE_EQ(parse_count("1e9").value(), 1e9);
  EXPECT_DOUBLE_EQ(parse_count(" 42 ").value(), 42);
}

TEST(ParseCount, BadInputIsAClearError) {
  for (const char* bad : {"", "M", "abc", "12X", "1,000", "-5", "0", "1e30", "nan", "inf", "1e", "--1", "5MB"}) {
    auto r = parse_count(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_FALSE(r.error().hint.empty()) << bad;
    }
  }
  EXPECT_FALSE(parse_count(std::string(100, '9')).ok());
  EXPECT_FALSE(parse_count("12\n").ok());
  EXPECT_NE(parse_count("1e30").error().message.find("absurd"), std::string::npos);
}

TEST(ParseSlurmMinutes, EveryForm) {
  EXPECT_EQ(parse_slurm_minutes("90").value(), 90);              // MIN
  EXPECT_EQ(parse_slurm_minutes("90:30").value(), 91);           // MIN:SEC, rounded up
  EXPECT_EQ(parse_slurm_minutes("1:30:00").value(), 90);         // H:M:S
  EXPECT_EQ(parse_slurm_minutes("2-0").value(), 2880);           // D-H
  EXPECT_EQ(parse_slurm_minutes("1-12:30").value(), 2190);       // D-H:M
  EXPECT_EQ(parse_slurm_minutes("1-00:00:01").value(), 1441);    // D-H:M:S
  EXPECT_EQ(parse_slurm_minutes("INFINITE").value(), -1);
  EXPECT_EQ(parse_slurm_minutes("unlimited").value(), -1);
  EXPECT_EQ(parse_slurm_minutes("0").value(), -1);  // Slurm: zero = no limit
}

TEST(ParseSlurmMinutes, BadInput) {
  for (const char* bad : {"", "abc", "1:2:3:4", "-5", "1--2", "1-a", "99999999999", "1.5", "1:-1"})
    EXPECT_FALSE(parse_slurm_minutes(bad).ok()) << bad;
}

// Found by fuzz/fuzz_parsers (UBSan: signed overflow in the seconds sum). Fields of up to 19
// digits were multiplied before the 10-year check: 307445734561825861 minutes * 60 wrapped to
// 44 seconds and was accepted as a 1-minute limit. --train-deadline and
// --train-single-gpu-hours reach this through parse_hours inside slurmctld.
TEST(ParseSlurmMinutes, HugeFieldsAreRefusedNotWrapped) {
  for (const char* huge : {"307445734561825861", "1115555555555555555", "213503982334602-0",
                           "0-5124095576030432:00", "0:307445734561825861", "1:0:307445734561825861",
                           "1000000001", "1000000001:00"})
    EXPECT_FALSE(parse_slurm_minutes(huge).ok()) << huge;
  EXPECT_FALSE(parse_hours("307445734561825861:00").ok());
  EXPECT_FALSE(parse_hours("1-307445734561825861:00:00").ok());
  // The largest accepted limit is unchanged: 10 years of minutes.
  EXPECT_EQ(parse_slurm_minutes("5270400").value(), 5270400);
  EXPECT_FALSE(parse_slurm_minutes("5270401").ok());
}

TEST(ParseHours, UnitsAndSlurmForms) {
  EXPECT_DOUBLE_EQ(parse_hours("11").value(), 11);
  EXPECT_DOUBLE_EQ(parse_hours("11h").value(), 11);
  EXPECT_DOUBLE_EQ(parse_hours("90m").value(), 1.5);
  EXPECT_DOUBLE_EQ(parse_hours("2d").value(), 48);
  EXPECT_DOUBLE_EQ(parse_hours("2w").value(), 336);
  EXPECT_DOUBLE_EQ(parse_hours("1-12:00:00").value(), 36);
  EXPECT_DOUBLE_EQ(parse_hours("3600s").value(), 1);
  for (const char* bad : {"", "h", "-3h", "0", "tomorrow", "5y", "1e9w", "INFINITE"})
    EXPECT_FALSE(parse_hours(bad).ok()) << bad;
}

TEST(ParseStrategy, NamesAndAliases) {
  for (const char* s : {"auto", "single", "ddp", "zero", "pipeline", "tensor", "hybrid"})
    EXPECT_EQ(parse_strategy(s).value(), s);
  EXPECT_EQ(parse_strategy("FSDP").value(), "zero");
  EXPECT_EQ(parse_strategy("dp").value(), "ddp");
  EXPECT_EQ(parse_strategy("tp").value(), "tensor");
  EXPECT_EQ(parse_strategy("pp").value(), "pipeline");
  EXPECT_FALSE(parse_strategy("magic").ok());
  EXPECT_FALSE(parse_strategy("").ok());
  EXPECT_FALSE(parse_strategy("ddp;rm -rf").ok());
}

TEST(ParseGpuTres, SlurmForms) {
  auto a = parse_gpu_tres("gres:gpu:a100:8").value();
  EXPECT_EQ(a.count, 8);
  EXPECT_EQ(a.type, "a100");
  EXPECT_EQ(parse_gpu_tres("gres/gpu:4").value().count, 4);
  EXPECT_EQ(parse_gpu_tres("gpu:2").value().count, 2);
  EXPECT_EQ(parse_gpu_tres("gres:gpu").value().count, 1);
  EXPECT_EQ(parse_gpu_tres("gpu:v100").value().type, "v100");
  EXPECT_EQ(parse_gpu_tres("gpu:v100").value().count, 1);
  // Other TRES in the list are not GPUs.
  auto b = parse_gpu_tres("cpu=4,gres:nvme:1,gres:gpu:h100:2,mem=10G").value();
  EXPECT_EQ(b.count, 2);
  EXPECT_EQ(b.type, "h100");
  EXPECT_EQ(parse_gpu_tres("cpu=4").value().count, 0);
  // Two GPU types: both kept, comma-joined, for the one_gpu_type rule.
  auto c = parse_gpu_tres("gres:gpu:a100:2,gres:gpu:v100:2").value();
  EXPECT_EQ(c.count, 4);
  EXPECT_EQ(c.type, "a100,v100");
}

TEST(ParseGpuTres, BadInput) {
  for (const char* bad : {"gpu:a100:x", "gpu:a100:8:9", "gpu:-1", "gpu:999999", "gpu:", "gpu::4", "gres:gpu:a\n1"})
    EXPECT_FALSE(parse_gpu_tres(bad).ok()) << bad;
  EXPECT_FALSE(parse_gpu_tres(std::string(5000, 'g')).ok());
}
