// `scaleguard report`: one page for a time window: GPU-hours, cost and waste from Slurm
// accounting (runs sacct itself: execvp with an argument vector, no shell, bounded output; or
// reads a saved `sacct --parsable2` file; prices from the policy's partitions), what
// job_submit/scaleguard refused, rewrote and warned about in the window and what that avoided
// (the policy's audit_file, or --decision-log), and the budgets (the policy's ledger, or
// --ledger). A section whose file is absent says so.
// `scaleguard report --decisions FILE` / `--budgets`: one of those sections alone, as before.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "scaleguard/decide.h"
#include "scaleguard/policy.h"
#include "scaleguard/report.h"
#include "scaleguard/report_decisions.h"
#include "scaleguard/report_page.h"
#include "budget.h"
#include "common.h"
#include "scaleguard/report_budgets.h"
#include "scaleguard/goodput.h"
#include "scaleguard/report_goodput.h"
#include "subprocess.h"
#include "verbs.h"

namespace scaleguard::cli {
namespace {

namespace po = boost::program_options;
namespace rp = scaleguard::report;

// A month of a large cluster's jobs is a few MiB; more than this means a wrong window.
constexpr std::size_t kMaxSacctBytes = 64u << 20;

std::string read_bounded(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Failure{"cannot read " + path + ": " + std::strerror(errno)};
  std::string text(kMaxSacctBytes + 1, '\0');
  in.read(&text[0], static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > kMaxSacctBytes)
    throw Failure{path + " is larger than " + std::to_string(kMaxSacctBytes >> 20) + " MiB"};
  return text;
}

std::int64_t parse_window_time(const std::string& option, const std::string& text) {
  auto t = rp::parse_time(text);
  if (!t) throw Failure{"--" + option + ": " + t.error().message + " (" + t.error().hint + ")"};
  return *t;
}

// Local wall clock as civil seconds, the same clock sacct prints.
std::int64_t local_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return *rp::parse_time(buf);
}

// Civil seconds of the local wall clock (sacct's clock) -> UTC seconds (the decision log's),
// with the local time zone.
std::int64_t civil_to_utc(const std::string& option, std::int64_t civil) {
  std::tm tm{};
  const std::string s = rp::format_time(civil);
  if (std::sscanf(s.c_str(), "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &tm.tm_sec) != 6)
    throw Failure{"--" + option + ": '" + s + "' is not a time"};
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  tm.tm_isdst = -1;
  const std::time_t t = std::mktime(&tm);
  if (t == static_cast<std::time_t>(-1))
    throw Failure{"--" + option + ": '" + s + "' is not a local time here"};
  return static_cast<std::int64_t>(t);
}

// A window edge for the decision log (UTC): "...Z" or "+HH:MM" as written, otherwise the
// local wall clock like every other report time, converted with the local time zone.
std::int64_t parse_window_utc(const std::string& option, const std::string& text) {
  if (!text.empty() && (text.back() == 'Z' || text.back() == 'z' ||
                        (text.size() > 16 && (text[text.size() - 6] == '+' || text[text.size() - 6] == '-')))) {
    auto t = rp::parse_utc_time(text);
    if (!t) throw Failure{"--" + option + ": " + t.error().message};
    return *t;
  }
  return civil_to_utc(option, parse_window_time(option, text));
}

// A file the report reads: false when it does not exist (the section says so); a Failure
// when it is a directory or cannot be read otherwise.
bool readable_file(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return false;
    throw Failure{"cannot read " + path + ": " + std::strerror(errno)};
  }
  if (S_ISDIR(st.st_mode)) throw Failure{"cannot read " + path + ": it is a directory"};
  return true;
}

// The page's decisions section: the window's decisions from `given` (--decision-log), else
// the policy's audit_file. A log named on the command line must exist; the policy's may not
// yet (no decision since it was set).
void add_decisions(rp::Page& page, const Policy& policy, const std::string& policy_file, const std::string& given,
                   std::int64_t since_utc, std::int64_t until_utc) {
  const std::string log = given.empty() ? policy.audit_file : given;
  if (log.empty()) {
    page.decisions_missing = "no decision log: the policy " + policy_file +
                             " sets no audit_file (set it, or give --decision-log PATH)";
    return;
  }
  if (!readable_file(log)) {
    if (!given.empty()) throw Failure{"--decision-log: " + log + " does not exist"};
    page.decisions_missing = "no decision log at " + log + " (the policy's audit_file): no decision written yet";
    return;
  }
  std::ifstream in(log, std::ios::binary);
  if (!in) throw Failure{"cannot read " + log + ": " + std::strerror(errno)};
  rp::DecisionOptions options;
  options.since = since_utc;
  options.until = until_utc;
  options.usd_per_gpu_hour = rp::decision_prices(policy);
  page.decisions = rp::summarize_decisions(in, options);
  if (in.bad()) throw Failure{"cannot read " + log + ": " + std::strerror(errno)};
  page.decision_log = log;
  if (page.decisions->skipped > 0)
    std::fprintf(stderr, "scaleguard report: %s: %d line(s) are not decisions (listed in the report's notes)\n",
                 log.c_str(), page.decisions->skipped);
}

// The page's budgets section: each budget's standing from the ledger (`given`, else the
// policy's) and its refusals from the decision log the page read.
// Training jobs' goodput: every goodput.json at the paths (a file, or a directory searched
// three levels down, e.g. a checkpoint directory or a root of them), with the stragglers the
// health check named beside it (CKPT_DIR/health/stragglers).
rp::GoodputReport read_goodput_paths(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  rp::GoodputReport out;
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) {
      files.push_back(p);
      continue;
    }
    if (!fs::is_directory(p, ec)) {
      out.notes.push_back(p + ": no such file or directory");
      continue;
    }
    for (auto it = fs::recursive_directory_iterator(p, fs::directory_options::skip_permission_denied, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) break;
      if (it.depth() >= 3) it.disable_recursion_pending();
      if (it->path().filename() == ckpt::kGoodputName && it->is_regular_file(ec)) files.push_back(it->path().string());
    }
  }
  std::sort(files.begin(), files.end());
  for (const std::string& f : files) {
    auto g = ckpt::read_goodput(f);
    if (!g) {
      out.notes.push_back(g.error().message);
      continue;
    }
    if (g->runs.empty()) continue;
    const ckpt::GoodputTotals t = g->totals();
    rp::GoodputJob j;
    j.path = f;
    j.job = g->job;
    j.runs = static_cast<int>(g->runs.size());
    j.failures = t.failures;
    j.steps = g->runs.back().last_step;
    j.lost_steps = t.lost_steps;
    j.allocated_s = t.allocated_s, j.productive_s = t.productive_s, j.lost_s = t.lost_s, j.restart_s = t.restart_s;
    j.startup_s = t.startup_s, j.restore_s = t.restore_s, j.ckpt_s = t.ckpt_s, j.overhead_s = t.overhead_s;
    j.requeue_wait_s = t.requeue_wait_s;
    j.gpu_hours_allocated = t.gpu_hours_allocated, j.gpu_hours_failures = t.gpu_hours_failures;
    j.state = g->runs.back().state;
    const std::string stragglers = (fs::path(f).parent_path() / "health" / "stragglers").string();
    std::ifstream in(stragglers);
    if (in) {
      std::ostringstream text;
      text << in.rdbuf();
      j.stragglers = rp::parse_stragglers(text.str());
      const auto& last = g->runs.back();
      rp::estimate_straggler_loss(j, last.gpus > 0 ? last.gpus : last.ranks);
    }
    out.jobs.push_back(std::move(j));
  }
  return out;
}

