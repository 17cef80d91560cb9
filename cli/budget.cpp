// `scaleguard budget sync|show|sacctmgr`: budgets per account and user (docs/policy.md,
// "Budgets"; docs/admin-guide.md, "Budgets").
//  sync      counts every budget from Slurm (squeue for the queue, then sacct for usage,
//            sacctmgr for default accounts) and replaces the ledger job_submit/scaleguard reads;
//            run by root from a timer on the slurmctld host. A failing command writes nothing.
//  show      a budget's standing from the ledger, for users.
//  sacctmgr  the same budgets as association GrpTRESMins (a backstop in slurmctld's scheduler).
#include "budget.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <cstdlib>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "scaleguard/budget_admit.h"
#include "scaleguard/budget_zone.h"
#include "scaleguard/metrics_budgets.h"
#include "scaleguard/report.h"
#include "common.h"
#include "subprocess.h"
#include "verbs.h"

namespace scaleguard::cli {

namespace po = boost::program_options;
using namespace scaleguard::budget;

namespace {

// Writes `text` to `path` whole or not at all: a temporary file beside it, fsync, rename,
// fsync of the directory. Readers (slurmctld's ledger thread) never see half a ledger.
std::string directory_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

// A ledger directory others may write lets them delete or block the ledger (a user who
// pre-creates temporary names could make every sync fail; with on_stale_ledger = open that
// turns budgets off): refused before anything is counted, as the plugin refuses a ledger
// others may write.
void check_ledger_directory(const std::string& path) {
  const std::string dir = directory_of(path);
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0) throw Failure{"cannot use the ledger directory " + dir + ": " + std::strerror(errno)};
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) || (st.st_uid != 0 && st.st_uid != geteuid()))
    throw Failure{"the ledger directory " + dir + " may be written by others (or is not owned by root or this "
                  "user): keep the ledger where only root or SlurmUser may write, e.g. /var/lib/scaleguard"};
}

void write_atomically(const std::string& path, const std::string& text) {
  const std::string dir = directory_of(path);
  // An unpredictable temporary name (mkstemp: O_EXCL, mode 0600, then 0644 below).
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = mkostemp(&tmp[0], O_CLOEXEC);
  if (fd < 0) throw Failure{"cannot create " + tmp + ": " + std::strerror(errno)};
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      close(fd), unlink(tmp.c_str());
      throw Failure{"cannot write " + tmp + ": " + std::strerror(e)};
    }
    done += static_cast<std::size_t>(n);
  }
  // The ledger is readable by everyone (`budget show`); keep the mode whatever the umask.
  if (fchmod(fd, 0644) != 0 || fsync(fd) != 0 || close(fd) != 0 || rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    unlink(tmp.c_str());
    throw Failure{"cannot replace " + path + ": " + std::strerror(e)};
  }
  if (const int d = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); d >= 0) fsync(d), close(d);
}

Command slurm_command(std::vector<std::string> args) {
  Command c{std::move(args)};
  // sacct and squeue print times in UTC (the budgets' clock) and in the format the readers
  // parse, whatever root's environment says (SLURM_TIME_FORMAT=%s made every budget unusable).
  c.env = {"TZ=UTC", "SLURM_TIME_FORMAT=standard"};
  return c;
}

// The longest line kept of sacct's or squeue's output: a record's fields past this are not
// needed to see whose it is (JobID, User, Account and Partition come first), and the line is
// then unreadable, never cut silently.
constexpr std::size_t kMaxLine = 1u << 20;

