#include "scaleguard/goodput.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace scaleguard::ckpt {
using nlohmann::json;

namespace {

double devices(const GoodputRun& r) { return r.gpus > 0 ? r.gpus : r.ranks; }

json run_json(const GoodputRun& r) {
  return {{"allocation", r.allocation}, {"host", r.host}, {"ranks", r.ranks}, {"gpus", r.gpus},
          {"start", r.start}, {"last", r.last}, {"resumed_from", r.resumed_from}, {"resumed_tier", r.resumed_tier},
          {"first_step", r.first_step}, {"last_step", r.last_step}, {"restart", r.restart},
          {"restart_s", r.restart_s}, {"after", r.after}, {"startup_s", r.startup_s}, {"restore_s", r.restore_s},
          {"productive_s", r.productive_s}, {"productive_steps", r.productive_steps}, {"lost_s", r.lost_s},
          {"lost_steps", r.lost_steps}, {"ckpt_s", r.ckpt_s}, {"overhead_s", r.overhead_s},
          {"wall_s", r.wall()}, {"state", r.state}};
}

}  // namespace

GoodputTotals GoodputFile::totals() const {
  GoodputTotals t;
  for (size_t i = 0; i < runs.size(); ++i) {
    const GoodputRun& r = runs[i];
    const bool in_job = i > 0 && r.restart == "in-job";
    const double gap = i > 0 ? r.restart_s : 0;
    t.allocated_s += r.wall() + (in_job ? gap : 0);
    t.gpu_hours_allocated += (r.wall() + (in_job ? gap : 0)) * devices(r) / 3600;
    if (i > 0 && !in_job) t.requeue_wait_s += gap;
    if (in_job) t.restart_s += gap;
    t.productive_s += r.productive_s, t.lost_s += r.lost_s, t.ckpt_s += r.ckpt_s, t.startup_s += r.startup_s;
    t.restore_s += r.restore_s, t.overhead_s += r.overhead_s;
    t.productive_steps += r.productive_steps, t.lost_steps += r.lost_steps;
    double failed = r.lost_s;
    if (r.after == "failure") {
      ++t.failures;
      failed += r.startup_s + r.restore_s + (in_job ? gap : 0);
    }
    t.failure_s += failed;
    t.gpu_hours_failures += failed * devices(r) / 3600;
  }
  return t;
}

std::string goodput_to_json(const GoodputFile& f) {
  json runs = json::array();
  for (const auto& r : f.runs) runs.push_back(run_json(r));
  const GoodputTotals t = f.totals();
  json totals = {{"allocated_s", t.allocated_s}, {"requeue_wait_s", t.requeue_wait_s},
                 {"productive_s", t.productive_s}, {"productive_steps", t.productive_steps},
                 {"lost_s", t.lost_s}, {"lost_steps", t.lost_steps}, {"ckpt_s", t.ckpt_s},
                 {"startup_s", t.startup_s}, {"restore_s", t.restore_s}, {"overhead_s", t.overhead_s},
                 {"restart_s", t.restart_s}, {"failures", t.failures}, {"failure_s", t.failure_s},
                 {"gpu_hours_allocated", t.gpu_hours_allocated}, {"gpu_hours_failures", t.gpu_hours_failures},
                 {"goodput", t.goodput()}};
  json j = {{"format", "scaleguard-goodput"}, {"version", 1}, {"job", f.job}, {"runs", runs}, {"totals", totals}};
  return j.dump(1) + "\n";
}

