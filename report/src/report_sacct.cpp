// Reading sacct --parsable2 text and the plan summary job_submit/scaleguard leaves in the
// job's AdminComment. Everything is bounded and locale-free. A bad header is an Error; a bad
// record is skipped and counted (SacctSkips), so one job cannot deny everyone the report.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "scaleguard/report.h"

namespace scaleguard::report {

const char* const kSacctFormat =
    "JobID,User,Account,Partition,State,Start,End,ElapsedRaw,AllocTRES,ReqTRES,"
    "NNodes,ExitCode,NodeList,AdminComment";
const char* const kSacctReportFormat =
    "JobID,User,Account,Partition,State,Start,End,ElapsedRaw,AllocTRES,ReqTRES,"
    "NNodes,ExitCode,NodeList,TRESUsageInAve,AdminComment";
const char kSacctDelimiter = '\x1f';

namespace {

constexpr std::int64_t kDay = 86400;
// A GPU count above this is a parse error, not a cluster (keeps products far from overflow).
constexpr long kMaxGpus = 1000000;
// 100 years of elapsed time: anything larger is corrupt accounting data.
constexpr long long kMaxElapsed = 100LL * 366 * kDay;

// Days since 1970-01-01 of a proleptic Gregorian date (era arithmetic, valid for any year).
std::int64_t days_from_civil(int y, int m, int d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int yoe = static_cast<int>(y - era * 400);
  const int doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

void civil_from_days(std::int64_t z, int& y, int& m, int& d) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int doe = static_cast<int>(z - era * 146097);
  const int yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp < 10 ? mp + 3 : mp - 9;
  y = static_cast<int>(yoe + era * 400) + (m <= 2);
}

bool is_leap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

// Reads exactly `width` digits at text[pos].
bool digits(const std::string& text, std::size_t pos, int width, int& out) {
  if (pos + width > text.size()) return false;
  out = 0;
  for (int i = 0; i < width; ++i) {
    const char c = text[pos + i];
    if (c < '0' || c > '9') return false;
    out = out * 10 + (c - '0');
  }
  return true;
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::size_t begin = 0;
  for (;;) {
    const auto at = text.find(sep, begin);
    parts.push_back(text.substr(begin, at == std::string::npos ? std::string::npos : at - begin));
    if (at == std::string::npos) return parts;
    begin = at + 1;
  }
}

// Non-negative integer, all digits, at most `max`.
bool parse_uint(const std::string& text, long long max, long long& out) {
  if (text.empty() || text.size() > 18) return false;
  out = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    out = out * 10 + (c - '0');
  }
  return out <= max;
}

// GPUs in a TRES list, by the policy's definition (gres/gpu, and shard/mps per
// shared_gpu_gres): planner's parse_held_gpus, shared with the budget sync.
Result<int> gpus_in_tres(const std::string& tres, const SharedGpuGres& shared) {
  if (tres.empty()) return 0;
  auto n = parse_held_gpus(tres, shared);
  if (!n) return Error{n.error().message, "", 0, "", ""};
  if (*n > kMaxGpus) return Error{"GPU count " + std::to_string(*n) + " is absurd", "", 0, "", ""};
  return *n;
}

// gres/gpuutil in a step's TRESUsageInAve ("cpu=00:01:02,gres/gpumem=1.50G,gres/gpuutil=87,
// mem=..."): the step's mean GPU utilisation in percent; -1 when the list has no gpuutil.
// Slurm prints it as a plain integer; a unit suffix (K, M: convert_num_unit in older releases)
// is read too. A value that is not a number is -1, not an error: this field only informs.
double gpuutil_in(const std::string& tres) {
  static const std::string key = "gres/gpuutil=";
  std::size_t at = 0;
  while ((at = tres.find(key, at)) != std::string::npos && at > 0 && tres[at - 1] != ',') at += key.size();
  if (at == std::string::npos) return -1;
  const std::string value = tres.substr(at + key.size(), tres.find(',', at) - at - key.size());
  if (value.empty() || value.size() > 24 || !std::isdigit(static_cast<unsigned char>(value[0]))) return -1;
  char* rest = nullptr;
  double v = std::strtod(value.c_str(), &rest);
  const std::string unit = rest;
  if (unit == "K") v *= 1e3;
  else if (unit == "M") v *= 1e6;
  else if (!unit.empty()) return -1;
  return v >= 0 && v < 1e9 ? v : -1;
}

// sacct prints "Unknown" (running: End) or "None" (pending: Start) for times it lacks.
Result<std::int64_t> optional_time(const std::string& text) {
  if (text.empty() || text == "Unknown" || text == "None") return std::int64_t{-1};
  return parse_time(text);
}

}  // namespace