// Every run that touched a budget's window, streamed from sacct (any volume, memory bounded
// by the budgets): only the governed partitions are asked for; each run is counted as it
// arrives. A record that cannot be read marks the budgets it could be charged to unusable.
// Returns the runs counted.
long long count_runs(const BudgetSetup& s, std::int64_t since, std::int64_t until, UsageCounter* counter) {
  std::vector<std::string> args = sacct_runs_arguments(report::format_time(since), report::format_time(until), false);
  std::string partitions;
  for (const auto& p : s.policy->partitions) partitions += (partitions.empty() ? "" : ",") + p.name;
  args.push_back("--partition=" + partitions);
  report::SacctLines reader(s.policy->shared_gres);
  bool header = false;
  long long counted = 0;
  run_lines(slurm_command(args), kMaxLine, [&](const std::string& line, bool cut) {
    if (!header) {
      auto h = reader.header(line);
      if (!h) throw Failure{"sacct output: " + h.error().str()};
      header = true;
      return;
    }
    report::Run partial;
    auto run = reader.record(line, &partial);
    if (run && !cut) {
      if (!*run) return;
      const report::Run& r = **run;
      counter->add(UsedRun{r.job_id, r.account, r.user, r.partition, r.gpus, r.start,
                           r.start < 0 ? -1 : r.start + r.elapsed_s});
      ++counted;
      return;
    }
    if (run && cut) partial = run->value_or(report::Run{});
    // Whose it is, as far as the line says; a partition list none of it governed is not ours.
    bool governed = partial.partition.empty();
    for (const auto& p : s.policy->partitions)
      governed = governed || ("," + partial.partition + ",").find("," + p.name + ",") != std::string::npos;
    if (!governed) return;
    counter->unreadable(partial.account, partial.user, partial.partition,
                        "sacct: job " + (partial.job_id.empty() ? "?" : partial.job_id.substr(0, 64)) + ": " +
                            (cut ? "record longer than 1 MiB" : run.error().message));
  });
  if (!header) throw Failure{"sacct printed no header line"};
  return counted;
}

int sync(const BudgetSetup& s, bool quiet, metrics::SyncRun* counted) {
  if (s.budgets->list.empty()) throw Failure{"the policy " + s.policy->path + " has no [budget NAME] sections"};
  check_ledger_directory(s.ledger_path);
  Ledger ledger;
  // Before the queue is read. A job job_submit accepted before this moment is in the queue
  // (or done) a second later: slurmctld creates it right after job_submit returns, and a
  // waiting writer goes before squeue's read lock. The plugin drops its record of jobs
  // accepted before the snapshot.
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  ledger.snapshot_ms = ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
  ledger.snapshot = ts.tv_sec;
  // The account tree first: an account's budget counts its sub-accounts' runs and queue.
  auto tree = account_tree_arguments();
  tree.insert(tree.begin(), "sacctmgr");
  parse_account_tree(run_capture(slurm_command(tree)), &ledger);
  // Budgets in a time zone: their periods from the tz database, from the one before the
  // snapshot's (carry-over) to past the ledger's max age. The ledger keeps them: slurmctld,
  // which has no tz database, rolls such a budget over with them until the next sync.
  auto zoned = with_zone_boundaries(*s.budgets, s.policy->path, ledger.snapshot,
                                    ledger.snapshot + s.budgets->settings.max_age_s);
  if (!zoned) throw Failure{zoned.error().str()};
  const Budgets& budgets = **zoned;
  std::this_thread::sleep_for(std::chrono::seconds(1));
  UsageCounter counter(budgets, *s.policy, ledger.snapshot, &ledger.account_parents);
  long long queued = 0;
  auto squeue = squeue_arguments();
  squeue.insert(squeue.begin(), "squeue");
  run_lines(slurm_command(squeue), kMaxLine, [&](const std::string& line, bool cut) {
    QueuedJob q;
    if (line.empty() || !read_squeue_line(line, *s.policy, &q)) return;
    if (cut) q.unreadable = "line longer than 1 MiB";
    counter.add(q);
    ++queued;
  });
  const long long runs = count_runs(s, earliest_start(budgets, ledger.snapshot), ledger.snapshot, &counter);
  parse_default_accounts(run_capture(slurm_command({"sacctmgr", "-n", "-P", "show", "user", "format=User,DefaultAccount"})),
                         &ledger);
  parse_associations(run_capture(slurm_command({"sacctmgr", "-n", "-P", "show", "assoc", "format=User,Account"})), &ledger);
  counter.finish(&ledger);
  for (const auto& [name, e] : ledger.entries)
    if (!e.unusable.empty()) ledger.notes.push_back("budget " + name + " is unusable until a sync reads it whole: " + e.unusable);
  ledger.written = std::time(nullptr);
  write_atomically(s.ledger_path, format_ledger(ledger));
  counted->budgets = static_cast<int>(ledger.entries.size());
  for (const auto& [name, e] : ledger.entries) counted->unusable += e.unusable.empty() ? 0 : 1;
  for (const auto& n : ledger.notes) std::fprintf(stderr, "scaleguard budget sync: %s\n", n.c_str());
  if (quiet) return 0;
  std::printf("ledger %s: %zu budget(s), %lld queued job(s), %lld run(s), counted %s in %lld s\n", s.ledger_path.c_str(),
              ledger.entries.size(), queued, runs, format_instant(ledger.snapshot).c_str(),
              static_cast<long long>(ledger.written - ledger.snapshot));
  for (const auto& b : s.budgets->list) {
    if (!ledger.entries.count(b.name)) continue;   // not counted: a note says why
    const auto& e = ledger.entries.at(b.name);
    std::printf("  %s: used %s, committed %s, held %s of %s%s\n", b.name.c_str(), format_amount(b.unit, e.used).c_str(),
                format_amount(b.unit, e.committed).c_str(), format_amount(b.unit, e.liens).c_str(),
                format_amount(b.unit, b.limit + e.carry_in).c_str(), e.unusable.empty() ? "" : " (UNUSABLE: see above)");
  }
  return 0;
}

