// Harness 4: job_submit/scaleguard's request path as slurmctld drives it, minus slurmctld.
// A job_desc_msg_t is built from the input (FuzzedDataProvider): every string field the
// plugin reads or rewrites (TRES per job/node/task/socket, partition, comments, node lists,
// array index, ...) is NULL, a realistic value or arbitrary bytes; the spank env and batch
// environment hold forwarded --train-* options (real or mangled names, real or mangled
// values) mixed with other variables; numeric fields take Slurm's NO_VAL/INFINITE markers,
// small values or anything.
// Then: sg_slurm::read_request -> scaleguard::decide (shipped configs/policy.ini) ->
// sg_slurm::apply_decision / apply_to_update, and the plugin's text helpers (text.cpp) on the
// same strings. Everything the plugin hands back to Slurm or the user is checked: return
// codes, messages without control characters, NULL-terminated env arrays of the stated size,
// and no leaks (all fields are freed the way slurmctld frees them, via the stub allocator).
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "apply.h"
#include "fuzz_common.h"
#include "record.h"
#include "request.h"
#include "slurm_stubs.h"
#include "text.h"

namespace {

constexpr const char* kTres[] = {
    "gres:gpu:a100:8", "gres:gpu:8", "gres/gpu:8", "gres/gpu:1k", "gres:shard:4", "gpu:2", "gres:gpu",
    "gres:gpu:h100:4,gres:gpu:a100:4", "cpu=4,gres/gpu=2", "gres/gpu:a100=2", "gres:gpu:0", "gres:gpu:100000",
    "gres/gpu:tesla_v100:1,gres/shard:2", "gres:gpu:a100", "gpu", "gres/gpu:-1", "license/foo:1,gres/gpu:2"};
constexpr const char* kPartitions[] = {"gpu-od", "gpu-spot", "gpu-h100", "gpu-od,gpu-spot", "debug", ""};
constexpr const char* kOptions[] = {"train_model", "train_tokens", "train_single_gpu_hours", "train_strategy",
                                    "train_deadline", "train_ckpt_dir", "train_ckpt_interval", "train_probe", "train_eval_every",
                                    "train_eval_tokens", "train-model",
                                    "train_unknown", "train_model_x", ""};
constexpr const char* kValues[] = {"350M", "7B", "llama2-7b", "layers=48,hidden=8192,heads=64", "40B", "1.5T",
                                   "1e9", "11", "11h", "90m", "2d", "1-12:00:00", "auto", "ddp", "zero",
                                   "hybrid", "/scratch/run1", "/fsx/../etc", "/tmp/a b", "30", "auto", "0",
                                   "525601", "-5", "", "nan", "inf", "1e400", "(null)", "1", "yes", "1000",
                                   "20M", "1073741825", "0.5"};
constexpr const char* kOther[] = {"_SLURM_SPANK_OPTION_other_opt=1", "PATH=/usr/bin", "SLURM_GPUS=8",
                                  "SCALEGUARD_STRATEGY=ddp", "SCALEGUARD_PLAN=mine", "=", ""};

template <size_t N>
std::string pick_or_bytes(FuzzedDataProvider& in, const char* const (&choices)[N], size_t max_len) {
  if (in.ConsumeBool()) return choices[in.ConsumeIntegralInRange<size_t>(0, N - 1)];
  return in.ConsumeRandomLengthString(max_len);
}

uint32_t draw_u32(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 4)) {
    case 0: return NO_VAL;
    case 1: return INFINITE;
    case 2: return in.ConsumeIntegralInRange<uint32_t>(0, 64);
    case 3: return in.ConsumeBool() ? 0 : NO_VAL - 1;
    default: return in.ConsumeIntegral<uint32_t>();
  }
}

uint16_t draw_u16(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: return NO_VAL16;
    case 1: return INFINITE16;
    case 2: return in.ConsumeIntegralInRange<uint16_t>(0, 64);
    default: return in.ConsumeIntegral<uint16_t>();
  }
}

