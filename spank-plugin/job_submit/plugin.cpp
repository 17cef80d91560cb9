// job_submit/scaleguard: the Slurm entry points. slurmctld calls job_submit() for every
// sbatch, srun, salloc, `sbatch --test-only` and scrontab submission (once per het job
// component) and job_modify() for updates; both ask the planner's decide() with the site
// policy and apply its decision. No exception crosses into slurmctld.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <vector>

#include "apply.h"
#include "audit.h"
#include "budget.h"
#include "measurements.h"
#include "metrics.h"
#include "partitions.h"
#include "policy.h"
#include "prep.h"
#include "record.h"
#include "request.h"
#include "scaleguard/build_info.h"
#include "settings.h"
#include "slurm_api.h"
#include "slurm_shim.h"
#include "text.h"
#include "user_names.h"

// The plugin is built with hidden visibility; these are the symbols slurmctld looks up.
#define SG_EXPORT __attribute__((visibility("default")))
extern "C" {
SG_EXPORT extern const char plugin_name[] = "scaleguard: distributed-training policy for GPU jobs";
SG_EXPORT extern const char plugin_type[] = "job_submit/scaleguard";
SG_EXPORT extern const uint32_t plugin_version = SLURM_VERSION_NUMBER;
SG_EXPORT int init(void);
SG_EXPORT int fini(void);
SG_EXPORT int job_submit(job_desc_msg_t* job_desc, uint32_t submit_uid, char** err_msg);
// 22.05: (job_desc, job_ptr, submit_uid); 23.02+ adds char** err_msg (slurm_shim.h).
SG_EXPORT int job_modify(SG_JOB_MODIFY_PARAMS(job_desc, job_ptr, submit_uid));
}