void add_budgets(rp::Page& page, const std::string& policy_file, const std::shared_ptr<const Policy>& policy,
                 const std::string& given) {
  auto budgets = budget::load_budgets(policy_file, *policy);
  if (!budgets) throw Failure{budgets.error().str()};
  if ((*budgets)->list.empty()) {
    if (!given.empty()) throw Failure{"--ledger: the policy " + policy_file + " has no budgets"};
    page.budgets_missing = "no budgets in the policy " + policy_file;
    return;
  }
  const std::string ledger = given.empty() ? (*budgets)->settings.ledger : given;
  if (ledger.empty()) {
    page.budgets_missing = "no budget ledger: the policy " + policy_file + " names none ([budgets] ledger)";
    return;
  }
  if (!readable_file(ledger)) {
    if (!given.empty()) throw Failure{"--ledger: " + ledger + " does not exist"};
    page.budgets_missing = "no budget ledger at " + ledger + " yet (written by `scaleguard budget sync`)";
    return;
  }
  const BudgetSetup setup{policy, *budgets, ledger};
  page.budgets = budget_report(setup, read_ledger(ledger), std::time(nullptr));
  if (page.decision_log.empty()) {
    page.budgets->notes.push_back("no decision log: refusals are not counted");
    return;
  }
  std::ifstream in(page.decision_log, std::ios::binary);
  int skipped = 0;
  if (in) rp::add_budget_decisions(in, &*page.budgets, &skipped);
}

