// load_catalog(): configs/catalog.ini -> Catalog. Section kinds: [assumptions], [gpu NAME],
// [instance NAME], [model NAME]; anything else is an error with its line.
#include <algorithm>
#include <cmath>

#include "scaleguard/ini.h"
#include "scaleguard/catalog.h"
#include "scaleguard/decide.h"
#include "scaleguard/model.h"
#include "scaleguard/text.h"

namespace scaleguard {

bool GpuType::matches(const std::string& gres_type) const {
  if (text::iequals(name, gres_type)) return true;
  return std::any_of(aliases.begin(), aliases.end(),
                     [&](const std::string& a) { return text::iequals(a, gres_type); });
}

const GpuType* Catalog::find_gpu(const std::string& name_or_alias) const {
  for (const auto& g : gpus)
    if (text::iequals(g.name, name_or_alias)) return &g;
  for (const auto& g : gpus)
    if (g.matches(name_or_alias)) return &g;
  return nullptr;
}

const Instance* Catalog::find_instance(const std::string& name) const {
  for (const auto& i : instances)
    if (text::iequals(i.name, name)) return &i;
  return nullptr;
}

const ModelPreset* Catalog::find_model(const std::string& name) const {
  for (const auto& m : models)
    if (text::iequals(m.name, name)) return &m;
  return nullptr;
}

namespace {
using ini::Field;

Error section_error(const ini::File& f, const ini::Section& s, std::string message, std::string hint) {
  Error e;
  e.file = f.path;
  e.line = s.line;
  e.field = "[" + s.kind + (s.name.empty() ? "" : " " + s.name) + "]";
  e.message = std::move(message);
  e.hint = std::move(hint);
  return e;
}

std::string header(const ini::Section& s) { return s.kind + (s.name.empty() ? "" : " " + s.name); }
}  // namespace

Result<Catalog> load_catalog(const std::string& path) {
  try {
    auto file = ini::read(path);
    if (!file) return file.error();
    const ini::File& f = file.value();
    Catalog cat;
    cat.path = path;
    if (auto ok = ini::bind(f, "", 0, {}); !ok) return ok.error();  // no global keys
    for (const auto& sec : f.sections) {
      const std::string h = header(sec);
      if (sec.kind == "assumptions") {
        if (!sec.name.empty()) return section_error(f, sec, "[assumptions] takes no name", "write [assumptions]");
        auto& a = cat.assumptions;
        auto ok = ini::bind(f, h, sec.line, {
            {"bandwidth_utilization", Field::number, &a.bandwidth_utilization, 0.01, 1, false, "fraction 0-1"},
            {"comm_overlap", Field::number, &a.comm_overlap, 0, 1, false, "fraction 0-1"},
            {"memory_reserved_gib", Field::number, &a.memory_reserved_gib, 0, 64, false, "GiB"},
            {"memory_fragmentation", Field::number, &a.memory_fragmentation, 0, 1, false, "fraction 0-1"},
            {"node_mtbf_hours", Field::number, &a.node_mtbf_hours, 1, 1e7, false, "hours"},
            {"spot_interruption_hours", Field::number, &a.spot_interruption_hours, 1, 1e7, false, "node-hours"},
            {"checkpoint_write_gb_s", Field::number, &a.checkpoint_write_gb_s, 0.001, 1e4, false, "GB/s per node"},
            {"restart_seconds", Field::number, &a.restart_seconds, 0, 1e6, false, "seconds"},
            {"restart_in_job_seconds", Field::number, &a.restart_in_job_seconds, 0, 1e6, false, "seconds"},
            {"local_checkpoint_write_gb_s", Field::number, &a.local_checkpoint_write_gb_s, 0, 1e4, false, "GB/s per node"},
            {"elementwise_bytes", Field::number, &a.elementwise_bytes, 0, 1e4, false, "bytes per token, layer and hidden element"},
            {"score_bytes", Field::number, &a.score_bytes, 0, 1e4, false, "bytes per attention score element"},
            {"step_overhead_s", Field::number, &a.step_overhead_s, 0, 60, false, "seconds per optimizer step"},
            {"collective_latency_intra_us", Field::number, &a.collective_latency_intra_us, 0, 1e5, false, "microseconds per hop"},
            {"collective_latency_inter_us", Field::number, &a.collective_latency_inter_us, 0, 1e5, false, "microseconds per hop"},
            {"bucket_mb", Field::number, &a.bucket_mb, 0.1, 1e5, false, "MB per gradient bucket"},
            {"model_uncertainty", Field::number, &a.model_uncertainty, 0, 1, false, "relative band, fraction 0-1"}});
        if (!ok) return ok.error();
      } else if (sec.kind == "gpu") {
        if (sec.name.empty()) return section_error(f, sec, "GPU section without a name", "write [gpu A100-80GB]");
        GpuType g;
        g.name = sec.name;
        std::string aliases;
        auto ok = ini::bind(f, h, sec.line, {
            {"aliases", Field::text, &aliases, 0, 0, false, "comma list of gres types, e.g. a100,a100-80gb"},
            {"memory_gib", Field::number, &g.memory_gib, 1, 4096, true, "GiB of GPU memory"},
            {"tflops_fp32", Field::number, &g.tflops_fp32, 0.1, 1e5, true, "peak dense fp32 TFLOP/s"},
            {"tflops_fp16", Field::number, &g.tflops_fp16, 0.1, 1e5, true, "peak dense fp16 TFLOP/s"},
            {"tflops_bf16", Field::number, &g.tflops_bf16, 0, 1e5, false, "peak dense bf16 TFLOP/s, 0 = none"},
            {"nvlink_gb_s", Field::number, &g.nvlink_gb_s, 0, 1e5, false, "NVLink GB/s per GPU, both directions"},
            {"pcie_gb_s", Field::number, &g.pcie_gb_s, 0, 1e5, false, "PCIe GB/s, both directions"},
            {"efficiency", Field::number, &g.efficiency, 0.01, 1, true, "achieved/peak, 0-1"},
            {"hbm_gb_s", Field::number, &g.hbm_gb_s, 0, 1e5, false, "GPU memory bandwidth GB/s, 0 = not modelled"}});
        if (!ok) return ok.error();
        if (g.nvlink_gb_s <= 0 && g.pcie_gb_s <= 0)
          return section_error(f, sec, "no intra-node link", "set nvlink_gb_s or pcie_gb_s");
        if (!aliases.empty())
          for (auto& a : text::split(aliases, ','))
            if (!a.empty()) g.aliases.push_back(a);
        cat.gpus.push_back(std::move(g));
      } else if (sec.kind == "instance") {
        if (sec.name.empty()) return section_error(f, sec, "instance section without a name", "write [instance p4d.24xlarge]");
        Instance in;
        in.name = sec.name;
        auto ok = ini::bind(f, h, sec.line, {
            {"gpu", Field::text, &in.gpu, 0, 0, true, "a [gpu NAME] of this file"},
            {"gpus", Field::integer, &in.gpus, 1, 64, true, "GPUs per node"},
            {"efa", Field::integer, &in.efa, 0, 64, false, "EFA adapters"},
            {"network_gbps", Field::number, &in.network_gbps, 0.1, 1e5, true, "node network Gbit/s"},
            {"in_network_reduction", Field::yes_no, &in.in_network_reduction, 0, 0, false,
             "yes when the fabric reduces in its switches (InfiniBand SHARP)"},
            {"on_demand", Field::number, &in.on_demand, 0, 1e4, true, "$/hour"},
            {"spot", Field::number, &in.spot, 0, 1e4, false, "$/hour (absent or 0: no spot price)"}});
        if (!ok) return ok.error();
        cat.instances.push_back(std::move(in));
      } else if (sec.kind == "model") {
        if (sec.name.empty()) return section_error(f, sec, "model section without a name", "write [model llama2-7b]");
        ModelPreset m;
        m.name = sec.name;
        std::string params, tied;
        auto ok = ini::bind(f, h, sec.line, {
            {"params", Field::text, &params, 0, 0, false, "parameter count, e.g. 6.74B"},
            {"layers", Field::integer, &m.layers, 1, 1000, true, "transformer layers"},
            {"hidden", Field::integer, &m.hidden, 64, 262144, true, "hidden size"},
            {"heads", Field::integer, &m.heads, 1, 4096, true, "attention heads"},
            {"seq", Field::integer, &m.seq, 16, 1 << 20, true, "sequence length"},
            {"vocab", Field::integer, &m.vocab, 2, 10000000, true, "vocabulary size"},
            {"arch", Field::text, &m.arch, 0, 0, false, "gpt (default) or llama"},
            {"kv_heads", Field::integer, &m.kv_heads, 1, 4096, false, "key/value heads (GQA), default heads"},
            {"ffn_hidden", Field::integer, &m.ffn_hidden, 1, 4194304, false,
             "llama SwiGLU width, default 2/3*4*hidden rounded up to a multiple of 256"},
            {"rope_theta", Field::number, &m.rope_theta, 1, 1e12, false, "llama rotary base"},
            {"norm_eps", Field::number, &m.norm_eps, 1e-12, 1, false, "llama RMSNorm epsilon"},
            {"tied", Field::text, &tied, 0, 0, false, "yes: output head = embedding^T (gpt default), no (llama default)"}});
        if (!ok) return ok.error();
        auto entry_error = [&](const char* key, std::string message, std::string hint) -> Error {
          for (const auto& e : f.entries)
            if (e.section == h && e.key == key) return f.error_at(e, message, hint);
          return section_error(f, sec, std::move(message), std::move(hint));
        };
        if (m.arch != "gpt" && m.arch != "llama")
          return entry_error("arch", "unknown arch '" + m.arch + "'", "gpt or llama");
        if (m.arch == "gpt") {
          for (const char* key : {"ffn_hidden", "rope_theta", "norm_eps", "kv_heads"})
            for (const auto& e : f.entries)
              if (e.section == h && e.key == key)
                return f.error_at(e, std::string(key) + " is a llama key", "add arch = llama or remove it");
        }
        m.tied = m.arch == "gpt";
        if (tied == "yes" || tied == "true") m.tied = true;
        else if (tied == "no" || tied == "false") m.tied = false;
        else if (!tied.empty()) return entry_error("tied", "tied must be yes or no, not '" + tied + "'", "yes or no");
        if (m.kv_heads == 0) m.kv_heads = m.heads;
        if (m.heads % m.kv_heads != 0)
          return entry_error("kv_heads", "kv_heads does not divide heads", "each key/value head serves heads/kv_heads query heads");
        if (m.arch == "llama" && m.ffn_hidden == 0) m.ffn_hidden = llama_ffn_hidden(m.hidden);
        if (!params.empty()) {
          auto p = parse_count(params);
          if (!p) {
            for (const auto& e : f.entries)
              if (e.section == h && e.key == "params") return f.error_at(e, p.error().message, p.error().hint);
            return p.error();
          }
          m.params = p.value();
        }
        if (m.hidden % m.heads != 0)
          return section_error(f, sec, "hidden is not a multiple of heads", "check the model's shape");
        if (m.arch == "llama") {
          // The shape is the truth (the runner builds it); a stated count must agree to 1%.
          const double exact = llama_params(m.layers, m.hidden, m.heads, m.kv_heads, m.ffn_hidden, m.vocab, m.tied);
          if (m.params > 0 && std::abs(m.params - exact) > 0.01 * exact)
            return entry_error("params", text::format("params %.4g disagree with the shape's %.0f", m.params, exact),
                               "fix the shape (kv_heads, ffn_hidden, tied) or the count");
          m.params = exact;
        }
        cat.models.push_back(std::move(m));
      } else {
        return section_error(f, sec, "unknown section kind '" + sec.kind + "'",
                             "sections are [assumptions], [gpu NAME], [instance NAME], [model NAME]");
      }
    }
    for (const auto& in : cat.instances) {
      if (!cat.find_gpu(in.gpu)) {
        for (const auto& e : f.entries)
          if (e.section == "instance " + in.name && e.key == "gpu")
            return f.error_at(e, "unknown GPU type '" + in.gpu + "'", "add a [gpu " + in.gpu + "] section or fix the name");
      }
    }
    if (cat.gpus.empty()) {
      Error e;
      e.file = path;
      e.message = "no [gpu NAME] section";
      e.hint = "a catalog needs at least one GPU type";
      return e;
    }
    return cat;
  } catch (const std::exception& ex) {
    Error e;
    e.file = path;
    e.message = std::string("internal error: ") + ex.what();
    return e;
  }
}

Result<bool> apply_catalog_override(Catalog& base, const std::string& path) {
  try {
    auto file = ini::read(path);
    if (!file) return file.error();
    const ini::File& f = file.value();
    Catalog cat = base;  // edited copy: `base` stays as it was on any error
    if (auto ok = ini::bind(f, "", 0, {}); !ok) return ok.error();
    bool any = false;
    for (const auto& sec : f.sections) {
      const std::string h = header(sec);
      // Fitted terms, shared by [gpu NAME] and [host NAME]; absent = keep the catalog's.
      double eff = 0, overhead = -1, alpha = -1, beta = 0, rms = 0;
      std::string sources, fitted;
      std::vector<Field> terms = {
          {"efficiency", Field::number, &eff, 0.001, 1000, false, "achieved / peak (a host's peak is its probe rate: may exceed 1)"},
          {"step_overhead_s", Field::number, &overhead, 0, 60, false, "seconds per optimizer step"},
          {"comm_alpha_s", Field::number, &alpha, 0, 1, false, "seconds per collective hop or transfer"},
          {"comm_beta_gb_s", Field::number, &beta, 1e-6, 1e6, false, "achieved GB/s rank to rank, one direction"},
          {"sources", Field::text, &sources, 0, 0, false, "comma list of [source N] numbers"},
          {"fitted", Field::text, &fitted, 0, 0, false, "comma list of the fitted keys"},
          {"rms_error", Field::number, &rms, 0, 1e6, false, "root-mean-square relative error of the fit"}};
      auto apply = [&](GpuType& g) {
        if (eff > 0) g.efficiency = eff;
        if (overhead >= 0) g.step_overhead_s = overhead;
        if (alpha >= 0) g.comm_alpha_s = alpha;
        if (beta > 0) g.comm_beta_gb_s = beta;
        g.calibrated_by = path;
      };
      if (sec.kind == "calibration") {
        if (!sec.name.empty()) return section_error(f, sec, "[calibration] takes no name", "write [calibration]");
        std::string written, version, command, note;
        auto ok = ini::bind(f, h, sec.line, {
            {"written", Field::text, &written, 0, 0, false, "UTC time, e.g. 2026-12-03T22:40:00Z"},
            {"scaleguard_version", Field::text, &version, 0, 0, false, "version of the scaleguard that fitted"},
            {"command", Field::text, &command, 0, 0, false, "the calibrate command line"},
            {"note", Field::text, &note, 0, 0, false, "free text"}});
        if (!ok) return ok.error();
      } else if (sec.kind == "source") {
        std::string file_name, sha, layout, steps, held;
        double measured = 0, fitted_s = 0;
        auto ok = ini::bind(f, h, sec.line, {
            {"file", Field::text, &file_name, 0, 0, true, "the metrics file the fit read"},
            {"sha256", Field::text, &sha, 0, 0, true, "SHA-256 of that file, 64 hex digits"},
            {"layout", Field::text, &layout, 0, 0, false, "the run's layout"},
            {"steps", Field::text, &steps, 0, 0, false, "steps used"},
            {"held_out", Field::text, &held, 0, 0, false, "yes: compared, not fitted"},
            {"measured_step_s", Field::number, &measured, 0, 1e9, false, "median measured step"},
            {"fitted_step_s", Field::number, &fitted_s, 0, 1e9, false, "the calibrated planner's step"}});
        if (!ok) return ok.error();
        if (sha.size() != 64 || sha.find_first_not_of("0123456789abcdef") != std::string::npos)
          for (const auto& e : f.entries)
            if (e.section == h && e.key == "sha256") return f.error_at(e, "not a SHA-256 (64 lower-case hex digits)");
      } else if (sec.kind == "gpu") {
        if (sec.name.empty()) return section_error(f, sec, "GPU section without a name", "write [gpu A100-80GB]");
        auto ok = ini::bind(f, h, sec.line, terms);
        if (!ok) return ok.error();
        GpuType* g = nullptr;
        for (auto& x : cat.gpus)
          if (text::iequals(x.name, sec.name)) g = &x;
        if (!g) {
          std::vector<std::string> names;
          for (const auto& x : cat.gpus) names.push_back(x.name);
          const std::string near = text::closest(sec.name, names);
          return section_error(f, sec, "GPU type '" + sec.name + "' is not in the catalog " + cat.path,
                               near.empty() ? "an override calibrates GPU types the catalog has; a measured host is [host NAME]"
                                            : "did you mean '" + near + "'?");
        }
        apply(*g);
        any = true;
      } else if (sec.kind == "host") {
        if (sec.name.empty()) return section_error(f, sec, "host section without a name", "write [host NAME]");
        if (cat.find_gpu(sec.name) || cat.find_instance(sec.name))
          return section_error(f, sec, "host '" + sec.name + "' has the name of a GPU or instance type of the catalog",
                               "rename the host (scaleguard calibrate --host-name)");
        double peak = 0, link = 0, network = 0, memory = 64, cores = 0;
        int ranks = 1;
        std::vector<Field> fields = {
            {"peak_gflops", Field::number, &peak, 1e-3, 1e9, true, "peak GFLOP/s per rank the efficiency refers to"},
            {"link_gb_s", Field::number, &link, 1e-6, 1e6, true, "rank-to-rank GB/s inside the host, one direction"},
            {"network_gb_s", Field::number, &network, 0, 1e6, false, "GB/s between hosts (default: the link's)"},
            {"ranks_per_node", Field::integer, &ranks, 1, 4096, true, "ranks per host"},
            {"memory_gib", Field::number, &memory, 1, 1 << 20, false, "memory per rank, GiB"},
            {"cores", Field::number, &cores, 0.01, 1e5, false, "cores the ranks share (fitted); absent = one per rank"}};
        fields.insert(fields.end(), terms.begin(), terms.end());
        auto ok = ini::bind(f, h, sec.line, fields);
        if (!ok) return ok.error();
        if (!(eff > 0)) return section_error(f, sec, "a host needs its efficiency", "add efficiency = ... (scaleguard calibrate --write)");
        GpuType g;
        g.name = sec.name;
        g.memory_gib = memory;
        g.tflops_fp32 = g.tflops_fp16 = g.tflops_bf16 = peak / 1e3;  // one peak for every precision
        g.nvlink_gb_s = 2 * link;  // the planner takes NVLink as both directions together
        g.cores = cores;
        g.host = true;
        apply(g);
        Instance in;
        in.name = sec.name;
        in.gpu = sec.name;
        in.gpus = ranks;
        in.network_gbps = 8 * (network > 0 ? network : link);
        cat.gpus.push_back(std::move(g));
        cat.instances.push_back(std::move(in));
        any = true;
      } else {
        return section_error(f, sec, "unknown section kind '" + sec.kind + "' in a catalog override",
                             "sections are [calibration], [source N], [gpu NAME], [host NAME]");
      }
    }
    if (!any) {
      Error e;
      e.file = path;
      e.message = "no [gpu NAME] or [host NAME] section: the override changes nothing";
      e.hint = "write it with scaleguard calibrate --write FILE";
      return e;
    }
    cat.override_path = path;
    base = std::move(cat);
    return true;
  } catch (const std::exception& ex) {
    Error e;
    e.file = path;
    e.message = std::string("internal error: ") + ex.what();
    return e;
  }
}

Result<Catalog> load_catalog(const std::string& path, const std::string& override_path) {
  auto cat = load_catalog(path);
  if (!cat || override_path.empty()) return cat;
  Catalog c = std::move(cat).value();
  if (auto ok = apply_catalog_override(c, override_path); !ok) return ok.error();
  return c;
}

}  // namespace scaleguard