namespace {

using scaleguard::Action;

// Created in init(), destroyed in fini(); slurmctld calls neither concurrently with jobs. A raw
// pointer: slurmctld exits without fini(), and a static destructor would free the policy under
// the budget ledger thread, which runs until the process is gone.
sg_slurm::PolicyHolder* g_policy = nullptr;

// A het job's components reach job_submit one after another, in order, in one slurmctld
// thread (proc_req.c loops over them under one lock): the sum of the components judged so far
// is kept per thread, so the last component is judged with the whole job's GPU-hours.
struct HetSum {
  uint32_t uid = 0;
  int next = 0;
  double gpu_hours = 0;
  std::vector<std::uint64_t> budget_tickets;   // the components' budget charges, taken back on a refusal
};
thread_local HetSum t_het;

int internal_error(const char* where, const char* what, char** err_msg) {
  slurm_error("job_submit/scaleguard: %s: internal error: %s", where, what);
  sg_slurm::set_err_msg(err_msg, "scaleguard: internal error, job not judged; see slurmctld log");
  return SLURM_ERROR;
}

scaleguard::Decision input_refusal(const std::string& message) {
  scaleguard::Decision d;
  d.action = Action::reject;
  d.governed = true;
  d.rules.push_back({"input", Action::reject, message});
  d.message = message;
  return d;
}

// No policy could be loaded since slurmctld started (PolicyHolder): jobs in the partitions the
// file governs are refused, others pass untouched.
int judge_without_policy(const job_desc_msg_t& job, char** err_msg) {
  if (!g_policy) return internal_error("job_submit", "no policy loaded", err_msg);
  const std::string refusal = g_policy->refusal(job.partition ? sg_slurm::one_line(job.partition, 4096) : "");
  if (refusal.empty()) return SLURM_SUCCESS;
  sg_slurm::set_err_msg(err_msg, refusal);
  return sg_slurm::kRefused;
}

// A submission with GPUs but no judgement would bypass the policy: refuse on any failure.
int judge(job_desc_msg_t* job, uint32_t submit_uid, char** err_msg) {
  auto policy = g_policy ? g_policy->current() : nullptr;
  if (!policy) return judge_without_policy(*job, err_msg);
  g_policy->check_partitions(*policy);  // once per load, under the partition lock job_submit holds
  sg_slurm::AuditEntry entry;
  entry.id = sg_slurm::new_decision_id();
  entry.event = "submit";
  entry.uid = sg_shim::user_id(*job, submit_uid);
  entry.partition = job->partition ? sg_slurm::one_line(job->partition, 256) : "";
  scaleguard::JobRequest request;
  std::vector<std::string> asked;
  sg_slurm::RequestError error{};
  if (!sg_slurm::read_request(*job, submit_uid, *policy, &request, &error, &asked)) {
    auto d = input_refusal(error.message);
    entry.decision = &d, entry.message = error.message;
    sg_slurm::record_decision(*policy, entry);
    sg_slurm::set_err_msg(err_msg, error.message);
    return error.code;
  }
  entry.array_tasks = std::max(1, request.array_tasks);
  // The partitions judged (partitions.h): those asked for, or every governed one for
  // --reservation without --partition, and their Alternate= chain, one list into decide().
  const auto partitions = sg_slurm::submission_partitions(*job, *policy, std::move(asked));
  sg_slurm::into_request(partitions, &request);
  if (request.het_component > 0 && (t_het.uid != entry.uid || t_het.next != request.het_component)) {
    auto d = input_refusal("scaleguard: het job component " + std::to_string(request.het_component) +
                           " arrived without the components before it; submit the het job again");
    entry.decision = &d, entry.message = d.message;
    sg_slurm::record_decision(*policy, entry);
    sg_slurm::set_err_msg(err_msg, d.message);
    return sg_slurm::kRefused;
  }
  if (request.het_component == 0) t_het = HetSum{entry.uid, 0, 0, {}};
  if (request.het_component >= 0) request.het_prior_gpu_hours = t_het.gpu_hours;

  sg_slurm::attach_measurements(*policy, entry.uid, &request);  // what probes measured (issue 16)
  auto decision = scaleguard::decide(request, *policy);
  // Budgets (budget.h): may refuse, move or warn; no I/O here.
  const auto budget = sg_slurm::judge_submission_budgets(*job, entry.uid, *policy, entry.id, &request, &decision);
  if (request.het_component >= 0) {
    t_het.next = request.het_component + 1;
    t_het.gpu_hours += decision.action == Action::reject ? 0 : decision.granted_gpu_hours;
    // A refused component refuses the whole het job: the earlier components' charges go back.
    if (decision.action == Action::reject) {
      for (auto ticket : t_het.budget_tickets) sg_slurm::retract_budget_charge(ticket);
      t_het.budget_tickets.clear();
    } else if (budget.ticket) {
      t_het.budget_tickets.push_back(budget.ticket);
    }
  }
  if (partitions.every_governed && decision.action != Action::accept)
    decision.message = "scaleguard: --reservation without --partition: Slurm picks the reservation's partition "
                       "after this check, so the job was judged in every partition (" + request.partition +
                       "); name one with --partition. " + decision.message;
  auto applied = sg_slurm::apply_decision(decision, request, entry.id, job, err_msg);
  entry.decision = &decision;
  entry.budgets_json = budget.audit_json;
  entry.changes = applied.changes;
  entry.message = decision.action == Action::reject ? decision.message : decision.summary;
  if (decision.governed || decision.action == Action::reject) sg_slurm::record_decision(*policy, entry);
  return applied.rc;
}

// --- updates ---------------------------------------------------------------------------------

// Root, SlurmUser and the policy's trusted_users may change jobs without being judged.
bool trusted(const scaleguard::Policy& policy, uint32_t uid) {
  if (uid == 0 || uid == slurm_conf.slurm_user_id) return true;
  if (policy.trusted_users.empty()) return false;
  const std::string name = sg_slurm::user_name(uid);
  for (const auto& u : policy.trusted_users)
    if (u == std::to_string(uid) || (!name.empty() && u == name)) return true;
  return false;
}

// Whether an update touches anything that can grow what Slurm may grant the job.
bool can_grow(const job_desc_msg_t& u) {
  return u.min_nodes != NO_VAL || u.max_nodes != NO_VAL || u.num_tasks != NO_VAL ||
         u.ntasks_per_node != NO_VAL16 || u.sockets_per_node != NO_VAL16 || u.time_limit != NO_VAL ||
         u.partition || u.tres_per_job || u.tres_per_node || u.tres_per_task || u.tres_per_socket ||
         u.shared != NO_VAL16 || u.req_nodes || u.features || u.array_inx || u.requeue == 0 ||
         (u.ntasks_per_tres != NO_VAL16 && u.ntasks_per_tres != 0);
}

// The judged request with an update laid over it. Each size may only grow in what is judged
// (the larger of before and after), so a refused or partly applied update can never leave the
// record below what the job may really get.
scaleguard::JobRequest merged(scaleguard::JobRequest r, const scaleguard::JobRequest& u) {
  auto grow = [](int& a, int b) {
    if (b > a) a = b;
  };
  grow(r.gpus_total, u.gpus_total), grow(r.gpus_per_node, u.gpus_per_node);
  grow(r.gpus_per_task, u.gpus_per_task), grow(r.gpus_per_socket, u.gpus_per_socket);
  grow(r.nodes_min, u.nodes_min), grow(r.nodes_max, u.nodes_max), grow(r.ntasks, u.ntasks);
  grow(r.ntasks_per_node, u.ntasks_per_node), grow(r.sockets_per_node, u.sockets_per_node);
  grow(r.nodes_listed, u.nodes_listed), grow(r.array_tasks, u.array_tasks);
  if (u.time_limit_min < 0 || (r.time_limit_min > 0 && u.time_limit_min > r.time_limit_min))
    r.time_limit_min = u.time_limit_min;
  if (!u.gpu_type.empty()) r.gpu_type = u.gpu_type;
  if (!u.partition.empty()) r.partition = u.partition;
  r.exclusive = r.exclusive || u.exclusive;
  r.requeue = r.requeue || u.requeue;
  // A job whose GPUs Slurm derived from --ntasks-per-gpu re-derives them from NumTasks= or
  // NumNodes= (issue 25, class 1); the derived count only grows here too. Fewer tasks per GPU
  // means more GPUs: the smallest N counts.
  if (u.ntasks_per_gpu > 0 && (r.ntasks_per_gpu <= 0 || u.ntasks_per_gpu < r.ntasks_per_gpu))
    r.ntasks_per_gpu = u.ntasks_per_gpu;
  sg_slurm::derive_gpus(&r, true);
  return r;
}

// Stores the job's new AdminComment text. Slurm applies an admin's `AdminComment=` after
// job_modify, so when the update carries one the record goes into that text instead: an admin
// replacing the comment keeps the record (issue 25, class 9).
void store_admin_comment(job_desc_msg_t* update, char** slot, const std::string& text) {
  if (update->admin_comment) {
    sg_slurm::replace(&update->admin_comment, text);
    return;
  }
  slurm_xfree(reinterpret_cast<void**>(slot));
  *slot = slurm_xstrdup(text.c_str());
}

std::string admin_text(const char* text) { return text ? std::string(text, strnlen(text, 4096)) : ""; }

// An update that is not judged (a trusted user's, or one that only sets AdminComment): the
// record is kept and grows with what the update sets, so a later user update is judged against
// what the job really is.
int refresh_record(job_desc_msg_t* update, job_record_t* job_ptr, uint32_t uid, const scaleguard::Policy& policy) {
  char** slot = sg_shim::admin_comment_slot(job_ptr);
  if (!slot) return SLURM_SUCCESS;  // not judged either way; an unreadable layout is logged where judged
  const std::string existing = admin_text(*slot);
  bool ungoverned = false;
  std::string id;
  auto recorded = sg_slurm::decode_record(existing, &ungoverned, &id);
  if (!recorded) return SLURM_SUCCESS;  // nothing to keep
  const std::string base = update->admin_comment ? admin_text(update->admin_comment) : existing;
  if (ungoverned) {
    store_admin_comment(update, slot, sg_slurm::annotated_admin_comment(base, "", sg_slurm::encode_ungoverned_record(id)));
    return SLURM_SUCCESS;
  }
  scaleguard::JobRequest change;
  sg_slurm::RequestError error{};
  if (!sg_slurm::read_request(*update, uid, policy, &change, &error)) change = scaleguard::JobRequest{};
  store_admin_comment(update, slot,
                      sg_slurm::annotated_admin_comment(base, sg_slurm::summary_of(existing),
                                                        sg_slurm::encode_record(id, merged(*recorded, change))));
  return SLURM_SUCCESS;
}

// Het jobs (issue 25, class 4): Slurm applies an update of the leader (JobId=X) to every
// component, one after another, each through job_modify (update_job_str loops over
// het_job_list); one of a component (X+K, or its own job id) to that one alone. Each is judged
// with the GPU-hours of every other component as it will be, read from that component's own
// record, so the sum is judged from the first component on, before any component changed.
// False (with *why) when the components cannot all be read: the update then fails closed.
bool het_others(const job_desc_msg_t& update, job_record_t* job_ptr, const scaleguard::JobRequest& self,
                const scaleguard::JobRequest& change, const scaleguard::Policy& policy, double* others,
                std::string* why) {
  const uint32_t k = static_cast<uint32_t>(self.het_component);
  const std::string id = update.job_id_str ? std::string(update.job_id_str, strnlen(update.job_id_str, 32))
                         : sg_shim::job_id(update) != NO_VAL ? std::to_string(sg_shim::job_id(update))
                                                             : "";
  size_t digits = id.find_first_not_of("0123456789");
  if (digits == std::string::npos) digits = id.size();
  uint32_t named = 0, leader = 0;
  bool all = false;  // the leader named: every component changes
  if (digits == 0 || digits > 9 || (digits < id.size() && id[digits] != '+')) {
    *why = "het job component named as '" + sg_slurm::one_line(id, 32) + "'";
    return false;
  }
  named = static_cast<uint32_t>(std::stoul(id.substr(0, digits)));
  if (!find_het_job_record) {
    *why = "this slurmctld does not export find_het_job_record";
    return false;
  }
  // X names the leader when X's component 0 is a job of its own and X's component k is this one
  // (a component's own id finds itself at offset k, but no component 0).
  job_record_t* first = digits == id.size() ? find_het_job_record(named, 0) : nullptr;
  if (digits < id.size()) leader = named;                                    // X+K: that one
  else if (first && (k == 0 || first != job_ptr) && find_het_job_record(named, k) == job_ptr)
    leader = named, all = true;                                              // the leader: all
  else if (named > k) leader = named - k;                                    // a component's own id
  if (!leader || find_het_job_record(leader, k) != job_ptr) {
    *why = "the components of het job " + sg_slurm::one_line(id, 32) + " cannot be found";
    return false;
  }
  *others = 0;
  for (uint32_t i = 0; i < 128; ++i) {  // Slurm's MAX_HET_JOB_COMPONENTS
    if (i == k) continue;
    job_record_t* component = find_het_job_record(leader, i);
    if (!component) break;   // offsets are contiguous
    char** slot = sg_shim::admin_comment_slot(component);
    bool ungoverned = false;
    auto recorded = slot ? sg_slurm::decode_record(admin_text(*slot), &ungoverned) : std::nullopt;
    if (!recorded) {
      *why = "component " + std::to_string(i) + " of het job " + std::to_string(leader) + " has no scaleguard record";
      return false;
    }
    if (ungoverned) continue;
    auto request = all ? merged(*recorded, change) : *recorded;
    request.het_component = -1, request.het_prior_gpu_hours = 0;
    const auto d = scaleguard::decide(request, policy);
    *others += std::max(d.granted_gpu_hours, d.envelope.gpu_hours());
  }
  return true;
}

// err_msg: where the user's reason goes (nullptr on 22.05, whose job_modify has none; the
// reason is then only in slurmctld's log and the audit file).
int judge_update(job_desc_msg_t* update, job_record_t* job_ptr, uint32_t uid, char** err_msg) {
  auto policy = g_policy ? g_policy->current() : nullptr;
  if (!policy) {   // fail closed: only root and SlurmUser change what could grow
    if (!(can_grow(*update) || update->account) || uid == 0 || uid == slurm_conf.slurm_user_id) return SLURM_SUCCESS;
    if (!g_policy) return internal_error("job_modify", "no policy loaded", err_msg);
    sg_slurm::set_err_msg(err_msg, "scaleguard: updates are refused: the site policy cannot be loaded; ask your administrator");
    return sg_slurm::kRefused;
  }
  // An Account= change moves the job's budget charge: judged too.
  const bool judged_change = can_grow(*update) || update->account;
  if (!judged_change && !update->admin_comment) return SLURM_SUCCESS;
  if (!judged_change || trusted(*policy, uid)) return refresh_record(update, job_ptr, uid, *policy);
  const std::string job = update->job_id_str ? sg_slurm::one_line(update->job_id_str, 64)
                          : sg_shim::job_id(*update) != NO_VAL ? std::to_string(sg_shim::job_id(*update))
                                                     : "?";
  sg_slurm::AuditEntry entry;
  entry.id = sg_slurm::new_decision_id();
  entry.event = "update";
  entry.job = job;
  entry.uid = uid;
  entry.partition = update->partition ? sg_slurm::one_line(update->partition, 256) : "";
  // The user sees the reason where Slurm passes err_msg (scontrol: "error: <text>").
  auto tell = [&](const std::string& message) {
    sg_slurm::set_err_msg(err_msg, sg_slurm::one_line(message, sg_slurm::kMaxMessage));
  };
  auto refuse = [&](scaleguard::Decision d) {
    entry.decision = &d, entry.message = d.message;
    sg_slurm::record_decision(*policy, entry);
    tell(d.message);
    return sg_slurm::kRefused;
  };
  scaleguard::JobRequest change;
  std::vector<std::string> moved_to;  // the update's partitions, each once; none: the job's stay
  sg_slurm::RequestError error{};
  if (!sg_slurm::read_request(*update, uid, *policy, &change, &error, &moved_to))
    return refuse(input_refusal(error.message));

  char** slot = sg_shim::admin_comment_slot(job_ptr);
  if (!slot) return refuse(input_refusal("scaleguard: this Slurm's job record is not one the plugin can read; "
                                         "an administrator must make this change"));
  const std::string existing = admin_text(*slot);
  bool ungoverned = false;
  std::string record_id;
  auto judged = sg_slurm::decode_record(existing, &ungoverned, &record_id);
  if (!judged)  // every job judged by the plugin has a record: this one never had it, or lost it
    return refuse(input_refusal("scaleguard: job " + job + " carries no scaleguard record in its AdminComment "
                                "(submitted before the plugin, or the record was lost): it cannot be judged, "
                                "so an administrator must make this change"));
  if (ungoverned) {
    // Judged in no governed partition at submission: it stays ungoverned unless the update
    // moves it into a governed partition.
    bool into_governed = false;
    for (const auto& name : moved_to) into_governed |= policy->find_partition(name) != nullptr;
    if (!into_governed) return SLURM_SUCCESS;
    return refuse(input_refusal("scaleguard: job " + job + " was not judged at submission; moving it into partition " +
                                change.partition + " needs a new submission there"));
  }
  auto request = merged(*judged, change);
  entry.judged_partition = request.partition;
  if (judged->het_component >= 0) {
    std::string why;
    if (!het_others(*update, job_ptr, *judged, change, *policy, &request.het_prior_gpu_hours, &why))
      return refuse(input_refusal("scaleguard: update of job " + job + " refused: " + why +
                                  "; an administrator must make this change"));
  }
  const bool requeue_off = update->requeue == 0;  // scontrol update Requeue=0
  if (requeue_off) request.requeue = false;
  request.user = "uid " + std::to_string(uid);
  // The Alternate= chain of the partitions the job has after the update (the record keeps
  // those asked for, so the chain is the one the partitions have now).
  request.alternate_partitions =
      sg_slurm::alternates_of(*policy, moved_to.empty() ? sg_slurm::listed_partitions(judged->partition) : moved_to);
  sg_slurm::attach_measurements(*policy, uid, &request);
  auto decision = scaleguard::decide(request, *policy);
  entry.decision = &decision;
  entry.message = decision.action == Action::reject ? decision.message : decision.summary;
  if (decision.shadow) {  // not enforced; the record still grows, bare as at submission
    store_admin_comment(update, slot, sg_slurm::annotated_admin_comment(
                                          update->admin_comment ? admin_text(update->admin_comment) : existing, "",
                                          sg_slurm::encode_record(record_id, request)));
    sg_slurm::record_decision(*policy, entry);
    return SLURM_SUCCESS;
  }
  // An update cannot be rewritten under the user's feet: a rewrite of its size, time or
  // partition refuses it.
  const auto& rw = decision.rewrite;
  const bool resized = decision.action == Action::rewrite &&
                       (rw.gpus_total || rw.gpus_per_node || rw.nodes || rw.time_limit_min || rw.partition);
  // Checkpointing the update makes due (checkpoint_required): Slurm applies --requeue from an
  // update but never a warning signal (update_job ignores warn_*), so a job without
  // --signal=B:USR1@N is refused, and so is turning requeue off; a missing requeue is added.
  const bool checkpoint_due = decision.action == Action::rewrite && (rw.requeue || rw.signal_before_s > 0);
  std::string checkpoint_refusal;
  if (checkpoint_due && requeue_off)
    checkpoint_refusal = "requeue cannot be turned off: the job must checkpoint and requeue";
  else if (checkpoint_due && request.checkpoint_signal_s < rw.signal_before_s)
    checkpoint_refusal = "the job would have to checkpoint, and Slurm cannot add --signal=B:USR1@" +
                         std::to_string(rw.signal_before_s) + " to a submitted job: resubmit with --requeue --signal=B:USR1@" +
                         std::to_string(rw.signal_before_s);
  if (decision.action == Action::reject || resized || decision.bound_time_min || decision.bound_max_nodes ||
      !checkpoint_refusal.empty()) {
    if (decision.action != Action::reject) {
      decision.action = Action::reject;
      decision.message = "scaleguard: update of job " + job + " refused: " +
                         (checkpoint_refusal.empty() ? "the job would have to be changed (" + decision.summary + ")"
                                                     : checkpoint_refusal + " (" + decision.summary + ")") +
                         "; " + decision.message;
    }
    sg_slurm::record_decision(*policy, entry);
    slurm_info("job_submit/scaleguard: update of job %s by uid %u refused: %s", job.c_str(), uid,
               sg_slurm::one_line(decision.message, sg_slurm::kMaxMessage).c_str());
    tell(decision.message);
    return sg_slurm::kRefused;
  }
  // Budgets: what the update adds must fit what is left (budget.h).
  if (std::string refused = sg_slurm::judge_update_budgets(*update, job_ptr, uid, record_id, entry.id, *policy, *judged, request, decision,
                                                           &entry.budgets_json);
      !refused.empty()) {
    decision.action = Action::reject;
    decision.message = refused;
    decision.rules.push_back({"budget", Action::reject, refused});
    sg_slurm::record_decision(*policy, entry);
    slurm_info("job_submit/scaleguard: update of job %s by uid %u refused: %s", job.c_str(), uid,
               sg_slurm::one_line(refused, sg_slurm::kMaxMessage).c_str());
    tell(refused);
    return sg_slurm::kRefused;
  }
  if (checkpoint_due && !request.requeue) {
    update->requeue = 1;  // applied by Slurm with the rest of the update
    request.requeue = true;
  }
  // Accepted: the record grows to what was judged now (slurmctld holds the job write lock).
  store_admin_comment(update, slot,
                      sg_slurm::record_after_update(request, entry.id, decision.summary,
                                                    update->admin_comment ? admin_text(update->admin_comment) : existing));
  sg_slurm::record_decision(*policy, entry);
  return SLURM_SUCCESS;
}

}  // namespace