std::string invoking_user() {
  const passwd* pw = getpwuid(getuid());
  return pw ? pw->pw_name : std::to_string(getuid());
}

// --metrics-file: the sync's own Prometheus textfile (metrics/), written after every run, a
// failed one too; its counters carry on from the file it replaces.
void write_sync_metrics(const std::string& path, metrics::SyncRun run, double started_s) {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  run.duration_s = std::max(0.0, ts.tv_sec + ts.tv_nsec / 1e9 - started_s);
  std::string previous;
  if (std::ifstream in(path); in) {
    previous.assign(64 << 10, '\0');
    in.read(&previous[0], static_cast<std::streamsize>(previous.size()));
    previous.resize(static_cast<std::size_t>(in.gcount()));
  }
  run.runs_total = metrics::read_sample(previous, "scaleguard_budget_sync_runs_total", 0) + 1;
  run.failures_total = metrics::read_sample(previous, "scaleguard_budget_sync_failures_total", 0) + (run.ok ? 0 : 1);
  run.last_success = run.ok ? run.started
                            : static_cast<std::int64_t>(metrics::read_sample(previous, "scaleguard_budget_sync_last_success_timestamp_seconds", 0));
  if (!run.ok) {   // the last success's counts stay
    run.budgets = static_cast<int>(metrics::read_sample(previous, "scaleguard_budget_sync_budgets", 0));
    run.unusable = static_cast<int>(metrics::read_sample(previous, "scaleguard_budget_sync_unusable_budgets", 0));
  }
  if (const std::string error = metrics::write_textfile(path, metrics::render_sync(run)); !error.empty())
    std::fprintf(stderr, "scaleguard budget sync: metrics not written: %s\n", error.c_str());
}

int show(const BudgetSetup& s, std::string account, std::string user, bool json) {
  const Ledger ledger = read_ledger(s.ledger_path);
  const std::int64_t now = std::time(nullptr);
  for (char& c : account) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (account.empty() && user.empty()) user = invoking_user();
  // A user's own budgets: theirs, their accounts', theirs within an account.
  std::vector<std::string> accounts;
  if (!account.empty()) accounts.push_back(account);
  else if (auto it = ledger.accounts.find(user); it != ledger.accounts.end()) accounts = it->second;
  // And the accounts above them: their budgets count these accounts' jobs too.
  for (std::size_t i = 0, n = accounts.size(); i < n; ++i)
    for (const auto& a : enclosing_accounts(&ledger.account_parents, accounts[i]))
      if (std::find(accounts.begin(), accounts.end(), a) == accounts.end()) accounts.push_back(a);
  auto r = budget_report(s, ledger, now);
  std::vector<report::BudgetLine> kept;
  for (std::size_t i = 0; i < s.budgets->list.size(); ++i) {
    const Budget& b = s.budgets->list[i];
    const bool account_ok = b.account.empty() || std::find(accounts.begin(), accounts.end(), b.account) != accounts.end();
    const bool user_ok = b.user.empty() || user.empty() || b.user == user;
    if (account_ok && user_ok && (!b.account.empty() || !user.empty())) kept.push_back(r.lines[i]);
  }
  r.lines = kept;
  if (json) {
    std::cout << report::render_budgets_json(r);
    return 0;
  }
  if (r.lines.empty()) {
    std::printf("no budget counts %s\n", user.empty() ? ("account " + account).c_str() : ("user " + user).c_str());
    return 0;
  }
  const std::string problem = [&] {
    Gate gate(0);
    gate.set_budgets(s.budgets, s.policy);
    gate.set_ledger(std::make_shared<Ledger>(ledger), "");
    return gate.ledger_problem(now);
  }();
  std::cout << report::render_budgets_text(r);
  std::printf("\njobs accepted since %s are not in these numbers%s%s\n", format_instant(ledger.snapshot).c_str(),
              problem.empty() ? "" : "; ", problem.c_str());
  return 0;
}

