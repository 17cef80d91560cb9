// prep/scaleguard (prep.h): every new run of a job checked against its budgets in slurmctld
// (issue 36, class 4; docs/admin-guide.md, "Budgets", "What a requeue costs").
//
// Slurm runs a PrEp plugin's prolog_slurmctld in slurmctld at every start of a job, a
// requeued job's next run included (owner's or admin's `scontrol requeue`, node failure,
// preemption, a scrontab entry's next run): select_nodes() -> prolog_slurmctld() (22.05..25.11,
// src/slurmctld/job_scheduler.c), under the job write lock; the batch script is launched only
// once every prolog_slurmctld has finished (prolog_running_decr). Its return value is ignored;
// only an async prolog's callback can fail a start, and slurmctld answers a failure by
// requeueing the job without hold (it would start again after the requeue delay, forever) or,
// when it cannot requeue it, by killing it (slurm_shim.h, "PrEp plugins").
//
// So this prolog never judges under the lock: it finds the job's id (below), hands it to this
// plugin's thread and returns async. The thread, holding none of slurmctld's locks, reads the
// job through the public API (slurm_load_job: restart count, submit time = when it was
// requeued, user, account, AdminComment with the judged record) and, for a rerun (restart
// count > 0), asks the budget Gate in memory (budget.cpp, judge_rerun_budgets). A run that
// does not fit: the numbers go into the job's Comment (ahead of the user's own), the job is
// requeued and held (slurm_requeue(JOB_REQUEUE_HOLD): Reason "job requeued in held state", the
// user may release it, and the next run is checked again: no loop), and the prolog reports
// success; where the job cannot be requeued (--no-requeue) the prolog reports failure and
// slurmctld kills it. A first run (restart count 0) was judged at submission and passes.
#include "prep.h"

#include <errno.h>   // the Slurm API reports its error in errno (25.11 drops slurm_get_errno)

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "budget.h"
#include "record.h"
#include "slurm_api.h"
#include "slurm_shim.h"
#include "text.h"

extern "C" {
// slurmctld's own lookup (job_mgr.c; 22.05..25.11: job_record_t *find_job_record(uint32_t));
// needs the job read lock, which prolog_slurmctld holds. Weak: absent outside slurmctld.
job_record_t* find_job_record(uint32_t job_id) __attribute__((weak));
}

#define SG_EXPORT __attribute__((visibility("default")))
extern "C" {
SG_EXPORT int prep_p_register_callbacks(SgPrepCallbacks* callbacks);
SG_EXPORT int prep_p_prolog(void* job_env, void* cred);
SG_EXPORT int prep_p_epilog(void* job_env, void* cred);
SG_EXPORT int prep_p_prolog_slurmctld(job_record_t* job_ptr, bool* async);
SG_EXPORT int prep_p_epilog_slurmctld(job_record_t* job_ptr, bool* async);
SG_EXPORT void prep_p_required(int type, bool* required);
}