// A string field: NULL, realistic, or bytes (a C string ends at the first NUL, as on the wire).
template <size_t N>
char* draw_field(FuzzedDataProvider& in, const char* const (&choices)[N], size_t max_len) {
  if (in.ConsumeIntegralInRange<int>(0, 3) == 0) return nullptr;
  return sg_fuzz::slurm_alloc_string(pick_or_bytes(in, choices, max_len));
}
char* draw_text(FuzzedDataProvider& in, size_t max_len) {
  if (in.ConsumeBool()) return nullptr;
  return sg_fuzz::slurm_alloc_string(in.ConsumeRandomLengthString(max_len));
}

std::vector<std::string> draw_env(FuzzedDataProvider& in) {
  std::vector<std::string> env;
  const int n = in.ConsumeIntegralInRange<int>(0, 10);
  for (int i = 0; i < n; ++i) {
    std::string entry;
    switch (in.ConsumeIntegralInRange<int>(0, 3)) {
      case 0: case 1: {  // one statement per draw: fuzz/seeds.py relies on the order
        const std::string option = pick_or_bytes(in, kOptions, 32);
        const std::string value = pick_or_bytes(in, kValues, 300);
        entry = std::string(sg_slurm::kSpankOptionPrefix) + option + "=" + value;
        break;
      }
      case 2: entry = pick_or_bytes(in, kOther, 64); break;
      default: entry = in.ConsumeRandomLengthString(128); break;
    }
    // A C string: the wire format cannot carry an embedded NUL.
    entry.resize(strnlen(entry.c_str(), entry.size()));
    env.push_back(entry);
  }
  return env;
}

// Every string field the harness sets or the plugin may set: freed as slurmctld would.
char* job_desc_msg_t::*const kStringFields[] = {
    &job_desc_msg_t::tres_per_job,  &job_desc_msg_t::tres_per_node, &job_desc_msg_t::tres_per_task,
    &job_desc_msg_t::tres_per_socket, &job_desc_msg_t::partition,   &job_desc_msg_t::req_nodes,
    &job_desc_msg_t::exc_nodes,     &job_desc_msg_t::array_inx,     &job_desc_msg_t::admin_comment,
    &job_desc_msg_t::comment,       &job_desc_msg_t::name,          &job_desc_msg_t::account,
    &job_desc_msg_t::qos,           &job_desc_msg_t::features,      &job_desc_msg_t::job_id_str,
    &job_desc_msg_t::cpus_per_tres, &job_desc_msg_t::mem_per_tres,  &job_desc_msg_t::tres_bind,
    &job_desc_msg_t::licenses,      &job_desc_msg_t::dependency,    &job_desc_msg_t::reservation,
    &job_desc_msg_t::work_dir};

void check_env(char** env, uint32_t size, const char* which) {
  if (!env) {
    SG_FUZZ_CHECK(size == 0, which);
    return;
  }
  for (uint32_t i = 0; i < size; ++i) SG_FUZZ_CHECK(env[i] != nullptr, which);
  SG_FUZZ_CHECK(env[size] == nullptr, which);  // NULL-terminated, as Slurm's env code expects
}

void check_user_text(const char* text, size_t max, const char* what) {
  if (!text) return;
  const std::string s(text);
  SG_FUZZ_CHECK(!sg_fuzz::has_control(s), std::string(what) + ": " + s.substr(0, 200));
  SG_FUZZ_CHECK(s.size() <= max, std::string(what) + " too long: " + std::to_string(s.size()));
}