// GrpTRESMins for the budgets Slurm's associations can hold: GPU-minutes of an account, or of
// a user within an account, at the reject threshold plus grace. Dollar budgets at the cheapest
// GPU-hour they count (the backstop must never stop a job scaleguard let in).
int sacctmgr(const BudgetSetup& s, bool apply) {
  std::printf("# scaleguard budgets as association limits (a backstop: see docs/admin-guide.md, \"Budgets\").\n"
              "# Needs AccountingStorageEnforce=limits,safe and PriorityType=priority/multifactor;\n"
              "# usage decays with PriorityDecayHalfLife (set 0) and resets for every association at once\n"
              "# with PriorityUsageResetPeriod, not on each budget's own period; jobs past a limit pend\n"
              "# (AssocGrpGRESMinutes) instead of being told at submission.\n");
  std::vector<std::vector<std::string>> commands;
  for (const auto& b : s.budgets->list) {
    if (b.account.empty()) {
      std::printf("# %s: a user's budget across accounts has no association limit; skipped\n", b.name.c_str());
      continue;
    }
    if (b.shadow) {
      std::printf("# %s: in shadow mode (a limit would enforce it); skipped\n", b.name.c_str());
      continue;
    }
    double reject = 0;
    for (const auto& t : b.thresholds)
      if (t.act == Act::reject) reject = t.percent / 100;
    if (reject == 0) {
      std::printf("# %s: no reject threshold; skipped\n", b.name.c_str());
      continue;
    }
    double gpu_hours = b.limit * (reject + b.grace);
    if (b.unit == Unit::usd) {
      double cheapest = -1;
      for (const auto& p : s.policy->partitions) {
        const double price = usd_per_gpu_hour(*s.policy, p.name);
        if (b.counts(p.name) && price > 0 && (cheapest < 0 || price < cheapest)) cheapest = price;
      }
      if (cheapest <= 0) continue;
      gpu_hours /= cheapest;
      std::printf("# %s: %s at $%.4f per GPU-hour (its cheapest partition)\n", b.name.c_str(),
                  format_amount(b.unit, b.limit).c_str(), cheapest);
    }
    const std::string tres = "GrpTRESMins=gres/gpu=" + std::to_string(static_cast<long long>(std::ceil(gpu_hours * 60)));
    if (b.user.empty())
      commands.push_back({"sacctmgr", "-i", "modify", "account", "where", "name=" + b.account, "set", tres});
    else
      commands.push_back({"sacctmgr", "-i", "modify", "user", "where", "name=" + b.user, "account=" + b.account, "set", tres});
  }
  for (const auto& c : commands) {
    std::string line;
    for (const auto& a : c) line += (line.empty() ? "" : " ") + a;
    std::printf("%s\n", line.c_str());
    if (apply) run_capture(Command{c});
  }
  return 0;
}