extern "C" int init(void) {
  try {
    // The same .so is also prep/scaleguard (prep.h): one policy and budget Gate for both.
    if (int rc = SLURM_SUCCESS; sg_slurm::enter_init(&rc)) return rc;
    struct Undo {
      bool ok = false;
      ~Undo() { if (!ok) sg_slurm::init_failed(); }
    } undo;
    auto settings = sg_slurm::load_settings(slurm_conf.slurm_conf ? slurm_conf.slurm_conf : "");
    if (!settings) {
      slurm_error("job_submit/scaleguard: %s", settings.error().str().c_str());
      return SLURM_ERROR;
    }
    auto holder = std::make_unique<sg_slurm::PolicyHolder>();
    holder->load(*settings);   // an unloadable policy is logged and fails closed: slurmctld starts
    if (auto budgets = sg_slurm::start_budgets(holder.get()); !budgets) {
      slurm_error("job_submit/scaleguard: cannot load the budgets: %s", budgets.error().str().c_str());
      return SLURM_ERROR;
    }
    sg_slurm::start_metrics(*settings);
    g_policy = holder.release();
    slurm_info("job_submit/scaleguard: policy %s (settings %s)", settings->policy.c_str(),
               settings->file.c_str());
    slurm_info("job_submit/scaleguard: release %s", scaleguard::build_version());
    undo.ok = true;
    return SLURM_SUCCESS;
  } catch (const std::exception& e) {
    return internal_error("init", e.what(), nullptr);
  } catch (...) {
    return internal_error("init", "unknown exception", nullptr);
  }
}