Result<std::int64_t> parse_time(const std::string& text) {
  const Error bad{"'" + text + "' is not a time", "", 0, "",
                  "use YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS], as sacct prints it"};
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  if (!digits(text, 0, 4, y) || text.size() < 10 || text[4] != '-' || !digits(text, 5, 2, mo) ||
      text[7] != '-' || !digits(text, 8, 2, d))
    return bad;
  if (text.size() > 10) {
    if ((text[10] != 'T' && text[10] != ' ') || !digits(text, 11, 2, h) || text.size() < 16 ||
        text[13] != ':' || !digits(text, 14, 2, mi))
      return bad;
    if (text.size() > 16 && (text.size() != 19 || text[16] != ':' || !digits(text, 17, 2, s)))
      return bad;
  }
  static const int month_days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (y < 1970 || mo < 1 || mo > 12 || d < 1 ||
      d > month_days[mo - 1] + (mo == 2 && is_leap(y)) || h > 23 || mi > 59 || s > 59)
    return Error{"'" + text + "' is not a valid date and time", "", 0, "", ""};
  return days_from_civil(y, mo, d) * kDay + h * 3600 + mi * 60 + s;
}

std::string format_time(std::int64_t t) {
  int y, m, d;
  const std::int64_t day = t >= 0 ? t / kDay : (t - kDay + 1) / kDay;
  civil_from_days(day, y, m, d);
  const int sec = static_cast<int>(t - day * kDay);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d", y, m, d, sec / 3600,
                sec / 60 % 60, sec % 60);
  return buf;
}

std::string format_day(std::int64_t t) { return format_time(t).substr(0, 10); }

namespace {

// The columns found in a header line, by name (-1 = absent).
SacctColumns find_columns(const std::vector<std::string>& header) {
  SacctColumns c;
  c.count = header.size();
  for (std::size_t i = 0; i < header.size(); ++i) {
    const std::string name = lower(header[i]);
    const int at = static_cast<int>(i);
    if (name == "jobid") c.job = at;
    else if (name == "jobname") c.name = at;
    else if (name == "user") c.user = at;
    else if (name == "account") c.account = at;
    else if (name == "partition") c.partition = at;
    else if (name == "state") c.state = at;
    else if (name == "start") c.start = at;
    else if (name == "end") c.end = at;
    else if (name == "elapsedraw") c.elapsed = at;
    else if (name == "alloctres") c.alloc = at;
    else if (name == "reqtres") c.req = at;
    else if (name == "nnodes") c.nodes = at;
    else if (name == "exitcode") c.exit = at;
    else if (name == "nodelist") c.nodelist = at;
    else if (name == "admincomment") c.admin_comment = at;
    else if (name == "comment") c.comment = at;
    else if (name == "tresusageinave") c.tres_usage_ave = at;
  }
  return c;
}

// The first required column the header lacks; "" when it has them all.
std::string missing_column(const SacctColumns& c) {
  const std::pair<int, const char*> required[] = {
      {c.job, "JobID"},     {c.user, "User"},         {c.partition, "Partition"},
      {c.state, "State"},   {c.start, "Start"},       {c.end, "End"},
      {c.elapsed, "ElapsedRaw"}, {c.alloc, "AllocTRES"}};
  for (const auto& [col, name] : required)
    if (col < 0) return name;
  return "";
}

// The identity fields of a record, as far as the line has them (for a caller that must say
// which budgets an unreadable record could touch).
void read_identity(const std::vector<std::string>& fields, const SacctColumns& c, Run* run) {
  const auto get = [&](int col) { return col >= 0 && static_cast<std::size_t>(col) < fields.size() ? fields[col] : ""; };
  run->job_id = get(c.job), run->user = get(c.user), run->account = get(c.account), run->partition = get(c.partition);
}

// One record with exactly the header's fields. A step record ("123.batch") is returned with
// an empty state: the caller decides what it tells (parse_sacct: checkpointed stops).
// Errors name the field (Error::field) and why.
Result<Run> read_run(const std::vector<std::string>& fields, const SacctColumns& c, const SharedGpuGres& shared) {
  const auto get = [&](int col) { return col >= 0 ? fields[col] : std::string(); };
  const auto bad = [](const std::string& field, const std::string& message) {
    return Error{message, "", 0, field, ""};
  };
  Run run;
  read_identity(fields, c, &run);
  if (run.job_id.empty()) return bad("JobID", "is empty");
  if (run.job_id.find('.') != std::string::npos) {
    run.exit_code = get(c.exit);
    run.gpu_util = gpuutil_in(get(c.tres_usage_ave));
    return run;
  }
  const std::string state = get(c.state);
  run.state = state.substr(0, state.find(' '));
  if (run.state.empty()) return bad("State", "is empty");
  auto start = optional_time(get(c.start));
  if (!start) return bad("Start", start.error().message);
  run.start = *start;
  auto end = optional_time(get(c.end));
  if (!end) return bad("End", end.error().message);
  run.end = *end;
  long long elapsed = 0;
  if (!parse_uint(get(c.elapsed), kMaxElapsed, elapsed))
    return bad("ElapsedRaw", "'" + get(c.elapsed) + "' is not a number of seconds");
  run.elapsed_s = elapsed;
  if (elapsed > 0 && run.start < 0) return bad("Start", "is unknown but the job ran " + std::to_string(elapsed) + " s");
  auto alloc = gpus_in_tres(get(c.alloc), shared);
  if (!alloc) return bad("AllocTRES", alloc.error().message);
  run.gpus = *alloc;
  // A job cancelled while pending may carry Start = End (Slurm stamps both at the cancel)
  // but was never allocated anything: it did not start.
  if (elapsed == 0 && get(c.alloc).empty()) run.start = -1;
  auto req = gpus_in_tres(get(c.req), shared);
  if (!req) return bad("ReqTRES", req.error().message);
  run.gpus_requested = *req;
  if (c.nodes >= 0 && !get(c.nodes).empty()) {
    long long n = 0;
    if (!parse_uint(get(c.nodes), 1000000, n)) return bad("NNodes", "'" + get(c.nodes) + "' is not a node count");
    run.nodes = static_cast<int>(n);
  }
  run.exit_code = get(c.exit);
  run.node_list = get(c.nodelist);
  run.admin_comment = get(c.admin_comment);
  return run;
}

}  // namespace

