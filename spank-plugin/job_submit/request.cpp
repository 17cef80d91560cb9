#include "request.h"

#include <cctype>
#include <csignal>
#include <cstring>
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "scaleguard/envelope.h"
#include "scaleguard/text.h"
#include "slurm_shim.h"
#include "text.h"

namespace sg_slurm {
namespace {

using scaleguard::JobRequest;

constexpr size_t kMaxModel = 256;
constexpr size_t kMaxPath = 1024;
constexpr int kMaxIntervalMin = 365 * 24 * 60;  // the SPANK side accepts the same range
constexpr int kOpenNodes = 1000000;  // an open node range: the envelope clamps it to the partition

// --- GPU request ---------------------------------------------------------------------------

// Reads one TRES field into *count (0 when it names no GPU) and *type.
bool read_gpu_field(const char* text, const char* option, const scaleguard::SharedGpuGres& shared,
                    int* count, std::string* type, RequestError* error) {
  if (!text || !*text) return true;
  size_t len = strnlen(text, kMaxValue + 1);
  if (len > kMaxValue || has_control({text, len})) {
    *error = {ESLURM_INVALID_GRES, std::string("scaleguard: ") + option +
                                       ": GPU request too long or with control characters"};
    return false;
  }
  auto gpus = scaleguard::parse_gpu_tres(text, shared);
  if (!gpus) {
    *error = {ESLURM_INVALID_GRES, std::string("scaleguard: ") + option + "=" + preview(text) +
                                       ": " + gpus.error().str()};
    return false;
  }
  *count = gpus->count;
  // Every field's types count (one_gpu_type judges a mix); one with no GPUs names none.
  if (gpus->count > 0 && !gpus->type.empty() && *type != gpus->type)
    *type = type->empty() ? gpus->type : *type + "," + gpus->type;
  return true;
}

int from_u32(uint32_t v) {  // NO_VAL (unset) -> 0; absurd values stay absurd (decide refuses them)
  return v == NO_VAL || v == INFINITE ? 0 : static_cast<int>(v > 1000000 ? 1000000 : v);
}
int from_u16(uint16_t v) { return v == NO_VAL16 || v == INFINITE16 ? 0 : v; }

// Counts a bounded host list or array index; false with the error to return.
bool read_count(const char* text, bool hostlist, int* out, RequestError* error) {
  if (!text || !*text) return true;
  std::string value(text, strnlen(text, kMaxValue + 1));
  auto n = value.size() > kMaxValue ? scaleguard::Result<int>(scaleguard::Error{"too long", "", 0, "", ""})
           : hostlist ? scaleguard::count_hostlist(value)
                      : scaleguard::count_array_tasks(value);
  if (!n) {
    *error = {hostlist ? ESLURM_INVALID_NODE_NAME : ESLURM_INVALID_ARRAY,
              std::string("scaleguard: ") + (hostlist ? "--nodelist=" : "--array=") + preview(value) + ": " +
                  n.error().message};
    return false;
  }
  *out = n.value();
  return true;
}

// Whether a TRES field asks for gpu with a count above 0 (shard and mps do not count): only
// then does Slurm not derive GPUs from --ntasks-per-gpu (gres_job_state_validate's
// requested_gpu; a gpu:0 entry is dropped before it is looked at).
bool gpu_named(const job_desc_msg_t& job) {
  for (const char* f : {job.tres_per_job, job.tres_per_node, job.tres_per_task, job.tres_per_socket}) {
    if (!f) continue;
    auto gpus = scaleguard::parse_gpu_tres(std::string(f, strnlen(f, kMaxValue)));
    if (!gpus || gpus->count > 0) return true;  // unreadable ones were refused already
  }
  return false;
}

// --- intent --------------------------------------------------------------------------------

struct Option {
  const char* name;  // as forwarded, '-' already '_'
  const char* flag;  // as the user typed it
  const char* forms; // accepted forms, for the message
};
constexpr Option kOptions[] = {
    {"train_model", "--train-model", "a size like 350M or 7B, a preset like llama2-7b, or layers=..,hidden=..,heads=.."},
    {"train_tokens", "--train-tokens", "a count like 40B, 1.5T, 350M or 1e9"},
    {"train_single_gpu_hours", "--train-single-gpu-hours", "hours like 11, 11h, 90m, 2d or 1-12:00:00"},
    {"train_strategy", "--train-strategy", "auto, single, ddp, zero, pipeline, tensor or hybrid"},
    {"train_deadline", "--train-deadline", "hours like 11, 11h, 90m, 2d or 1-12:00:00"},
    {"train_ckpt_dir", "--train-ckpt-dir", "an absolute path of letters, digits and / . _ - + @, without '..', inside the policy's checkpoint roots"},
    {"train_ckpt_interval", "--train-ckpt-interval", "auto or whole minutes (1 to 525600)"},
    {"train_probe", "--train-probe", "a flag (SCALEGUARD_TRAIN_PROBE=1, yes or on)"},
    {"train_eval_every", "--train-eval-every", "whole steps (1 to 1073741824), with --train-eval-tokens"},
    {"train_eval_tokens", "--train-eval-tokens", "a count like 20M or 1e8, with --train-eval-every"},
    {"train_spare_nodes", "--train-spare-nodes", "a whole number of nodes (0 to 1024), fewer than the job's nodes"},
};

const Option* find_option(std::string name) {
  for (char& c : name)
    if (c == '-') c = '_';
  for (const auto& o : kOptions)
    if (name == o.name) return &o;
  return nullptr;
}

bool fail(RequestError* error, const Option& o, std::string_view value, const std::string& why) {
  *error = {ESPANK_BAD_ARG, std::string("scaleguard: ") + o.flag + "=" + preview(value) + ": " +
                                why + " (accepted: " + o.forms + ")"};
  return false;
}

bool lexically_inside(const std::string& path, const std::string& root) {
  std::string r = root;
  while (r.size() > 1 && r.back() == '/') r.pop_back();
  return path == r || r == "/" || (path.compare(0, r.size(), r) == 0 && path[r.size()] == '/');
}

bool check_ckpt_dir(const std::string& v, const scaleguard::Policy& policy, const Option& o,
                    RequestError* error) {
  if (v.size() > kMaxPath) return fail(error, o, v, "path too long");
  if (v[0] != '/') return fail(error, o, v, "not an absolute path");
  for (char c : v)
    if (!isalnum(static_cast<unsigned char>(c)) && !strchr("/._-+@", c))
      return fail(error, o, v, std::string("character '") + c + "' is not allowed");
  for (size_t b = 0; b < v.size();) {
    size_t e = v.find('/', b);
    if (e == std::string::npos) e = v.size();
    if (v.compare(b, e - b, "..") == 0) return fail(error, o, v, "'..' is not allowed");
    b = e + 1;
  }
  for (const auto& root : policy.checkpoint_roots)
    if (lexically_inside(v, root)) return true;
  std::string roots;
  for (const auto& root : policy.checkpoint_roots) roots += (roots.empty() ? "" : ", ") + root;
  return fail(error, o, v, "outside the allowed checkpoint roots (" + roots + ")");
}

bool apply_option(const Option& o, const std::string& v, const scaleguard::Policy& policy,
                  JobRequest* job, RequestError* error) {
  std::string name = o.name;
  if (name == "train_model") {
    if (v.size() > kMaxModel) return fail(error, o, v, "too long");
    auto ok = scaleguard::validate_model_spec(v, policy.catalog);
    if (!ok) return fail(error, o, v, ok.error().str());
    job->model = v;
  } else if (name == "train_tokens") {
    auto n = scaleguard::parse_count(v);
    if (!n) return fail(error, o, v, n.error().str());
    job->tokens = *n;
  } else if (name == "train_eval_tokens") {
    auto n = scaleguard::parse_count(v);
    if (!n) return fail(error, o, v, n.error().str());
    if (!(*n > 0)) return fail(error, o, v, "must be positive");
    job->eval_tokens = *n;
  } else if (name == "train_eval_every") {
    if (v.empty() || v.size() > 10 || v.find_first_not_of("0123456789") != std::string::npos)
      return fail(error, o, v, "not a whole number of steps");
    const long long steps = std::stoll(v);
    if (steps < 1 || steps > scaleguard::kMaxEvalEvery) return fail(error, o, v, "out of range");
    job->eval_interval = static_cast<double>(steps);
  } else if (name == "train_spare_nodes") {
    // Bounded before any conversion; decide() refuses spares that leave no node to train on.
    if (v.empty() || v.size() > 4 || v.find_first_not_of("0123456789") != std::string::npos)
      return fail(error, o, v, "not a whole number of nodes");
    const int n = std::stoi(v);
    if (n > scaleguard::kMaxSpareNodes) return fail(error, o, v, "out of range");
    job->spare_nodes = n;
  } else if (name == "train_single_gpu_hours" || name == "train_deadline") {
    auto h = scaleguard::parse_hours(v);
    if (!h) return fail(error, o, v, h.error().str());
    (name == "train_deadline" ? job->deadline_hours : job->single_gpu_hours) = *h;
  } else if (name == "train_strategy") {
    auto s = scaleguard::parse_strategy(v);
    if (!s) return fail(error, o, v, s.error().str());
    job->strategy = *s;
  } else if (name == "train_ckpt_dir") {
    if (!check_ckpt_dir(v, policy, o, error)) return false;
    job->ckpt_dir = v;
  } else if (name == "train_probe") {
    if (v != "1" && v != "yes" && v != "on") return fail(error, o, v, "not a flag value");
    job->probe = true;
  } else if (name == "train_ckpt_interval") {
    if (v == "auto") {
      job->ckpt_interval_min = 0;
    } else {
      if (v.size() > 6 || v.find_first_not_of("0123456789") != std::string::npos)
        return fail(error, o, v, "not a whole number of minutes");
      int m = std::stoi(v);
      if (m < 1 || m > kMaxIntervalMin) return fail(error, o, v, "out of range");
      job->ckpt_interval_min = m;
    }
  }
  return true;
}

// Collects our option entries from one env array into *seen; false on a bad entry.
bool collect(char** env, uint32_t size, std::map<const Option*, std::string>* seen,
             RequestError* error) {
  const size_t prefix_len = strlen(kSpankOptionPrefix);
  for (uint32_t i = 0; env && i < size && env[i]; ++i) {
    const char* entry = env[i];
    if (strncmp(entry, kSpankOptionPrefix, prefix_len) != 0) continue;
    const char* name = entry + prefix_len;
    const char* eq = static_cast<const char*>(memchr(name, '=', strnlen(name, 128)));
    if (!eq) continue;
    const Option* o = find_option(std::string(name, eq - name));
    if (!o) {
      slurm_debug("job_submit/scaleguard: ignoring unknown option entry %.64s", entry);
      continue;
    }
    size_t len = strnlen(eq + 1, kMaxValue + 1);
    std::string_view value(eq + 1, len);
    // A flag option (--train-probe) arrives with no value: "" in the batch environment,
    // "(null)" in the spank env.
    if (!strcmp(o->name, "train_probe") && (len == 0 || value == "(null)")) value = "1";
    len = value.size();
    if (len > kMaxValue) return fail(error, *o, value, "value longer than 4096 bytes");
    if (len == 0) return fail(error, *o, value, "empty value");
    if (has_control(value))
      return fail(error, *o, value, "control characters (newline, tab, ...) are not allowed");
    auto [it, inserted] = seen->emplace(o, std::string(value));
    if (!inserted && it->second != value)
      return fail(error, *o, value, "given twice with different values (" + preview(it->second) + ")");
  }
  return true;
}

// The SPANK plugin forwards options through the spank env (all submissions) and, in sbatch,
// Slurm also exports them into the batch environment; both are read, and must agree.
bool read_intent(const job_desc_msg_t& job, const scaleguard::Policy& policy, JobRequest* out,
                 RequestError* error) {
  std::map<const Option*, std::string> seen;
  if (!collect(job.spank_job_env, job.spank_job_env_size, &seen, error) ||
      !collect(job.environment, job.env_size, &seen, error))
    return false;
  for (const auto& [o, value] : seen)
    if (!apply_option(*o, value, policy, out, error)) return false;
  return true;
}

}  // namespace

void derive_gpus(JobRequest* r, bool update) {
  if (r->ntasks_per_gpu <= 0) return;
  // Submission (_figure_out_num_tasks, gres_job_state_validate): without -n Slurm sets
  // ntasks = min nodes (1, or the -w host count) x N, so GPUs = nodes; with -n, ntasks / N.
  // An update that sets NumNodes=A (A-A) re-derives ntasks = A x N: judged as the larger of both.
  const int nodes = std::max({1, r->nodes_min, r->nodes_listed});
  const int derived = r->ntasks > 0 ? r->ntasks / r->ntasks_per_gpu : nodes;
  r->gpus_total = std::max({r->gpus_total, derived, update ? nodes : 0});
}

bool read_request(const job_desc_msg_t& job, uint32_t submit_uid,
                  const scaleguard::Policy& policy, JobRequest* out, RequestError* error,
                  std::vector<std::string>* partitions) {
  JobRequest r;
  const auto& shared = policy.shared_gres;
  if (!read_gpu_field(job.tres_per_job, "--gpus", shared, &r.gpus_total, &r.gpu_type, error) ||
      !read_gpu_field(job.tres_per_node, "--gpus-per-node/--gres", shared, &r.gpus_per_node, &r.gpu_type, error) ||
      !read_gpu_field(job.tres_per_task, "--gpus-per-task", shared, &r.gpus_per_task, &r.gpu_type, error) ||
      !read_gpu_field(job.tres_per_socket, "--gpus-per-socket", shared, &r.gpus_per_socket, &r.gpu_type, error))
    return false;
  r.nodes_min = from_u32(job.min_nodes);
  // An open range (-N 1-, scontrol update NumNodes=1-) sends max_nodes = INFINITE: as many
  // nodes as the partition allows (the envelope clamps this to the partition's max_nodes).
  r.nodes_max = job.max_nodes == INFINITE ? kOpenNodes : from_u32(job.max_nodes);
  r.ntasks = from_u32(job.num_tasks);
  r.ntasks_per_node = from_u16(job.ntasks_per_node);
  r.ntasks_per_gpu = from_u16(job.ntasks_per_tres);
  r.sockets_per_node = from_u16(job.sockets_per_node);
  r.exclusive = job.shared == JOB_SHARED_NONE;  // --exclusive (=user and =mcs still share GPUs)
#ifdef JOB_SHARED_TOPO
  r.exclusive = r.exclusive || job.shared == JOB_SHARED_TOPO;  // whole nodes of a whole segment
#endif
  // --core-spec under AllowSpecResourcesUsage: Slurm gives the whole node (job_mgr.c, whole_node).
#ifdef CONF_FLAG_ASRU  // 25.11 renamed the flag
  const bool spec_resources_usage = slurm_conf.conf_flags & CONF_FLAG_ASRU;
#else
  const bool spec_resources_usage = slurm_conf.conf_flags & CTL_CONF_ASRU;
#endif
  r.exclusive = r.exclusive || (job.core_spec != NO_VAL16 && spec_resources_usage);
  // Slurm keeps offsets below MAX_HET_JOB_COMPONENTS; an absurd one stays a (non-leader)
  // component, bounded so the record's offset + 1 still fits (fuzz: offset 2130706432).
  r.het_component = job.het_job_offset == NO_VAL ? -1 : from_u32(job.het_job_offset);
  if (!read_count(job.req_nodes, true, &r.nodes_listed, error) ||
      !read_count(job.array_inx, false, &r.array_tasks, error))
    return false;
  r.time_limit_min = job.time_limit == INFINITE ? -1 : from_u32(job.time_limit);
  r.requeue = job.requeue == 1;
  // --signal=B:USR1@N (what checkpoint_required sets): USR1 to the batch shell N s early.
  if (job.warn_signal == SIGUSR1 && job.warn_time != NO_VAL16 && job.warn_flags != NO_VAL16 &&
      (job.warn_flags & KILL_JOB_BATCH))
    r.checkpoint_signal_s = job.warn_time;
  // The whole list, each partition once (issue 36, class 7): a cut list let a governed name
  // past the cut escape its rules. One too long to read whole is refused.
  std::vector<std::string> listed;
  if (job.partition && *job.partition) {
    const size_t len = strnlen(job.partition, scaleguard::kMaxPartitionList + 1);
    auto names = scaleguard::partition_names(std::string(job.partition, len));
    if (!names) {
      *error = {ESLURM_INVALID_PARTITION_NAME, "scaleguard: --partition: " + names.error().str()};
      return false;
    }
    r.partition = scaleguard::text::join(*names, ",");
    listed = std::move(*names);
  }
  r.user = "uid " + std::to_string(sg_shim::user_id(job, submit_uid));
  if (!read_intent(job, policy, &r, error)) return false;
  // --ntasks-per-gpu without a GPU request: slurmctld creates gres/gpu:ntasks/N after us.
  if (r.ntasks_per_gpu > 0 && gpu_named(job)) r.ntasks_per_gpu = 0;  // then it derives no GPUs
  derive_gpus(&r, false);
  *out = std::move(r);
  if (partitions) *partitions = std::move(listed);
  return true;
}

}  // namespace sg_slurm
