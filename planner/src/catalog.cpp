// load_catalog(): configs/catalog.ini -> Catalog. Section kinds: [assumptions], [gpu NAME],
// [instance NAME], [model NAME]; anything else is an error with its line.
#include <algorithm>

#include "ini.h"
#include "scaleguard/catalog.h"
#include "scaleguard/decide.h"
#include "scaleguard/model.h"
#include "text.h"

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
            {"elementwise_bytes", Field::number, &a.elementwise_bytes, 0, 1e4, false, "bytes per token, layer and hidden element"},
            {"score_bytes", Field::number, &a.score_bytes, 0, 1e4, false, "bytes per attention score element"},
            {"step_overhead_s", Field::number, &a.step_overhead_s, 0, 60, false, "seconds per optimizer step"},
            {"collective_latency_intra_us", Field::number, &a.collective_latency_intra_us, 0, 1e5, false, "microseconds per hop"},
            {"collective_latency_inter_us", Field::number, &a.collective_latency_inter_us, 0, 1e5, false, "microseconds per hop"},
            {"bucket_mb", Field::number, &a.bucket_mb, 0.1, 1e5, false, "MB per gradient bucket"}});
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
            {"on_demand", Field::number, &in.on_demand, 0, 1e4, true, "$/hour"},
            {"spot", Field::number, &in.spot, 0, 1e4, true, "$/hour"}});
        if (!ok) return ok.error();
        cat.instances.push_back(std::move(in));
      } else if (sec.kind == "model") {
        if (sec.name.empty()) return section_error(f, sec, "model section without a name", "write [model llama2-7b]");
        ModelPreset m;
        m.name = sec.name;
        std::string params;
        auto ok = ini::bind(f, h, sec.line, {
            {"params", Field::text, &params, 0, 0, false, "parameter count, e.g. 6.74B"},
            {"layers", Field::integer, &m.layers, 1, 1000, true, "transformer layers"},
            {"hidden", Field::integer, &m.hidden, 64, 262144, true, "hidden size"},
            {"heads", Field::integer, &m.heads, 1, 4096, true, "attention heads"},
            {"seq", Field::integer, &m.seq, 16, 1 << 20, true, "sequence length"},
            {"vocab", Field::integer, &m.vocab, 2, 10000000, true, "vocabulary size"}});
        if (!ok) return ok.error();
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

}  // namespace scaleguard