void write_output(const std::string& output, const std::string& rendered) {
  if (output.empty()) {
    std::cout << rendered;
    std::cout.flush();
    if (!std::cout) throw Failure{"cannot write to stdout"};
  } else {
    std::ofstream out(output, std::ios::binary | std::ios::trunc);
    out << rendered;
    out.close();
    if (!out) throw Failure{"cannot write " + output + ": " + std::strerror(errno)};
  }
}

// `--decisions FILE` ("-": standard input): read the log as a stream (it may be large and
// still growing), summarize, render. Lines that are not decisions are reported on stderr.
void decisions_report(const std::string& path, const std::string& since, const std::string& until,
                      const std::string& format, const std::string& output) {
  rp::DecisionOptions options;
  options.since = since.empty() ? -1 : parse_window_utc("since", since);
  options.until = until.empty() ? -1 : parse_window_utc("until", until);
  if (options.since >= 0 && options.until >= 0 && options.until <= options.since)
    throw Failure{"--until " + until + " is not after --since " + since};
  rp::DecisionReport report;
  const std::string source = path == "-" ? "standard input" : path;
  if (path == "-") {
    report = rp::summarize_decisions(std::cin, options);
    if (std::cin.bad()) throw Failure{"cannot read standard input"};
  } else {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) throw Failure{"cannot read " + path + ": " + std::strerror(errno)};
    if (S_ISDIR(st.st_mode)) throw Failure{"cannot read " + path + ": it is a directory"};
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Failure{"cannot read " + path + ": " + std::strerror(errno)};
    report = rp::summarize_decisions(in, options);
    if (in.bad()) throw Failure{"cannot read " + path + ": " + std::strerror(errno)};
  }
  std::string skipped;
  if (report.skipped > 0) {
    skipped = std::to_string(report.skipped) +
              (report.skipped == 1 ? " line is not a decision (" : " lines are not decisions (");
    for (std::size_t i = 0; i < report.first_skipped.size(); ++i)
      skipped += (i ? "; line " : "line ") + std::to_string(report.first_skipped[i].line) + ": " +
                 report.first_skipped[i].reason;
    skipped += static_cast<std::size_t>(report.skipped) > report.first_skipped.size() ? "; ...)" : ")";
  }
  if (report.enforced.total.decisions + report.shadow.total.decisions == 0) {
    const auto edge = [](std::int64_t t, const char* open) {
      return t >= 0 ? rp::format_utc_time(t) : std::string(open);
    };
    throw Failure{"no decisions between " + edge(options.since, "the beginning") + " and " +
                  edge(options.until, "now") + " in " + source +
                  (skipped.empty() ? std::string() : ": " + skipped)};
  }
  const std::string rendered = format == "csv"    ? rp::render_decisions_csv(report)
                               : format == "html" ? rp::render_decisions_html(report)
                               : format == "json" ? rp::render_decisions_json(report)
                                                  : rp::render_decisions_text(report);
  write_output(output, rendered);
  if (!skipped.empty())
    std::fprintf(stderr, "scaleguard report: %s: %s\n", source.c_str(), skipped.c_str());
}