namespace sg_slurm {
namespace {

constexpr const char* kRefused = "scaleguard: new run refused: ";
constexpr std::size_t kMaxQueue = 4096;
constexpr std::size_t kScanBytes = 768;   // job_id sits well inside every release's job_record

std::mutex g_init_mutex;
int g_loads = 0;   // successful init()s in this process (job_submit and prep)

// The program's name from the kernel (sg_shim::program_name): 24.05+ slurmstepd loads
// prep/scaleguard after renaming its process title, and a failed init() there fails the launch.
bool in_slurmd() {
  const std::string name = sg_shim::program_name();
  return name == "slurmd" || name == "slurmstepd";
}
bool in_slurmctld() { return sg_shim::program_name() == "slurmctld"; }

struct Checker {
  std::mutex mutex;
  std::condition_variable wake;
  std::deque<uint32_t> queue;
  bool stopping = false;
  std::thread thread;
};
std::mutex g_checker_mutex;   // guards g_checker's creation and teardown
Checker* g_checker = nullptr;
SgPrepCallbacks g_callbacks{};

// The job's id from its record without knowing the release's layout: the one 32-bit word near
// the record's head whose value slurmctld maps back to this very record. Only a field equal to
// the job id itself can match (array_job_id of a meta record, het_job_id of a leader: the same
// value), so a match is the id. 0 when none (the prolog then passes the job unchecked).
uint32_t job_id_of(job_record_t* job) {
  if (!job || !find_job_record || !sg_shim::admin_comment_slot(job)) return 0;
  const unsigned char* p = reinterpret_cast<const unsigned char*>(job);
  for (std::size_t off = 0; off + sizeof(uint32_t) <= kScanBytes; off += sizeof(uint32_t)) {
    uint32_t v = 0;
    std::memcpy(&v, p + off, sizeof v);
    if (v == 0 || v == NO_VAL || v == sg_shim::kJobMagic) continue;
    if (find_job_record(v) == job) return v;
  }
  return 0;
}

void finish(uint32_t job_id, int status) {
  if (g_callbacks.prolog_slurmctld) SG_PREP_CALL(g_callbacks.prolog_slurmctld, status, job_id);
}

int set_comment(uint32_t job_id, const std::string& text) {
  job_desc_msg_t d;
  slurm_init_job_desc_msg(&d);
  sg_shim::set_job_id(&d, job_id);
  std::string id = std::to_string(job_id), comment = text;
  d.job_id_str = id.data();
  d.comment = comment.data();
  return slurm_update_job(&d) == SLURM_SUCCESS ? SLURM_SUCCESS : errno;
}

// The user's own comment without a refusal of ours ahead of it.
std::string users_comment(const char* c) {
  std::string s = c ? std::string(c, strnlen(c, 4096)) : "";
  if (s.rfind(kRefused, 0) != 0) return s;
  const auto bar = s.find(" || ");
  return bar == std::string::npos ? "" : s.substr(bar + 4);
}

// One started job: pass it, or refuse the run (see the head of this file).
void check(uint32_t job_id) {
  job_info_msg_t* info = nullptr;
  for (int attempt = 0; attempt < 5 && slurm_load_job(&info, job_id, SHOW_ALL) != SLURM_SUCCESS; ++attempt) {
    info = nullptr;
    std::this_thread::sleep_for(std::chrono::milliseconds(200 << attempt));
  }
  if (!info) {
    slurm_error("prep/scaleguard: JobId=%u: cannot read the job (%s): its run starts without a budget check", job_id,
                slurm_strerror(errno));
    return finish(job_id, 0);
  }
  const slurm_job_info_t* j = nullptr;
  for (uint32_t i = 0; i < info->record_count; ++i)
    if (info->job_array[i].job_id == job_id) j = &info->job_array[i];
  std::string refusal, audit, record_id, comment;
  unsigned restarts = 0;
  if (j && j->restart_cnt > 0) {
    restarts = j->restart_cnt;
    bool ungoverned = false;
    const std::string admin = j->admin_comment ? std::string(j->admin_comment, strnlen(j->admin_comment, 4096)) : "";
    auto request = decode_record(admin, &ungoverned, &record_id);
    if (request && !ungoverned && !record_id.empty())
      refusal = judge_rerun_budgets(j->user_id, j->account ? j->account : "", record_id,
                                    static_cast<std::int64_t>(j->submit_time) * 1000, *request, &audit);
    comment = j->comment ? std::string(j->comment, strnlen(j->comment, 4096)) : "";
  }
  slurm_free_job_info_msg(info);
  if (refusal.empty()) {
    if (restarts > 0)
      slurm_info("prep/scaleguard: JobId=%u run %u (record %s) fits its budgets%s%s", job_id, restarts + 1,
                 record_id.c_str(), audit.empty() ? "" : ": ", audit.c_str());
    if (comment.rfind(kRefused, 0) == 0) set_comment(job_id, users_comment(comment.c_str()));
    return finish(job_id, 0);
  }
  const std::string said = one_line(refusal, kMaxMessage);
  std::string text = kRefused + said.substr(std::strlen("scaleguard: "));
  const std::string own = users_comment(comment.c_str());
  if (!own.empty()) text += " || " + own;
  const int crc = set_comment(job_id, text);
  const int rc = slurm_requeue(job_id, JOB_REQUEUE_HOLD) == SLURM_SUCCESS ? SLURM_SUCCESS : errno;
  slurm_info("prep/scaleguard: JobId=%u run %u (record %s) refused, %s: %s%s%s", job_id, restarts + 1,
             record_id.c_str(),
             rc == SLURM_SUCCESS ? "requeued and held" : "cannot be requeued, so it is killed",
             said.c_str(), crc == SLURM_SUCCESS ? "" : " (the job's Comment could not be set)",
             audit.empty() ? "" : (" " + audit).c_str());
  // Requeued: the prolog succeeds on a pending job (nothing is launched). Not requeued (not a
  // batch job, --no-requeue): the prolog fails, and slurmctld kills the job.
  finish(job_id, rc == SLURM_SUCCESS ? 0 : (1 << 8));
}

void run(Checker* c) {
  std::unique_lock<std::mutex> lock(c->mutex);
  while (true) {
    c->wake.wait(lock, [&] { return c->stopping || !c->queue.empty(); });
    if (c->stopping) return;   // slurmctld is going: its restart runs the prologs of configuring jobs again
    const uint32_t id = c->queue.front();
    c->queue.pop_front();
    lock.unlock();
    try {
      check(id);
    } catch (const std::exception& e) {
      slurm_error("prep/scaleguard: JobId=%u: %s; its run starts without a budget check", id, e.what());
      finish(id, 0);
    } catch (...) {
      slurm_error("prep/scaleguard: JobId=%u: unknown exception; its run starts without a budget check", id);
      finish(id, 0);
    }
    lock.lock();
  }
}

}  // namespace

bool enter_init(int* rc) {
  std::lock_guard<std::mutex> lock(g_init_mutex);
  *rc = SLURM_SUCCESS;
  if (in_slurmd()) return true;   // slurmd loads prep/scaleguard too: nothing to do there
  return g_loads++ > 0;
}

void init_failed() {
  std::lock_guard<std::mutex> lock(g_init_mutex);
  if (g_loads > 0) --g_loads;
}

bool leave_fini() {
  std::lock_guard<std::mutex> lock(g_init_mutex);
  if (in_slurmd() || g_loads == 0) return false;
  return --g_loads == 0;
}

void stop_rerun_checks() {
  std::lock_guard<std::mutex> guard(g_checker_mutex);
  if (!g_checker) return;
  {
    std::lock_guard<std::mutex> lock(g_checker->mutex);
    g_checker->stopping = true;
  }
  g_checker->wake.notify_all();
  if (g_checker->thread.joinable()) g_checker->thread.join();
  delete g_checker;
  g_checker = nullptr;
}

}  // namespace sg_slurm

