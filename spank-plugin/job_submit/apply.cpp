#include "apply.h"

#include <csignal>
#include <cstring>
#include <vector>

#include "record.h"
#include "slurm_shim.h"
#include "text.h"

namespace sg_slurm {
namespace {

using scaleguard::Action;
using scaleguard::Decision;

// One bounded line without a leading "scaleguard:" (the planner's texts may carry it).
std::string untagged(const std::string& text) {
  std::string line = one_line(text, kMaxMessage);
  return line.rfind("scaleguard: ", 0) == 0 ? line.substr(12) : line;
}
std::string tagged(const std::string& text) { return "scaleguard: " + untagged(text); }

bool is_gpu_entry(const std::string& entry) {
  return entry.rfind("gres:gpu", 0) == 0 || entry.rfind("gres/gpu", 0) == 0 ||
         entry.rfind("gpu", 0) == 0;
}

// Removes the GPU entries from a comma-separated TRES field and, when count > 0, adds
// "<gres:gpu|gres/gpu>[:type]:count", the form this release's sbatch writes (slurm_shim.h).
void set_gpu_tres(char** field, int count, const std::string& type) {
  std::string kept;
  if (*field) {
    std::string text(*field, strnlen(*field, kMaxValue));
    for (size_t b = 0; b <= text.size();) {
      size_t e = text.find(',', b);
      if (e == std::string::npos) e = text.size();
      std::string entry = text.substr(b, e - b);
      if (!entry.empty() && !is_gpu_entry(entry)) kept += (kept.empty() ? "" : ",") + entry;
      b = e + 1;
    }
  }
  if (count > 0) {
    std::string gpu = std::string(sg_shim::kGpuTres) + ":" + (type.empty() ? "" : type + ":") + std::to_string(count);
    kept = kept.empty() ? gpu : gpu + "," + kept;
  }
  if (kept.empty()) {
    slurm_xfree(reinterpret_cast<void**>(field));
  } else {
    replace(field, kept);
  }
}

std::string gpu_type_of(const job_desc_msg_t& job) {
  for (const char* f : {job.tres_per_job, job.tres_per_node, job.tres_per_task, job.tres_per_socket}) {
    if (!f) continue;
    auto gpus = scaleguard::parse_gpu_tres(std::string(f, strnlen(f, kMaxValue)));
    if (gpus && !gpus->type.empty()) return gpus->type;
  }
  return "";
}

// Applies the rewrite; returns what changed, for the user.
std::string rewrite_job(const scaleguard::Rewrite& rw, job_desc_msg_t* job) {
  std::string changed;
  auto note = [&](const std::string& what) { changed += (changed.empty() ? "" : ", ") + what; };
  std::string type = gpu_type_of(*job);
  if (rw.gpus_total) {
    set_gpu_tres(&job->tres_per_job, *rw.gpus_total, type);
    for (char** f : {&job->tres_per_node, &job->tres_per_task, &job->tres_per_socket})
      set_gpu_tres(f, 0, type);
    note("GPUs=" + std::to_string(*rw.gpus_total));
  }
  if (rw.gpus_per_node) {
    set_gpu_tres(&job->tres_per_node, *rw.gpus_per_node, type);
    for (char** f : {&job->tres_per_job, &job->tres_per_task, &job->tres_per_socket})
      set_gpu_tres(f, 0, type);
    note("GPUs per node=" + std::to_string(*rw.gpus_per_node));
  }
  if (rw.nodes) {
    job->min_nodes = job->max_nodes = static_cast<uint32_t>(*rw.nodes);
    note("nodes=" + std::to_string(*rw.nodes));
  }
  if (rw.time_limit_min) {
    job->time_limit = *rw.time_limit_min < 0 ? INFINITE : static_cast<uint32_t>(*rw.time_limit_min);
    if (job->time_min != NO_VAL && job->time_min > job->time_limit) job->time_min = job->time_limit;
    note("time=" + std::to_string(*rw.time_limit_min) + " min");
  }
  if (rw.partition) {
    replace(&job->partition, one_line(*rw.partition, 256));
    note("partition=" + one_line(*rw.partition, 256));
  }
  if (rw.requeue) {
    job->requeue = 1;
    note("requeue");
  }
  if (rw.signal_before_s > 0) {
    job->warn_signal = SIGUSR1;
    job->warn_time = static_cast<uint16_t>(rw.signal_before_s > 65535 ? 65535 : rw.signal_before_s);
    // Unset is NO_VAL16, not 0.
    job->warn_flags = job->warn_flags == NO_VAL16 ? KILL_JOB_BATCH : (job->warn_flags | KILL_JOB_BATCH);
    note("signal=B:USR1@" + std::to_string(job->warn_time));
  }
  return changed;
}

// Sets NAME=value in a Slurm-owned env array; an existing NAME is kept unless `overwrite`.
void set_env(char*** env, uint32_t* size, const std::string& name, const std::string& value,
             bool overwrite) {
  std::string prefix = name + "=";
  for (uint32_t i = 0; i < *size && (*env)[i]; ++i) {
    if (strncmp((*env)[i], prefix.c_str(), prefix.size()) != 0) continue;
    if (overwrite) replace(&(*env)[i], prefix + value);
    return;
  }
  // Slurm's env arrays are NULL-terminated: size + new entry + terminator.
  slurm_xrecalloc(reinterpret_cast<void**>(env), *size + 2, sizeof(char*), true, false,
                  __FILE__, __LINE__, __func__);
  (*env)[*size] = xstr(prefix + value);
  (*env)[*size + 1] = nullptr;
  ++*size;
}

// Writes the bounds that keep the job inside what was judged: a time limit where the job had
// none (or UNLIMITED), a node maximum where Slurm would choose the count. Returns what changed.
std::string bound_job(const Decision& d, job_desc_msg_t* job) {
  std::string changed;
  if (d.bound_time_min && (job->time_limit == NO_VAL || job->time_limit == INFINITE)) {
    job->time_limit = static_cast<uint32_t>(*d.bound_time_min);
    if (job->time_min != NO_VAL && job->time_min > job->time_limit) job->time_min = job->time_limit;
    changed = "time limit set to " + std::to_string(*d.bound_time_min) + " min";
  }
  if (d.bound_max_nodes && (job->max_nodes == NO_VAL || job->max_nodes == 0 ||
                            job->max_nodes > static_cast<uint32_t>(*d.bound_max_nodes))) {
    job->max_nodes = static_cast<uint32_t>(*d.bound_max_nodes);
    if (job->min_nodes != NO_VAL && job->min_nodes > job->max_nodes) job->min_nodes = job->max_nodes;
    changed += (changed.empty() ? "" : ", ") + std::string("at most ") + std::to_string(*d.bound_max_nodes) + " node(s)";
  }
  return changed;
}

// The request as the job holds it once the decision is applied (what job_modify reads back).
scaleguard::JobRequest as_applied(scaleguard::JobRequest r, const Decision& d) {
  const auto& rw = d.rewrite;
  if (d.action == Action::rewrite) {
    if (rw.gpus_total) r.gpus_total = *rw.gpus_total, r.gpus_per_node = r.gpus_per_task = r.gpus_per_socket = 0;
    if (rw.gpus_per_node) r.gpus_per_node = *rw.gpus_per_node, r.gpus_total = r.gpus_per_task = r.gpus_per_socket = 0;
    if (rw.nodes) r.nodes_min = r.nodes_max = *rw.nodes;
    if (rw.time_limit_min) r.time_limit_min = *rw.time_limit_min;
    if (rw.partition) r.partition = *rw.partition;
    if (rw.requeue) r.requeue = true;
    if (rw.signal_before_s > 0) r.checkpoint_signal_s = rw.signal_before_s > 65535 ? 65535 : rw.signal_before_s;
  }
  if (d.bound_time_min && r.time_limit_min <= 0) r.time_limit_min = *d.bound_time_min;
  if (d.bound_max_nodes && (r.nodes_max <= 0 || r.nodes_max > *d.bound_max_nodes)) r.nodes_max = *d.bound_max_nodes;
  if (r.nodes_min > r.nodes_max && r.nodes_max > 0) r.nodes_min = r.nodes_max;
  return r;
}

void annotate(const Decision& d, const scaleguard::JobRequest& applied, const std::string& id,
              job_desc_msg_t* job) {
  // AdminComment: users cannot edit it, so neither the report nor job_modify reads a forgery.
  replace(&job->admin_comment,
          annotated_admin_comment(job->admin_comment ? std::string(job->admin_comment, strnlen(job->admin_comment, 4096)) : "",
                                  tagged(d.summary), encode_record(id, applied)));
  const bool batch = job->environment != nullptr && job->env_size > 0;
  for (const auto& [name, raw] : d.plan_env) {
    std::string value = one_line(raw, 512);
    if (!is_plan_env_name(name) || value != raw) {
      slurm_error("job_submit/scaleguard: not exporting plan variable %.64s: bad name or value",
                  name.c_str());
      continue;
    }
    // The user's own environment wins; the spank env carries the controller's plan.
    if (batch) set_env(&job->environment, &job->env_size, name, value, false);
    set_env(&job->spank_job_env, &job->spank_job_env_size, name, value, true);
  }
}

}  // namespace

Applied apply_decision(const Decision& d, const scaleguard::JobRequest& request, const std::string& id,
                       job_desc_msg_t* job, char** err_msg) {
  Applied out;
  const std::string existing =
      job->admin_comment ? std::string(job->admin_comment, strnlen(job->admin_comment, 4096)) : "";
  if (d.shadow) {
    // Shadow mode: judged and logged by the caller, nothing changes but the bare record (no
    // plan summary: the report counts no shadow decision as a plan), so that
    // updates after a switch to enforce are judged against what the job really is (issue 25,
    // class 9).
    replace(&job->admin_comment, annotated_admin_comment(existing, "", encode_record(id, request)));
    return out;
  }
  if (d.action == Action::reject) {
    set_err_msg(err_msg, tagged(d.message));
    out.rc = kRefused;
    return out;
  }
  std::string text = tagged(d.summary);
  if (d.action == Action::rewrite) {
    out.changes = rewrite_job(d.rewrite, job);
    text = "scaleguard: job rewritten (" + out.changes + "): " + untagged(d.message);
  } else if (d.action == Action::warn) {
    text += " | warning: " + untagged(d.message);
  }
  if (!d.governed) {
    // No plan: the partition is not ours. The bare record says so, so that a job without any
    // record is known to have lost it and its updates fail closed.
    replace(&job->admin_comment, annotated_admin_comment(existing, "", encode_ungoverned_record(id)));
    return out;
  }
  if (std::string bounded = bound_job(d, job); !bounded.empty()) {
    out.changes += (out.changes.empty() ? "" : ", ") + bounded;
    text += " | " + bounded + " (the most that was judged)";
  }
  annotate(d, as_applied(request, d), id, job);
  set_err_msg(err_msg, text);
  return out;
}

std::string record_after_update(const scaleguard::JobRequest& merged, const std::string& id,
                                const std::string& summary, const std::string& existing) {
  return annotated_admin_comment(existing, tagged(summary), encode_record(id, merged));
}

}  // namespace sg_slurm
