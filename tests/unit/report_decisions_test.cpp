// scaleguard report --decisions: the decision log (JSON Lines) parsed, bounded and summed.
// Fixture tests/unit/data/decisions.jsonl (written by tests' own generator, by hand-picked
// numbers): 12 lines, one blank; every expected value below is worked out in the comments.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "scaleguard/report_decisions.h"

namespace rp = scaleguard::report;

namespace {

std::string read(const std::string& name) {
  std::ifstream in(std::string(SCALEGUARD_TEST_DATA) + "/" + name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

constexpr double kEps = 1e-9;

rp::DecisionOptions day() {
  rp::DecisionOptions o;
  o.since = *rp::parse_utc_time("2026-12-03T00:00:00Z");
  o.until = *rp::parse_utc_time("2026-12-04T00:00:00Z");
  return o;
}

const std::string kLine =
    R"({"ts":"2026-12-03T17:50:00Z","id":"sg-1733248200-42","event":"submit","job":"","uid":1001,)"
    R"("user":"sguser","partition":"gpu-od","mode":"enforce","enforced":true,"action":"reject",)"
    R"("rules":["max_job_gpu_hours"],"envelope":{"nodes":2,"gpus_per_node":8,"gpus":16,"hours":72,)"
    R"("gpu_hours":1152,"array_tasks":1},"judged_gpu_hours":1152,"granted_gpu_hours":0,)"
    R"("avoided_gpu_hours":1152,"changes":"","message":"scaleguard: ..."})";

// kLine with `from` replaced by `to` (once).
std::string with(const std::string& from, const std::string& to) {
  std::string s = kLine;
  const auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

}  // namespace

TEST(ReportDecisionsTime, ParsesUtcTimes) {
  EXPECT_EQ(*rp::parse_utc_time("1970-01-02T00:00:00Z"), 86400);
  EXPECT_EQ(*rp::parse_utc_time("2026-12-03T18:50:00+01:00"), *rp::parse_utc_time("2026-12-03T17:50:00Z"));
  EXPECT_EQ(*rp::parse_utc_time("2026-12-03T12:20:00-05:30"), *rp::parse_utc_time("2026-12-03T17:50:00Z"));
  EXPECT_EQ(*rp::parse_utc_time("2026-12-03T17:50:00.999Z"), *rp::parse_utc_time("2026-12-03T17:50:00Z"));
  EXPECT_EQ(rp::format_utc_time(*rp::parse_utc_time("2026-12-03T17:50:00Z")), "2026-12-03T17:50:00Z");
  for (const char* bad : {"", "2026-12-03T17:50:00", "2026-12-03T17:50:00 Z", "2026-12-03T25:00:00Z",
                          "2026-12-03T17:50:00+1:00", "2026-12-03T17:50:00.x1Z", "yesterday Z",
                          "2026-12-03T17:50:00+24:00"})
    EXPECT_FALSE(rp::parse_utc_time(bad).ok()) << bad;
}

TEST(ReportDecisionsParse, ReadsTheFormatTheJobSubmitPluginWrites) {
  auto r = rp::parse_decision_line(kLine);
  ASSERT_TRUE(r.ok()) << r.error().str();
  EXPECT_EQ(r->ts, *rp::parse_utc_time("2026-12-03T17:50:00Z"));
  EXPECT_EQ(r->id, "sg-1733248200-42");
  EXPECT_EQ(r->event, "submit");
  EXPECT_EQ(r->job, "");
  EXPECT_EQ(r->uid, 1001);
  EXPECT_EQ(r->user, "sguser");
  EXPECT_EQ(r->partition, "gpu-od");
  EXPECT_FALSE(r->shadow);
  EXPECT_EQ(r->action, "reject");
  ASSERT_EQ(r->rules.size(), 1u);
  EXPECT_EQ(r->rules[0], "max_job_gpu_hours");
  EXPECT_NEAR(r->judged_gpu_hours, 1152, kEps);
  EXPECT_NEAR(r->granted_gpu_hours, 0, kEps);
  EXPECT_NEAR(r->avoided_gpu_hours, 1152, kEps);
  EXPECT_EQ(r->message, "scaleguard: ...");

  // Shadow mode: either field says so.
  EXPECT_TRUE(rp::parse_decision_line(with(R"("mode":"enforce")", R"("mode":"shadow")"))->shadow);
  EXPECT_TRUE(rp::parse_decision_line(with(R"("enforced":true)", R"("enforced":false)"))->shadow);
  // Fractional envelopes; avoided computed from judged - granted when absent; judged from the
  // envelope when absent; unknown fields ignored (a later plugin may add some).
  auto f = rp::parse_decision_line(
      R"({"ts":"2026-12-03T17:50:00Z","action":"rewrite","envelope":{"gpu_hours":10.5},)"
      R"("granted_gpu_hours":2.25,"future_field":{"x":[1,2]},"job":"77_3"})");
  ASSERT_TRUE(f.ok()) << f.error().str();
  EXPECT_NEAR(f->judged_gpu_hours, 10.5, kEps);
  EXPECT_NEAR(f->avoided_gpu_hours, 8.25, kEps);
  EXPECT_EQ(f->job, "77_3");
  EXPECT_EQ(f->uid, -1);
  // A reject without granted/avoided avoided all it judged; an accept nothing.
  EXPECT_NEAR(rp::parse_decision_line(R"({"ts":"2026-12-03T17:50:00Z","action":"reject","judged_gpu_hours":4})")
                  ->avoided_gpu_hours, 4, kEps);
  EXPECT_NEAR(rp::parse_decision_line(R"({"ts":"2026-12-03T17:50:00Z","action":"accept","judged_gpu_hours":4})")
                  ->avoided_gpu_hours, 0, kEps);
  // Any UTF-8 in the message, escaped per JSON.
  auto u = rp::parse_decision_line(with(R"("message":"scaleguard: ...")",
                                        R"("message":"zu gro\u00df \u2713 \"q\"\n<b>")"));
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->message, "zu gro\xc3\x9f \xe2\x9c\x93 \"q\"\n<b>");
}

TEST(ReportDecisionsParse, MalformedLinesSayWhy) {
  struct Case { std::string line; const char* says; };
  const Case cases[] = {
      {"", "not JSON"},
      {"not json", "not JSON"},
      {R"({"ts":"2026-12-03T17:50:00Z","action":)", "not JSON"},
      {"[1,2]", "not a JSON object"},
      {"\"a string\"", "not a JSON object"},
      {R"({"action":"reject"})", "no 'ts'"},
      {with(R"("ts":"2026-12-03T17:50:00Z")", R"("ts":1733248200)"), "'ts' is not a string"},
      {with(R"("ts":"2026-12-03T17:50:00Z")", R"("ts":"2026-12-03 17:50")"), "not a UTC time"},
      {with(R"("action":"reject")", R"("action":"maybe")"), "'action' is 'maybe'"},
      {with(R"("action":"reject")", R"("action":null)"), "'action' is not a string"},
      {with(R"("mode":"enforce")", R"("mode":"dry-run")"), "'mode' is 'dry-run'"},
      {with(R"("enforced":true)", R"("enforced":"yes")"), "'enforced' is not true or false"},
      {with(R"("uid":1001)", R"("uid":"1001")"), "'uid' is not a user id"},
      {with(R"("uid":1001)", R"("uid":-1)"), "'uid' is not a user id"},
      {with(R"("uid":1001)", R"("uid":1.5)"), "'uid' is not a user id"},
      {with(R"("user":"sguser")", R"("user":["a"])"), "'user' is not a string"},
      {with(R"("rules":["max_job_gpu_hours"])", R"("rules":"max_job_gpu_hours")"), "'rules' is not an array"},
      {with(R"("rules":["max_job_gpu_hours"])", R"("rules":[1])"), "'rules' is not an array"},
      {with(R"("avoided_gpu_hours":1152)", R"("avoided_gpu_hours":-1)"), "'avoided_gpu_hours' is not a number"},
      {with(R"("avoided_gpu_hours":1152)", R"("avoided_gpu_hours":1e300)"), "'avoided_gpu_hours' is not a number"},
      {with(R"("judged_gpu_hours":1152)", R"("judged_gpu_hours":"1152")"), "'judged_gpu_hours' is not a number"},
      {with(R"("gpu_hours":1152)", R"("gpu_hours":"lots")"), "'envelope.gpu_hours' is not a number"},
      {with(R"("gpus":16)", R"("gpus":-16)"), "'envelope.gpus' is not a number"},
      {with(R"("envelope":{)", R"("envelope":[{)"), "not JSON"},
      {with(R"("message":"scaleguard: ...")", "\"message\":\"\xff\xfe\""), "not JSON"},   // bad UTF-8
      {std::string(40, '[') + std::string(40, ']'), "nested deeper than"},
      {std::string(kLine).insert(1, "\"pad\":\"" + std::string(rp::kMaxDecisionLine, 'x') + "\","),
       "longer than 64 KiB"},
  };
  for (const auto& c : cases) {
    auto r = rp::parse_decision_line(c.line);
    ASSERT_FALSE(r.ok()) << c.line.substr(0, 200);
    EXPECT_NE(r.error().message.find(c.says), std::string::npos)
        << c.line.substr(0, 200) << " -> " << r.error().message;
  }
}

TEST(ReportDecisionsSummary, CountsPerRuleUserAndPartitionAgainstHandComputedNumbers) {
  const rp::DecisionReport r = rp::summarize_decisions(read("decisions.jsonl"), day());
  // 12 lines, one blank: 11 read; 5, 9, 12 are not decisions; 11 is 2026-12-02 (outside).
  EXPECT_EQ(r.lines, 11);
  EXPECT_EQ(r.skipped, 3);
  EXPECT_EQ(r.outside_window, 1);
  ASSERT_EQ(r.first_skipped.size(), 3u);
  EXPECT_EQ(r.first_skipped[0].line, 5);
  EXPECT_EQ(r.first_skipped[0].reason, "not JSON");
  EXPECT_EQ(r.first_skipped[1].line, 9);
  EXPECT_EQ(r.first_skipped[2].line, 12);
  EXPECT_EQ(rp::format_utc_time(r.since), "2026-12-03T00:00:00Z");
  EXPECT_EQ(rp::format_utc_time(r.until), "2026-12-04T00:00:00Z");

  // Enforced: lines 1 reject 1152, 2 accept 8, 3 rewrite 64 -> 16, 4 warn 32, 10 reject 4.5.
  const auto& e = r.enforced.total;
  EXPECT_EQ(e.decisions, 5);
  EXPECT_EQ(e.accepted, 1);
  EXPECT_EQ(e.warned, 1);
  EXPECT_EQ(e.rewritten, 1);
  EXPECT_EQ(e.refused, 2);
  EXPECT_NEAR(e.judged_gpu_hours, 1152 + 8 + 64 + 32 + 4.5, kEps);
  EXPECT_NEAR(e.avoided_gpu_hours, 1152 + 48 + 4.5, kEps);   // line 10 has no avoided: 4.5 - 0
  // Per rule: line 3 fired two rules and counts under both; line 10 fired none.
  ASSERT_EQ(r.enforced.by_rule.size(), 5u);
  EXPECT_EQ(r.enforced.by_rule.at("max_job_gpu_hours").refused, 1);
  EXPECT_NEAR(r.enforced.by_rule.at("max_job_gpu_hours").avoided_gpu_hours, 1152, kEps);
  EXPECT_EQ(r.enforced.by_rule.at("max_gpus_per_job").rewritten, 1);
  EXPECT_NEAR(r.enforced.by_rule.at("distributed_min_gpu_hours").avoided_gpu_hours, 48, kEps);
  EXPECT_EQ(r.enforced.by_rule.at("max_comm_ratio").warned, 1);
  EXPECT_NEAR(r.enforced.by_rule.at("(none)").avoided_gpu_hours, 4.5, kEps);
  // Per user: accepts are not listed (bob's accept on line 2).
  ASSERT_EQ(r.enforced.by_user.size(), 3u);
  EXPECT_EQ(r.enforced.by_user.at("alice").refused, 1);
  EXPECT_EQ(r.enforced.by_user.at("alice").warned, 1);
  EXPECT_EQ(r.enforced.by_user.at("bob").decisions, 1);
  EXPECT_NEAR(r.enforced.by_user.at("dave").avoided_gpu_hours, 4.5, kEps);
  EXPECT_NEAR(r.enforced.by_partition.at("gpu-od").avoided_gpu_hours, 1152, kEps);
  EXPECT_NEAR(r.enforced.by_partition.at("gpu-spot").avoided_gpu_hours, 48, kEps);
  EXPECT_EQ(r.enforced.by_partition.at("(none)").refused, 1);

  // Shadow: line 6 would have refused 384 (ts with .250), line 8 warned (13:00Z as +01:00).
  const auto& s = r.shadow.total;
  EXPECT_EQ(s.decisions, 2);
  EXPECT_EQ(s.refused, 1);
  EXPECT_EQ(s.warned, 1);
  EXPECT_NEAR(s.avoided_gpu_hours, 384, kEps);
  EXPECT_NEAR(s.judged_gpu_hours, 394, kEps);
  EXPECT_EQ(r.shadow.by_user.at("carol").refused, 1);
  EXPECT_EQ(r.shadow.by_user.at("uid 1004").warned, 1);   // no user name: the uid
  EXPECT_EQ(r.enforced.by_user.count("carol"), 0u);

  // Largest avoided first, both modes: 1152 (line 1), 384 (6, shadow), 48 (3), 4.5 (10).
  ASSERT_EQ(r.largest.size(), 4u);
  EXPECT_EQ(r.largest[0].line, 1);
  EXPECT_EQ(r.largest[1].line, 6);
  EXPECT_TRUE(r.largest[1].shadow);
  EXPECT_EQ(r.largest[2].changes, "gpus 16 -> 4");
  EXPECT_EQ(r.largest[3].line, 10);
}

TEST(ReportDecisionsSummary, OpenWindowUsesTheDataSpan) {
  const rp::DecisionReport r = rp::summarize_decisions(read("decisions.jsonl"), rp::DecisionOptions{});
  EXPECT_EQ(r.outside_window, 0);
  EXPECT_EQ(r.enforced.total.decisions, 6);   // + line 11
  EXPECT_EQ(rp::format_utc_time(r.since), "2026-12-02T23:59:59Z");
  EXPECT_EQ(rp::format_utc_time(r.until), "2026-12-03T14:00:01Z");   // just after the last
}

TEST(ReportDecisionsSummary, HostileInputIsBoundedAndNeverFatal) {
  std::string text;
  text += kLine + "\n";
  text += std::string(200 * 1024, '{') + "\n";                                    // 2: huge line
  text += std::string(1000, '[') + "\n";                                           // 3: deep
  text += std::string("\0\x01\x02 binary\n", 11);                                  // 4
  text += "{\"ts\":\"2026-12-03T17:50:00Z\",\"action\":\"reject\",\"rules\":[" +   // 5: many rules
          [] { std::string s; for (int i = 0; i < 500; ++i) s += (i ? ",\"r" : "\"r") + std::to_string(i) + "\""; return s; }() +
          "]}\r\n";
  text += kLine;                                                                   // 6: no newline
  const rp::DecisionReport r = rp::summarize_decisions(text, rp::DecisionOptions{});
  EXPECT_EQ(r.lines, 6);
  EXPECT_EQ(r.skipped, 3);
  ASSERT_EQ(r.first_skipped.size(), 3u);
  EXPECT_EQ(r.first_skipped[0].line, 2);
  EXPECT_EQ(r.first_skipped[0].reason, "longer than 64 KiB");
  EXPECT_EQ(r.first_skipped[1].line, 3);
  EXPECT_EQ(r.first_skipped[2].line, 4);
  EXPECT_EQ(r.enforced.total.decisions, 3);
  EXPECT_EQ(r.enforced.by_rule.size(), 64u + 1);   // at most 64 rules kept per decision

  // Only five skipped lines are kept for the message; all are counted. A cut last line says so.
  std::string bad;
  for (int i = 0; i < 9; ++i) bad += "x\n";
  bad += R"({"ts":"2026-12-03T17:50:00Z","act)";
  const rp::DecisionReport b = rp::summarize_decisions(bad, rp::DecisionOptions{});
  EXPECT_EQ(b.skipped, 10);
  EXPECT_EQ(b.first_skipped.size(), 5u);
  EXPECT_EQ(b.enforced.total.decisions + b.shadow.total.decisions, 0);
  const rp::DecisionReport last = rp::summarize_decisions(R"({"ts":"2026-12-03T17:50:00Z","act)",
                                                          rp::DecisionOptions{});
  ASSERT_EQ(last.first_skipped.size(), 1u);
  EXPECT_NE(last.first_skipped[0].reason.find("still being written"), std::string::npos);
  EXPECT_EQ(rp::summarize_decisions(std::string(), rp::DecisionOptions{}).lines, 0);
}

TEST(ReportDecisionsRender, TextCsvJsonAndHtmlCarryTheNumbers) {
  const rp::DecisionReport r = rp::summarize_decisions(read("decisions.jsonl"), day());
  const std::string text = rp::render_decisions_text(r);
  EXPECT_NE(text.find("enforced: 5 decisions: 1 accepted, 1 warned, 1 rewritten, 2 refused; "
                      "1204.50 GPU-hours avoided of 1260.50 judged"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("shadow mode (logged, not enforced): 2 decisions: 0 accepted; would have "
                      "refused 1, rewritten 0, warned 1; would have avoided 384.00 GPU-hours of "
                      "394.00 judged"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("would have refused  carol"), std::string::npos) << text;
  EXPECT_NE(text.find("note: skipped 3 lines that are not decisions: line 5: not JSON; line 9:"),
            std::string::npos);

  const std::string csv = rp::render_decisions_csv(r);
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "mode,by,key,decisions,accepted,warned,rewritten,refused,judged_gpu_hours,avoided_gpu_hours");
  EXPECT_NE(csv.find("\nenforce,total,2026-12-03T00:00:00Z..2026-12-04T00:00:00Z,5,1,1,1,2,1260.5000,1204.5000\n"),
            std::string::npos)
      << csv;
  EXPECT_NE(csv.find("\nenforce,rule,max_gpus_per_job,1,0,0,1,0,64.0000,48.0000\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\nshadow,user,carol,1,0,0,0,1,384.0000,384.0000\n"), std::string::npos) << csv;

  const std::string json = rp::render_decisions_json(r);
  EXPECT_NE(json.find("\"avoided_gpu_hours\": 1204.5"), std::string::npos);
  EXPECT_NE(json.find("\"skipped\": 3"), std::string::npos);

  const std::string html = rp::render_decisions_html(r);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  for (auto at = html.find("http"); at != std::string::npos; at = html.find("http", at + 1))
    EXPECT_EQ(html.compare(at, 26, "http://www.w3.org/2000/svg"), 0) << html.substr(at, 40);
  EXPECT_NE(html.find("aria-label=\"GPU-hours avoided by rule\""), std::string::npos);
  EXPECT_NE(html.find("Shadow mode"), std::string::npos);
  EXPECT_NE(html.find("1204.50"), std::string::npos);
  // The user-facing message is escaped: no markup from the log reaches the page.
  EXPECT_EQ(html.find("<b>&</b>"), std::string::npos);
  EXPECT_NE(html.find("&lt;b&gt;&amp;&lt;/b&gt;"), std::string::npos);
}

TEST(ReportDecisionsRender, HostileNamesAreEscapedAndCut) {
  const std::string line =
      R"({"ts":"2026-12-03T17:50:00Z","action":"reject","judged_gpu_hours":1,)"
      R"j("user":"<script>alert(1)</script>","partition":"=HYPERLINK(\"x\")","rules":["a\u0007b"],)j"
      R"("message":")" + std::string(10000, 'm') + "\"}";
  const rp::DecisionReport r = rp::summarize_decisions(line + "\n", rp::DecisionOptions{});
  ASSERT_EQ(r.enforced.total.refused, 1);
  const std::string html = rp::render_decisions_html(r);
  EXPECT_EQ(html.find("<script>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;"), std::string::npos);
  EXPECT_NE(rp::render_decisions_csv(r).find(",\"'=HYPERLINK(\"\"x\"\")\","), std::string::npos)
      << rp::render_decisions_csv(r);
  const std::string text = rp::render_decisions_text(r);
  EXPECT_EQ(text.find('\a'), std::string::npos);
  EXPECT_LE(r.largest.at(0).message.size(), 4096u);   // kept messages are bounded
}