Result<std::vector<Run>> parse_sacct(const std::string& text, const std::string& source,
                                     SacctSkips* skips, const SharedGpuGres& shared) {
  auto fail = [&](int line, const std::string& field, const std::string& message,
                  const std::string& hint = "") {
    return Error{message, source, line, field, hint};
  };
  SacctSkips local;
  SacctSkips& skipped = skips ? *skips : local;
  skipped = SacctSkips{};
  // Skips lines first..last as one malformed record.
  auto skip = [&](int first, int last, const std::string& reason) {
    ++skipped.count;
    if (skipped.first_lines.size() < 5)
      skipped.first_lines.push_back(first == last ? std::to_string(first)
                                                  : std::to_string(first) + "-" + std::to_string(last));
    if (skipped.first_reason.empty())
      skipped.first_reason = "line " + std::to_string(first) + ": " + reason;
  };

  // Split into lines first: a record is judged with the lines after it in view.
  struct Line { int no; std::string text; };
  std::vector<Line> lines;
  {
    int line_no = 0;
    std::size_t pos = 0;
    while (pos < text.size()) {
      auto eol = text.find('\n', pos);
      if (eol == std::string::npos) eol = text.size();
      std::string line = text.substr(pos, eol - pos);
      pos = eol + 1;
      ++line_no;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") == std::string::npos) continue;
      lines.push_back({line_no, std::move(line)});
    }
  }
  if (lines.empty())
    return fail(0, "", "is empty: no sacct header line",
                "run sacct --parsable2 --format=" + std::string(kSacctFormat));

  // The header. The delimiter is told by it: the unit separator (0x1f) that `scaleguard
  // report` asks sacct for, or '|' (sacct's default) in a file saved by hand or before.
  const char delim = lines[0].text.find(kSacctDelimiter) != std::string::npos ? kSacctDelimiter : '|';
  const std::vector<std::string> header = split(lines[0].text, delim);
  const SacctColumns cols = find_columns(header);
  const std::size_t n_cols = cols.count;
  if (const std::string missing = missing_column(cols); !missing.empty())
    return fail(lines[0].no, missing, "header has no " + missing + " column",
                "run sacct --parsable2 --format=" + std::string(kSacctFormat));
  // JobName and Comment: what users write, never read (a saved file may have them).
  if (cols.name >= 0) skipped.user_text_column = header[cols.name];
  else if (cols.comment >= 0) skipped.user_text_column = header[cols.comment];
  const bool user_text = cols.name >= 0 || cols.comment >= 0;

  std::vector<Run> runs;
  for (std::size_t li = 1; li < lines.size(); ++li) {
    const int line_no = lines[li].no;
    auto fields = split(lines[li].text, delim);

    // A record must have exactly the header's fields. Slurm 22.05 puts no limit on the bytes
    // of a job name or Comment (seen: '|', 0x1f and newlines all reach sacct's output
    // unescaped), so in a file with such a column a field can hold the delimiter (too many
    // fields) or a newline (the record's first and last lines have too few, and every line
    // between them, which may look like a whole record, is text inside the field). Such a
    // record is skipped, never rejoined. The one exception: a '|' file whose only free-text
    // column (JobName, Comment, AdminComment) is its last one, where a '|' in that text is
    // joined back.
    if (fields.size() > n_cols) {
      const int last = static_cast<int>(n_cols) - 1;
      const int free_text = (cols.name >= 0) + (cols.comment >= 0) + (cols.admin_comment >= 0);
      const bool last_is_free_text =
          cols.name == last || cols.comment == last || cols.admin_comment == last;
      if (delim != '|' || free_text != 1 || !last_is_free_text) {
        skip(line_no, line_no, "has " + std::to_string(fields.size()) + " fields, header has " +
                                   std::to_string(n_cols) + " (a field holds the delimiter)");
        continue;
      }
      std::string joined = fields[last];
      for (std::size_t i = n_cols; i < fields.size(); ++i) joined += "|" + fields[i];
      fields.resize(n_cols);
      fields[last] = joined;
    }
    if (fields.size() < n_cols) {
      // With a user-written column, a short line may be the head of a record whose text holds
      // newlines: the record runs to the next short line that, joined with it and the lines
      // between, reaches the header's field count (its tail). Every line from head to tail is
      // skipped as one record. Without such a tail the short line is skipped alone.
      std::size_t tail = li;
      if (user_text) {
        std::size_t joined = fields.size();
        for (std::size_t k = li + 1; k < lines.size(); ++k) {
          const std::size_t f = split(lines[k].text, delim).size();
          joined += f - 1;
          if (f < n_cols && joined >= n_cols) {
            tail = k;
            break;
          }
        }
      }
      skip(line_no, lines[tail].no,
           "has " + std::to_string(fields.size()) + " fields, header has " +
               std::to_string(n_cols) +
               (tail > li ? " (a record whose text holds newlines)" : " (a truncated line?)"));
      li = tail;
      continue;
    }

    auto run = read_run(fields, cols, shared);
    if (!run) {
      skip(line_no, line_no, run.error().field + ": " + run.error().message);
      continue;
    }
    // Steps (123.batch, 123.0, 123.extern) appear without -X, after their run's allocation
    // line, which covers their GPU time. A step that exited with the runner's "stopped after
    // a checkpoint" code tells that the run's work was saved before it ended.
    // Their TRESUsageInAve carries the GPU utilisation accounting recorded, if any.
    if (run->state.empty()) {
      const std::string& id = run->job_id;
      if (!runs.empty() && runs.back().job_id == id.substr(0, id.find('.'))) {
        if (run->exit_code == std::to_string(kExitStoppedAfterCheckpoint) + ":0") runs.back().checkpointed_stop = true;
        runs.back().gpu_util = std::max(runs.back().gpu_util, run->gpu_util);
      }
      continue;
    }
    runs.push_back(std::move(run).value());
    runs.back().line = line_no;
  }
  return runs;
}