extern "C" int fini(void) {
  try {
    if (!sg_slurm::leave_fini()) return SLURM_SUCCESS;   // job_submit or prep/scaleguard still loaded
    sg_slurm::stop_rerun_checks();
    sg_slurm::stop_metrics();   // reads the budgets
    sg_slurm::stop_budgets();   // joins the ledger thread before the policy goes
    delete g_policy;
    g_policy = nullptr;
  } catch (...) {
  }
  return SLURM_SUCCESS;
}

extern "C" int job_submit(job_desc_msg_t* job_desc, uint32_t submit_uid, char** err_msg) {
  sg_slurm::TimedCall timed(false);   // decision latency (metrics.h)
  try {
    return judge(job_desc, submit_uid, err_msg);
  } catch (const std::exception& e) {
    return internal_error("job_submit", e.what(), err_msg);
  } catch (...) {
    return internal_error("job_submit", "unknown exception", err_msg);
  }
}

// Updates that could grow the job are judged against its whole request as recorded at
// submission (AdminComment), with the update laid over it. A refusal's reason goes to
// slurmctld's log, the audit file and, from 23.02 (err_msg), to the user.
extern "C" int job_modify(SG_JOB_MODIFY_PARAMS(job_desc, job_ptr, submit_uid)) {
  char** err_msg = SG_JOB_MODIFY_ERR_MSG;
  sg_slurm::TimedCall timed(true);
  try {
    if (!job_desc) return SLURM_SUCCESS;
    return judge_update(job_desc, job_ptr, submit_uid, err_msg);
  } catch (const std::exception& e) {
    return internal_error("job_modify", e.what(), err_msg);
  } catch (...) {
    return internal_error("job_modify", "unknown exception", err_msg);
  }
}