extern "C" int prep_p_register_callbacks(SgPrepCallbacks* callbacks) {
  if (callbacks) sg_slurm::g_callbacks = *callbacks;
  return SLURM_SUCCESS;
}

extern "C" int prep_p_prolog(void*, void*) { return SLURM_SUCCESS; }
extern "C" int prep_p_epilog(void*, void*) { return SLURM_SUCCESS; }
extern "C" int prep_p_epilog_slurmctld(job_record_t*, bool*) { return SLURM_SUCCESS; }

extern "C" void prep_p_required(int type, bool* required) {
  // Sets only what it requires: prep_g_init asks each plugin in turn.
  if (required && type == kPrepPrologSlurmctld && sg_slurm::in_slurmctld()) *required = true;
}

extern "C" int prep_p_prolog_slurmctld(job_record_t* job_ptr, bool* async) {
  using namespace sg_slurm;
  try {
    if (!async || !g_callbacks.prolog_slurmctld || !budgets_configured()) return SLURM_SUCCESS;
    const uint32_t id = job_id_of(job_ptr);
    if (id == 0) {
      slurm_error("prep/scaleguard: cannot tell a starting job's id: its run starts without a budget check");
      return SLURM_SUCCESS;
    }
    std::lock_guard<std::mutex> guard(g_checker_mutex);
    if (!g_checker) {
      auto* c = new Checker;
      c->thread = std::thread(run, c);
      g_checker = c;
    }
    {
      std::lock_guard<std::mutex> lock(g_checker->mutex);
      if (g_checker->queue.size() >= kMaxQueue) {
        slurm_error("prep/scaleguard: JobId=%u: %zu starts are waiting for a budget check: this run starts unchecked",
                    id, g_checker->queue.size());
        return SLURM_SUCCESS;
      }
      g_checker->queue.push_back(id);
    }
    *async = true;   // the thread calls slurmctld's callback once it has judged the run
    g_checker->wake.notify_one();
  } catch (...) {
    slurm_error("prep/scaleguard: prolog_slurmctld: unexpected error: the run starts without a budget check");
  }
  return SLURM_SUCCESS;
}