Result<bool> SacctLines::header(const std::string& line) {
  delim_ = line.find(kSacctDelimiter) != std::string::npos ? kSacctDelimiter : '|';
  cols_ = find_columns(split(line, delim_));
  const std::string missing = missing_column(cols_);
  if (!missing.empty())
    return Error{"header has no " + missing + " column", "", 0, missing,
                 "run sacct --parsable2 --format=" + std::string(kSacctFormat)};
  if (cols_.name >= 0 || cols_.comment >= 0)
    return Error{"has a column users write (JobName or Comment): a record may span lines", "", 0, "", ""};
  return true;
}

Result<std::optional<Run>> SacctLines::record(const std::string& line, Run* partial) {
  const auto fields = split(line, delim_);
  if (fields.size() == 1 && line.find_first_not_of(" \t\r") == std::string::npos) return std::optional<Run>{};
  if (fields.size() != cols_.count) {
    if (partial) read_identity(fields, cols_, partial);
    return Error{"has " + std::to_string(fields.size()) + " fields, header has " + std::to_string(cols_.count), "",
                 0, "", ""};
  }
  auto run = read_run(fields, cols_, shared_);
  if (!run) {
    if (partial) read_identity(fields, cols_, partial);
    return Error{run.error().field + ": " + run.error().message, "", 0, run.error().field, ""};
  }
  if (run->state.empty()) return std::optional<Run>{};   // a step: its run's line covers it
  return std::optional<Run>{std::move(run).value()};
}