Result<GoodputFile> parse_goodput(const std::string& text, const std::string& origin) {
  auto fail = [&](const std::string& why) { return Error{origin + ": " + why, origin, 0, "", ""}; };
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return fail("not valid JSON");
  if (j.value("format", "") != "scaleguard-goodput") return fail("not a scaleguard goodput file");
  if (j.value("version", 0) != 1) return fail("version " + std::to_string(j.value("version", 0)) + " is not supported");
  GoodputFile f;
  try {
    f.job = j.value("job", "");
    if (!j.contains("runs") || !j["runs"].is_array()) return fail("'runs' must be an array");
    for (const auto& rj : j["runs"]) {
      GoodputRun r;
      r.allocation = rj.at("allocation").get<std::string>();
      r.host = rj.value("host", "");
      r.ranks = rj.at("ranks").get<int>();
      r.gpus = rj.at("gpus").get<int>();
      r.start = rj.at("start").get<double>();
      r.last = rj.at("last").get<double>();
      r.resumed_from = rj.at("resumed_from").get<int64_t>();
      r.resumed_tier = rj.value("resumed_tier", "");
      r.first_step = rj.at("first_step").get<int64_t>();
      r.last_step = rj.at("last_step").get<int64_t>();
      r.restart = rj.at("restart").get<std::string>();
      r.restart_s = rj.at("restart_s").get<double>();
      r.after = rj.value("after", "");
      r.startup_s = rj.at("startup_s").get<double>();
      r.restore_s = rj.at("restore_s").get<double>();
      r.productive_s = rj.at("productive_s").get<double>();
      r.productive_steps = rj.at("productive_steps").get<int64_t>();
      r.lost_s = rj.at("lost_s").get<double>();
      r.lost_steps = rj.at("lost_steps").get<int64_t>();
      r.ckpt_s = rj.at("ckpt_s").get<double>();
      r.overhead_s = rj.at("overhead_s").get<double>();
      r.state = rj.at("state").get<std::string>();
      if (r.ranks < 1 || r.gpus < 0 || r.last < r.start) return fail("a run with ranks < 1, gpus < 0 or last < start");
      f.runs.push_back(std::move(r));
    }
  } catch (const json::exception& e) {
    return fail(std::string("a run lacks a field or has the wrong type: ") + e.what());
  }
  return f;
}

Result<GoodputFile> read_goodput(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{path + ": cannot read (" + std::strerror(errno) + ")", path, 0, "", ""};
  std::ostringstream text;
  text << in.rdbuf();
  return parse_goodput(text.str(), path);
}

std::string write_goodput(const std::string& path, const GoodputFile& f) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << goodput_to_json(f);
    if (!out) return tmp + ": write failed: " + std::strerror(errno);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return "rename " + tmp + ": " + std::strerror(errno);
  return "";
}

GoodputMeter::GoodputMeter(GoodputFile previous, GoodputRun run, double process_start) : file_(std::move(previous)) {
  run.start = run.last = process_start;
  run.restart = "first";
  if (!file_.runs.empty()) {
    const GoodputRun& prev = file_.runs.back();
    run.restart = !run.allocation.empty() && run.allocation == prev.allocation ? "in-job"
                  : run.allocation.empty() && prev.allocation.empty()        ? "in-job"
                                                                               : "requeue";
    run.restart_s = std::max(0.0, process_start - prev.last);
    run.after = prev.state == "running" ? "failure" : "stop";
    for (const auto& r : file_.runs) redo_until_ = std::max(redo_until_, r.last_step);
  }
  file_.runs.push_back(std::move(run));
  mark_ = process_start;
}

void GoodputMeter::restored(double t0, double t1, int64_t step, const std::string& tier) {
  GoodputRun& r = file_.runs.back();
  r.restore_s += t1 - t0;
  r.resumed_from = step;
  r.resumed_tier = tier;
}

void GoodputMeter::ready(double t, int64_t step) {
  GoodputRun& r = file_.runs.back();
  r.startup_s = (t - r.start) - r.restore_s;
  r.first_step = r.last_step = step;
  r.last = mark_ = t;
}

void GoodputMeter::step(int64_t step, double step_s, double t_hook, double t_done) {
  GoodputRun& r = file_.runs.back();
  if (step <= redo_until_) r.lost_s += step_s, ++r.lost_steps;
  else r.productive_s += step_s, ++r.productive_steps;
  r.overhead_s += (t_hook - mark_) - step_s;
  r.ckpt_s += t_done - t_hook;
  r.last_step = step;
  r.last = mark_ = t_done;
}

void GoodputMeter::ended(const std::string& state) { file_.runs.back().state = state; }

}  // namespace scaleguard::ckpt