// `--budgets`: every budget's standing from the ledger, and its refusals from the decision
// log (--decisions, else the policy's audit_file when it exists).
void budgets_report(const std::string& policy, const std::string& catalog, const std::string& ledger,
                    const std::string& decisions, const std::string& format, const std::string& output) {
  const BudgetSetup setup = load_budget_setup(policy, catalog, ledger);
  rp::BudgetReport report = budget_report(setup, read_ledger(setup.ledger_path), std::time(nullptr));
  const std::string log = decisions.empty() ? setup.policy->audit_file : decisions;
  if (log.empty()) {
    report.notes.push_back("no decision log (policy audit_file or --decisions): refusals are not counted");
  } else {
    std::ifstream in(log, std::ios::binary);
    if (!in) {
      if (!decisions.empty()) throw Failure{"cannot read " + log + ": " + std::strerror(errno)};
      report.notes.push_back("no decision log at " + log + " yet: refusals are not counted");
    } else {
      int skipped = 0;
      rp::add_budget_decisions(in, &report, &skipped);
      if (skipped > 0) report.notes.push_back(log + ": skipped " + std::to_string(skipped) + " line(s) that are not decisions");
    }
  }
  write_output(output, format == "csv"    ? rp::render_budgets_csv(report)
                       : format == "html" ? rp::render_budgets_html(report)
                       : format == "json" ? rp::render_budgets_json(report)
                                          : rp::render_budgets_text(report));
}