std::string SacctSkips::message() const {
  if (count == 0) return "";
  std::string where;
  for (const auto& l : first_lines) where += (where.empty() ? "" : ", ") + l;
  return "skipped " + std::to_string(count) + " malformed sacct record" + (count == 1 ? "" : "s") +
         " (first at lines " + where + "; " + first_reason + ")";
}

namespace {

// "1800", "1800s", "30m", "0.5h" -> seconds; -1 when malformed.
std::int64_t duration_seconds(const std::string& text) {
  if (text.empty() || text.size() > 24) return -1;
  char* rest = nullptr;
  const double v = std::strtod(text.c_str(), &rest);
  const std::string unit = rest;
  double scale = 0;
  if (unit.empty() || unit == "s") scale = 1;
  else if (unit == "m" || unit == "min") scale = 60;
  else if (unit == "h") scale = 3600;
  if (scale == 0 || !(v >= 0) || v * scale > 1e9) return -1;
  return static_cast<std::int64_t>(v * scale + 0.5);
}

}  // namespace

PlanNote parse_plan_note(const std::string& admin_comment) {
  PlanNote note;
  const auto at = admin_comment.rfind("scaleguard:");
  if (at == std::string::npos) return note;
  note.present = true;
  std::string token;
  const std::string body = admin_comment.substr(at + 11) + " ";
  for (char c : body) {
    if (c != ' ' && c != '\t' && c != ',' && c != ';') {
      token += c;
      continue;
    }
    if (token.empty()) continue;
    const auto eq = token.find('=');
    const std::string key = lower(token.substr(0, eq == std::string::npos ? token.size() : eq));
    const std::string value = eq == std::string::npos ? "" : token.substr(eq + 1);
    token.clear();
    if (eq == std::string::npos) {
      // decide() writes "scaleguard: ACTION: STRATEGY gpus=..": bare words, maybe with ':'.
      std::string word = key;
      if (!word.empty() && word.back() == ':') word.pop_back();
      if (word == "accept" || word == "warn" || word == "rewrite" || word == "reject")
        note.action = word;
      else if (word == "single" || word == "ddp" || word == "zero" || word == "pipeline" ||
               word == "tensor" || word == "hybrid")
        note.strategy = word;
      continue;
    }
    if (key == "[sg") {
      // "[sg=ID]" or "[sg=ID;gj=16;...]" (job_submit's record of the request follows the id,
      // its key=value items split off at ';' as tokens of their own and ignored): the id of
      // the decision in job_submit/scaleguard's decision log.
      std::string id = value;
      if (!id.empty() && id.back() == ']') id.pop_back();
      if (!id.empty() && id.size() <= 128) note.decision_id = id;
    } else if (key == "action") {
      note.action = lower(value);
    } else if (key == "strategy" || key == "plan") {
      note.strategy = value;
    } else if (key == "gpus") {
      long long n = 0;
      if (parse_uint(value, kMaxGpus, n)) note.gpus = static_cast<int>(n);
    } else if (key == "comm" || key == "comm_ratio") {
      char* rest = nullptr;
      double v = std::strtod(value.c_str(), &rest);
      if (rest && *rest == '%') { v /= 100; ++rest; }
      if (!value.empty() && rest && *rest == '\0' && v >= 0 && v < 1e6) note.comm_ratio = v;
    } else if (key == "ckpt" || key == "ckpt_interval" || key == "ckpt_interval_s") {
      const auto s = duration_seconds(value);
      if (s > 0) note.ckpt_interval_s = s;
    } else if (key == "ckpt_interval_min") {
      const auto s = duration_seconds(value + "m");
      if (s > 0) note.ckpt_interval_s = s;
    }
  }
  return note;
}

}  // namespace scaleguard::report