void fuzz_text_helpers(const std::string& s, size_t max) {
  const std::string line = sg_slurm::one_line(s, max);
  SG_FUZZ_CHECK(!sg_slurm::has_control(line), line);
  SG_FUZZ_CHECK(line.find("  ") == std::string::npos, line);
  SG_FUZZ_CHECK(line.empty() || (line.front() != ' ' && line.back() != ' ') || line.size() > max, line);
  if (max >= 3) SG_FUZZ_CHECK(line.size() <= max, line);
  SG_FUZZ_CHECK(sg_slurm::has_control(s) == sg_fuzz::has_control(s), s);
  const std::string p = sg_slurm::preview(s);
  SG_FUZZ_CHECK(!sg_slurm::has_control(p) && p.size() <= 64, p);
  if (sg_slurm::is_plan_env_name(s)) {
    SG_FUZZ_CHECK(s.rfind("SCALEGUARD_", 0) == 0 && s.size() > 11 && s.size() <= 64, s);
    for (char c : s) SG_FUZZ_CHECK((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_', s);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const scaleguard::Policy& policy = sg_fuzz::shipped_policy();
  FuzzedDataProvider in(data, size);

  job_desc_msg_t job;
  memset(&job, 0, sizeof job);
  job.tres_per_job = draw_field(in, kTres, 128);
  job.tres_per_node = draw_field(in, kTres, 128);
  job.tres_per_task = draw_field(in, kTres, 128);
  job.tres_per_socket = draw_field(in, kTres, 128);
  job.partition = draw_field(in, kPartitions, 64);
  job.req_nodes = draw_text(in, 64);
  job.exc_nodes = draw_text(in, 64);
  job.array_inx = draw_text(in, 32);
  job.admin_comment = draw_text(in, 64);
  job.comment = draw_text(in, 200);
  job.name = draw_text(in, 32);
  job.job_id_str = draw_text(in, 16);
  job.cpus_per_tres = draw_field(in, kTres, 32);
  job.mem_per_tres = draw_field(in, kTres, 32);
  job.features = draw_text(in, 32);
  job.licenses = draw_text(in, 32);
  job.min_nodes = draw_u32(in);
  job.max_nodes = draw_u32(in);
  job.num_tasks = draw_u32(in);
  job.time_limit = draw_u32(in);
  job.time_min = draw_u32(in);
  job.min_cpus = draw_u32(in);
  job.max_cpus = draw_u32(in);
  job.user_id = draw_u32(in);
  job.het_job_offset = draw_u32(in);
  job.shared = draw_u16(in);
  job.ntasks_per_node = draw_u16(in);
  job.ntasks_per_socket = draw_u16(in);
  job.ntasks_per_tres = draw_u16(in);
  job.sockets_per_node = draw_u16(in);
  job.cores_per_socket = draw_u16(in);
  job.threads_per_core = draw_u16(in);
  job.cpus_per_task = draw_u16(in);
  job.requeue = draw_u16(in);
  job.warn_flags = draw_u16(in);
  job.warn_signal = draw_u16(in);
  job.warn_time = draw_u16(in);
  job.contiguous = draw_u16(in);
  const std::vector<std::string> spank_env = draw_env(in);
  job.spank_job_env = spank_env.empty() && in.ConsumeBool() ? nullptr : sg_fuzz::slurm_alloc_env(spank_env);
  job.spank_job_env_size = job.spank_job_env ? static_cast<uint32_t>(spank_env.size()) : 0;
  const std::vector<std::string> environment = draw_env(in);
  job.environment = environment.empty() && in.ConsumeBool() ? nullptr : sg_fuzz::slurm_alloc_env(environment);
  job.env_size = job.environment ? static_cast<uint32_t>(environment.size()) : 0;
  const uint32_t submit_uid = in.ConsumeIntegral<uint32_t>();
  const bool update = in.ConsumeBool();

  scaleguard::JobRequest request;
  sg_slurm::RequestError error{0, ""};
  if (sg_fuzz::verbose()) {
    auto str = [](const char* s) { return s ? s : "(null)"; };
    std::fprintf(stderr, "job: tres_per_job=%s tres_per_node=%s tres_per_task=%s tres_per_socket=%s partition=%s "
                 "min_nodes=%u max_nodes=%u num_tasks=%u time_limit=%u spank_env=%u env=%u update=%d\n",
                 str(job.tres_per_job), str(job.tres_per_node), str(job.tres_per_task), str(job.tres_per_socket),
                 str(job.partition), job.min_nodes, job.max_nodes, job.num_tasks, job.time_limit,
                 job.spank_job_env_size, job.env_size, update);
    for (const auto& e : spank_env) std::fprintf(stderr, "  spank env: %s\n", e.c_str());
    for (const auto& e : environment) std::fprintf(stderr, "  environment: %s\n", e.c_str());
  }
  const bool read = sg_slurm::read_request(job, submit_uid, policy, &request, &error);
  if (sg_fuzz::verbose()) {
    if (read) sg_fuzz::print_request(request);
    else std::fprintf(stderr, "refused (%d): %s\n", error.code, error.message.c_str());
  }
  if (read) {
    const scaleguard::Decision decision = scaleguard::decide(request, policy);
    if (sg_fuzz::verbose()) std::fprintf(stderr, "decision: %s\n", decision.summary.c_str());
    const std::string id = "sg-1700000000-1";
    if (update) {
      // job_modify: the AdminComment record after an accepted update, read back.
      const std::string comment = sg_slurm::record_after_update(request, id, decision.summary,
                                                                job.admin_comment ? job.admin_comment : "");
      check_user_text(comment.c_str(), 1024, "AdminComment after update");
      SG_FUZZ_CHECK(sg_slurm::decode_record(comment).has_value(), comment);
    } else {
      char* err_msg = nullptr;
      const sg_slurm::Applied applied = sg_slurm::apply_decision(decision, request, id, &job, &err_msg);
      SG_FUZZ_CHECK(applied.rc == SLURM_SUCCESS || applied.rc == sg_slurm::kRefused, std::to_string(applied.rc));
      SG_FUZZ_CHECK(applied.rc == SLURM_SUCCESS || err_msg != nullptr, "a refusal without a message");
      check_user_text(err_msg, 4 * sg_slurm::kMaxMessage, "err_msg");
      slurm_xfree(reinterpret_cast<void**>(&err_msg));
      if (decision.governed && applied.rc == SLURM_SUCCESS && !decision.shadow) {
        // The record job_modify will read must come back from the AdminComment.
        SG_FUZZ_CHECK(job.admin_comment != nullptr, "no AdminComment record");
        check_user_text(job.admin_comment, 1024, "AdminComment");
        SG_FUZZ_CHECK(sg_slurm::decode_record(job.admin_comment).has_value(), job.admin_comment);
      }
      for (char* f : {job.tres_per_job, job.tres_per_node, job.tres_per_task, job.tres_per_socket})
        check_user_text(f, sg_slurm::kMaxValue + 64, "TRES");
      check_env(job.spank_job_env, job.spank_job_env_size, "spank_job_env");
      check_env(job.environment, job.env_size, "environment");
      // The plan the plugin exported into the spank env: the first entry of each name, which
      // it overwrites (a refused, ungoverned or shadow job keeps the user's entries as sent).
      const bool annotated = decision.governed && applied.rc == SLURM_SUCCESS && !decision.shadow;
      for (const auto& [name, value] : decision.plan_env) {
        const std::string prefix = name + "=";
        for (uint32_t i = 0; annotated && job.spank_job_env && i < job.spank_job_env_size; ++i) {
          if (strncmp(job.spank_job_env[i], prefix.c_str(), prefix.size()) != 0) continue;
          check_user_text(job.spank_job_env[i], 1024, "spank_job_env plan entry");
          break;
        }
      }
    }
  } else {
    SG_FUZZ_CHECK(error.code != 0 && error.code != SLURM_SUCCESS, error.message);
    SG_FUZZ_CHECK(!error.message.empty(), "a refusal without a message");
    check_user_text(error.message.c_str(), 4 * sg_slurm::kMaxMessage, "error message");
  }
  // AdminComment as slurmctld hands it to job_modify: any text an admin (or we) wrote.
  if (job.admin_comment) (void)sg_slurm::decode_record(job.admin_comment);

  // The plugin's text helpers on the strings it saw.
  const size_t max = in.ConsumeIntegralInRange<size_t>(0, 300);
  for (const auto& e : spank_env) fuzz_text_helpers(e, max);
  for (const auto& e : environment) fuzz_text_helpers(e, max);
  fuzz_text_helpers(in.ConsumeRemainingBytesAsString(), max);

  for (auto field : kStringFields) slurm_xfree(reinterpret_cast<void**>(&(job.*field)));
  sg_fuzz::slurm_free_env(&job.spank_job_env, job.spank_job_env_size);
  sg_fuzz::slurm_free_env(&job.environment, job.env_size);
  return 0;
}