int run(int argc, char** argv) {
  const char* usage =
      "usage: scaleguard budget sync [--policy FILE] [--ledger FILE] [--metrics-file FILE.prom] [--quiet]\n"
      "       scaleguard budget show [--account A] [--user U] [--json]\n"
      "       scaleguard budget sacctmgr [--apply]";
  po::options_description desc("scaleguard budget options");
  std::string action, policy, catalog, ledger, account, user, metrics_file;
  desc.add_options()("help,h", "this help")
      ("policy", po::value(&policy), "policy with the budgets (default $SCALEGUARD_POLICY, else configs/policy.ini)")
      ("catalog", po::value(&catalog), "price catalog overriding the policy's (default $SCALEGUARD_CATALOG)")
      ("ledger", po::value(&ledger), "ledger file (default: the policy's [budgets] ledger)")
      ("quiet,q", "sync: print nothing but problems")
      ("metrics-file", po::value(&metrics_file), "sync: also write this Prometheus textfile (*.prom), a failed sync too")
      ("account", po::value(&account), "show: the budgets of this account")
      ("user", po::value(&user), "show: the budgets of this user (default: you)")
      ("json", "show: JSON")
      ("apply", "sacctmgr: run the commands instead of printing them only")
      ("action", po::value(&action), "sync, show or sacctmgr");
  po::positional_options_description pos;
  pos.add("action", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(desc).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::fprintf(stderr, "scaleguard budget: %s\n%s\n", e.what(), usage);
    return 2;
  }
  if (vm.count("help")) {
    std::cout << usage << "\n\n" << desc << "\n";
    return 0;
  }
  if (action != "sync" && action != "show" && action != "sacctmgr") {
    std::fprintf(stderr, "%s\n", usage);
    return 2;
  }
  if (!metrics_file.empty()) {
    if (action != "sync") return std::fprintf(stderr, "scaleguard budget: --metrics-file is for sync\n%s\n", usage), 2;
    if (std::string why = metrics::check_textfile_path(metrics_file); !why.empty())
      return std::fprintf(stderr, "scaleguard budget sync: --metrics-file %s\n", why.c_str()), 2;
  }
  timespec started{};
  clock_gettime(CLOCK_REALTIME, &started);
  metrics::SyncRun run;
  run.started = started.tv_sec;
  auto record = [&](bool ok) {
    run.ok = ok;
    if (!metrics_file.empty()) write_sync_metrics(metrics_file, run, started.tv_sec + started.tv_nsec / 1e9);
  };
  try {
    const auto setup = load_budget_setup(config_file(policy, "SCALEGUARD_POLICY", "policy.ini"),
                                         config_file(catalog, "SCALEGUARD_CATALOG", nullptr), ledger);
    if (action == "sync") {
      const int rc = sync(setup, vm.count("quiet"), &run);
      record(rc == 0);
      return rc;
    }
    if (action == "show") return show(setup, account, user, vm.count("json"));
    return sacctmgr(setup, vm.count("apply"));
  } catch (const Failure& f) {
    std::fprintf(stderr, "scaleguard budget %s: %s\n", action.c_str(), f.message.c_str());
    if (action == "sync") record(false);
    return 1;
  }
}

const bool registered =
    register_verb({"budget", "budgets per account and user: sync the ledger, show, sacctmgr limits", run});

}  // namespace

BudgetSetup load_budget_setup(const std::string& policy_path, const std::string& catalog_path,
                              const std::string& ledger_override) {
  auto policy = load_policy(policy_path, catalog_path);
  if (!policy) throw Failure{policy.error().str()};
  auto loaded = load_budgets(policy_path, **policy);
  if (!loaded) throw Failure{loaded.error().str()};
  // Zoned budgets' periods around now from the tz database (what `show` and `report` print for
  // a budget the ledger has not counted; the sync works out its own from its snapshot).
  const std::int64_t now = std::time(nullptr);
  auto budgets = with_zone_boundaries(**loaded, policy_path, now, now + (*loaded)->settings.max_age_s);
  if (!budgets) throw Failure{budgets.error().str()};
  BudgetSetup s{policy.value(), budgets.value(), ledger_override.empty() ? (*budgets)->settings.ledger : ledger_override};
  if (s.ledger_path.empty()) throw Failure{"the policy " + policy_path + " names no budget ledger ([budgets] ledger)"};
  return s;
}

Ledger read_ledger(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Failure{"cannot read the budget ledger " + path + ": " + std::strerror(errno) +
                         " (written by `scaleguard budget sync`)"};
  std::string text((64u << 20) + 1, '\0');
  in.read(&text[0], static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  auto l = parse_ledger(text);
  if (!l) throw Failure{path + ": " + l.error().message};
  return std::move(l).value();
}

report::BudgetReport budget_report(const BudgetSetup& s, const Ledger& ledger, std::int64_t now) {
  report::BudgetReport r;
  r.snapshot = ledger.snapshot;
  r.ledger = s.ledger_path;
  r.notes = ledger.notes;
  for (const auto& b : s.budgets->list) {
    const auto it = ledger.entries.find(b.name);
    const LedgerEntry* e = it != ledger.entries.end() && it->second.identity == b.identity() ? &it->second : nullptr;
    const Standing st = standing_of(b, e, now, 0);
    report::BudgetLine l;
    l.name = b.name;
    l.scope = b.scope();
    l.usd = b.unit == Unit::usd;
    l.shadow = b.shadow;
    l.period = to_string(b.period.cycle);
    l.start = st.window.start, l.end = st.window.end;
    l.counted = e != nullptr;
    l.total = st.total;
    l.used = st.used, l.committed = st.committed, l.held = st.liens;
    l.running = st.running, l.pending = st.pending;
    const double burn = e && !st.rolled_over ? e->burn_per_hour : 0;
    l.forecast = st.used + burn * std::max<std::int64_t>(0, st.window.end - std::max(ledger.snapshot, st.window.start)) / 3600.0;
    r.lines.push_back(l);
  }
  return r;
}

}  // namespace scaleguard::cli