int run(int argc, char** argv) {
  po::options_description desc(
      "scaleguard report [options]\n\n"
      "One report of a window: GPU-hours, cost, waste and GPU utilisation by user, account,\n"
      "partition and day from Slurm accounting (sacct -a -D --parsable2) or a saved sacct file;\n"
      "what job_submit/scaleguard refused, rewrote and warned about in it and the GPU-hours and\n"
      "dollars that avoided (the policy's audit_file, or --decision-log); every budget's\n"
      "standing (the policy's ledger, or --ledger). --decisions FILE or --budgets: that part\n"
      "alone. Rules: docs/report.md\n\noptions");
  std::string since, until, sacct_file, decisions, decision_log, format = "text", output, policy_path,
      catalog_path, ledger_path, goodput_root;
  std::vector<std::string> goodput;
  double min_gpu_util = 50;
  desc.add_options()
      ("help,h", "this help")
      ("since", po::value(&since), "window start, YYYY-MM-DD[THH:MM[:SS]] local time "
                                   "(default: yesterday 00:00 when running sacct, open with a file)")
      ("until", po::value(&until), "window end (default: now when running sacct, open with a file)")
      ("sacct-file", po::value(&sacct_file), "read saved `sacct --parsable2` output instead of "
                                             "running sacct")
      ("decision-log", po::value(&decision_log), "the decision log for the report's decisions "
                                                 "section (default: the policy's audit_file)")
      ("min-gpu-util", po::value(&min_gpu_util), "flag jobs whose GPUs accounting shows busy less "
                                                 "than this % of the time (default 50)")
      ("decisions", po::value(&decisions), "only the decisions: summarize this decision log (JSON "
                                           "Lines; - for stdin), no accounting; times in UTC, the "
                                           "window is open unless given")
      ("format", po::value(&format), "text | csv | html | json")
      ("json", "same as --format json")
      ("output,o", po::value(&output), "write here instead of stdout")
      ("policy", po::value(&policy_path), "policy with the partitions' instance types "
                                          "(default $SCALEGUARD_POLICY, else configs/policy.ini)")
      ("catalog", po::value(&catalog_path), "price catalog overriding the policy's "
                                            "(default $SCALEGUARD_CATALOG)")
      ("budgets", "only the budgets: each budget's use, commitments, forecast and refusals, from "
                  "the budget ledger and the decision log (--decisions, else the policy's audit_file)")
      ("ledger", po::value(&ledger_path), "the budget ledger (default: the policy's [budgets] ledger)")
      ("goodput", po::value(&goodput)->multitoken(), "only the goodput of training jobs: each goodput.json "
                  "at these paths (files, or directories searched 3 levels down: checkpoint directories)")
      ("goodput-root", po::value(&goodput_root), "the page's goodput section: checkpoint directories under "
                       "this one (default $SCALEGUARD_GOODPUT_ROOT)");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(desc).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::fprintf(stderr, "scaleguard report: %s (see scaleguard report --help)\n", e.what());
    return 2;
  }
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  if (vm.count("json")) format = "json";
  if (format != "text" && format != "csv" && format != "html" && format != "json") {
    std::fprintf(stderr, "scaleguard report: --format: '%s' is not text, csv, html or json\n",
                 format.c_str());
    return 2;
  }
  if (vm.count("goodput")) {
    if (format == "csv") {
      std::fprintf(stderr, "scaleguard report: --goodput: text, html or json\n");
      return 2;
    }
    const rp::GoodputReport g = read_goodput_paths(goodput);
    write_output(output, format == "json"   ? rp::render_goodput_json(g)
                         : format == "html" ? rp::render_goodput_page_html(g)
                                            : rp::render_goodput_text(g));
    return g.jobs.empty() ? 1 : 0;
  }
  if (vm.count("budgets")) {
    for (const char* other : {"sacct-file", "since", "until", "decision-log", "min-gpu-util"})
      if (vm.count(other)) {
        std::fprintf(stderr, "scaleguard report: --%s does not go with --budgets (each budget's own period "
                             "is reported; --decisions names its decision log)\n", other);
        return 2;
      }
    try {
      budgets_report(config_file(policy_path, "SCALEGUARD_POLICY", "policy.ini"),
                     config_file(catalog_path, "SCALEGUARD_CATALOG", nullptr), ledger_path, decisions, format, output);
      return 0;
    } catch (const Failure& f) {
      std::fprintf(stderr, "scaleguard report: %s\n", f.message.c_str());
      return 1;
    }
  }
  if (vm.count("decisions")) {
    for (const char* other : {"sacct-file", "policy", "catalog", "ledger", "decision-log", "min-gpu-util"})
      if (vm.count(other)) {
        std::fprintf(stderr, "scaleguard report: --%s does not go with --decisions (the decision "
                             "log needs no accounting and no prices)\n", other);
        return 2;
      }
    if (decisions.empty()) {
      std::fprintf(stderr, "scaleguard report: --decisions: give the decision log's path, or - "
                           "for standard input\n");
      return 2;
    }
    try {
      decisions_report(decisions, since, until, format, output);
      return 0;
    } catch (const Failure& f) {
      std::fprintf(stderr, "scaleguard report: %s\n", f.message.c_str());
      return 1;
    }
  }
  try {
    const std::int64_t since_t = since.empty() ? -1 : parse_window_time("since", since);
    const std::int64_t until_t = until.empty() ? -1 : parse_window_time("until", until);
    if (since_t >= 0 && until_t >= 0 && until_t <= since_t)
      throw Failure{"--until " + until + " is not after --since " + since};

    if (!(min_gpu_util >= 0 && min_gpu_util <= 100))
      throw Failure{"--min-gpu-util: give a percentage from 0 to 100"};
    const std::string policy_file = config_file(policy_path, "SCALEGUARD_POLICY", "policy.ini");
    auto policy = load_policy(policy_file, config_file(catalog_path, "SCALEGUARD_CATALOG", nullptr));
    if (!policy) throw Failure{"policy: " + policy.error().str()};
    rp::Options options = rp::options_from_policy(**policy);
    options.min_gpu_util = min_gpu_util;

    std::string text, source;
    if (!sacct_file.empty()) {
      text = read_bounded(sacct_file);
      source = sacct_file;
      options.since = since_t;
      options.until = until_t;
    } else {
      options.until = until_t >= 0 ? until_t : local_now();
      options.since = since_t >= 0 ? since_t : (options.until / 86400 - 1) * 86400;
      if (options.until <= options.since)
        throw Failure{"--since " + rp::format_time(options.since) + " is not before the window end " +
                      rp::format_time(options.until)};
      // No -X: the steps' exit codes show which interrupted runs saved a checkpoint first;
      // their time is counted once, on the allocation line.
      Command sacct{sacct_runs_arguments(rp::format_time(options.since), rp::format_time(options.until), true,
                                         rp::kSacctReportFormat)};
      sacct.env = {"SLURM_TIME_FORMAT=standard"};   // the format parse_sacct reads, whatever the caller's environment
      sacct.max_bytes = kMaxSacctBytes;
      sacct.missing_hint = ", or save `sacct --parsable2 --format=" + std::string(rp::kSacctReportFormat) +
                           "` output elsewhere and pass --sacct-file";
      sacct.too_big_hint = ": narrow the window with --since/--until";
      text = run_capture(sacct);
      source = "sacct output";
    }
    rp::SacctSkips skips;
    auto runs = rp::parse_sacct(text, source, &skips, (*policy)->shared_gres);
    if (!runs) throw Failure{runs.error().str()};
    // One bad record (a job name with newlines in a saved file, a cut line) must not deny
    // everyone the report: it is skipped, and said so on stderr and in the report's notes.
    const std::string skipped = skips.message();
    if (!skipped.empty()) std::fprintf(stderr, "scaleguard report: %s: %s\n", source.c_str(), skipped.c_str());
    rp::Report report = rp::build_report(*runs, options);
    if (!skipped.empty()) report.notes.push_back(source + ": " + skipped);
    if (!skips.user_text_column.empty())
      report.notes.push_back(source + " has a " + skips.user_text_column +
                             " column: it is not read, but users write any bytes there, so a "
                             "record in this file may be forged by a job's text; save sacct "
                             "output with the columns in docs/report.md");
    rp::Page page;
    add_decisions(page, **policy, policy_file, decision_log,
                  options.since >= 0 ? civil_to_utc("since", options.since) : -1,
                  options.until >= 0 ? civil_to_utc("until", options.until) : -1);
    add_budgets(page, policy_file, *policy, ledger_path);
    if (goodput_root.empty())
      if (const char* env = std::getenv("SCALEGUARD_GOODPUT_ROOT")) goodput_root = env;
    if (goodput_root.empty())
      page.goodput_missing = "no goodput root: give --goodput-root DIR (checkpoint directories, each with "
                             "goodput.json) or SCALEGUARD_GOODPUT_ROOT";
    else
      page.goodput = read_goodput_paths({goodput_root});
    // An empty window is an error unless the decision log has something in it: a window where
    // every job was refused is worth its report.
    const bool decided = page.decisions && page.decisions->enforced.total.decisions + page.decisions->shadow.total.decisions > 0;
    if (report.total.runs == 0 && !decided) {
      const auto edge = [](std::int64_t t, const char* open) {
        return t >= 0 ? rp::format_time(t) : std::string(open);
      };
      throw Failure{"no jobs between " + edge(options.since, "the beginning") + " and " +
                    edge(options.until, "now") + " in " + source};
    }
    page.usage = std::move(report);
    // CSV stays the accounting table (one row shape): --decisions/--budgets --format csv give the others.
    const std::string rendered = format == "csv"    ? rp::render_csv(page.usage)
                                 : format == "html" ? rp::render_page_html(page)
                                 : format == "json" ? rp::render_page_json(page)
                                                    : rp::render_page_text(page);
    write_output(output, rendered);
    return 0;
  } catch (const Failure& f) {
    std::fprintf(stderr, "scaleguard report: %s\n", f.message.c_str());
    return 1;
  }
}

static const bool registered = register_verb(
    {"report", "GPU-hours, cost and waste from Slurm accounting (text, CSV, HTML)", run});

}  // namespace
}  // namespace scaleguard::cli
