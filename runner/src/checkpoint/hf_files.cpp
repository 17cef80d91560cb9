#include "checkpoint/hf_files.h"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>  // header-only, in the default include path
#include <sstream>

#include "config/config.h"
#include "config/hf_config.h"

namespace scaleguard::run {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

bool is_directory(const std::string& p) {
  struct stat sb {};
  return ::stat(p.c_str(), &sb) == 0 && S_ISDIR(sb.st_mode);
}

bool is_file(const std::string& p) {
  struct stat sb {};
  return ::stat(p.c_str(), &sb) == 0 && S_ISREG(sb.st_mode);
}

json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return json();
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
}

// Copied through a temporary and renamed: a reader never sees half a file.
void copy_into(const std::string& from, const std::string& output, const std::string& name) {
  const std::string to = output + "/" + name;
  std::error_code ec;
  fs::copy_file(from, to + ".tmp", fs::copy_options::overwrite_existing, ec);
  if (!ec) fs::rename(to + ".tmp", to, ec);
  if (ec) throw RunError("cannot copy " + from + " to " + to + ": " + ec.message());
}

// tokenizer_config.json's "eos_token": "</s>" or {"content": "</s>", ...}, as its id in
// tokenizer.json (added tokens first, then the vocabulary).
std::optional<int64_t> id_of_special(const std::string& dir, const char* key) {
  const json cfg = read_json(dir + "/tokenizer_config.json");
  if (!cfg.is_object() || !cfg.contains(key)) return std::nullopt;
  std::string text;
  if (cfg[key].is_string()) text = cfg[key].get<std::string>();
  else if (cfg[key].is_object() && cfg[key].contains("content") && cfg[key]["content"].is_string())
    text = cfg[key]["content"].get<std::string>();
  if (text.empty()) return std::nullopt;
  const json tok = read_json(dir + "/tokenizer.json");
  if (!tok.is_object()) return std::nullopt;
  if (tok.contains("added_tokens") && tok["added_tokens"].is_array())
    for (const json& t : tok["added_tokens"])
      if (t.is_object() && t.value("content", std::string()) == text && t.contains("id") && t["id"].is_number_integer())
        return t["id"].get<int64_t>();
  if (tok.contains("model") && tok["model"].is_object() && tok["model"].contains("vocab") &&
      tok["model"]["vocab"].is_object()) {
    const json& vocab = tok["model"]["vocab"];
    if (auto it = vocab.find(text); it != vocab.end() && it->is_number_integer()) return it->get<int64_t>();
  }
  return std::nullopt;
}

}  // namespace

const std::vector<std::string>& tokenizer_file_names() {
  static const std::vector<std::string> names{"tokenizer.json", "tokenizer.model", "tokenizer_config.json",
                                              "special_tokens_map.json"};
  return names;
}

std::vector<std::string> tokenizer_files_in(const std::string& dir) {
  std::vector<std::string> out;
  if (!is_directory(dir)) return out;
  for (const char* name : {"tokenizer.json", "tokenizer.model"})
    if (is_file(dir + "/" + name)) out.push_back(dir + "/" + name);
  return out;
}

TokenizerCopy copy_tokenizer_files(const std::vector<std::string>& sources, const std::string& output, bool required) {
  TokenizerCopy out;
  auto add = [&out](const std::string& name) {
    for (const auto& n : out.copied)
      if (n == name) throw RunError("two tokenizer sources give " + name + "; name one of them");
    out.copied.push_back(name);
  };
  for (const std::string& src : sources) {
    if (is_directory(src)) {
      if (tokenizer_files_in(src).empty()) {
        if (required)
          throw RunError("--tokenizer " + src + ": the directory holds no tokenizer.json or tokenizer.model");
        continue;
      }
      for (const std::string& name : tokenizer_file_names())
        if (is_file(src + "/" + name)) {
          add(name);
          copy_into(src + "/" + name, output, name);
        }
      if (is_file(src + "/generation_config.json") && out.generation_config_from.empty()) {
        copy_into(src + "/generation_config.json", output, "generation_config.json");
        out.generation_config_from = src;
      }
      // Special tokens: the model's config.json says them; else the tokenizer's own files.
      std::optional<HfModelConfig> hf;
      try {
        hf = read_hf_model_config(src);
      } catch (const RunError&) {  // a config.json of another kind: its ids are not needed
      }
      out.bos = hf && hf->bos ? hf->bos : id_of_special(src, "bos_token");
      out.eos = hf && hf->eos ? hf->eos : id_of_special(src, "eos_token");
    } else if (is_file(src)) {
      std::string name = fs::path(src).filename().string();
      bool known = false;
      for (const auto& n : tokenizer_file_names()) known = known || n == name;
      if (!known) {
        std::ifstream in(src, std::ios::binary);
        char first = 0;
        in >> first;  // skips white space: a JSON file starts with '{'
        name = first == '{' ? "tokenizer.json" : "tokenizer.model";
      }
      add(name);
      copy_into(src, output, name);
    } else {
      throw RunError("--tokenizer " + src + ": no such file or directory");
    }
    out.from += (out.from.empty() ? "" : ", ") + src;
  }
  return out;
}

std::string generation_config_json(const std::optional<int64_t>& bos, const std::optional<int64_t>& eos) {
  json j = {{"_from_model_config", true}};
  if (bos) j["bos_token_id"] = *bos;
  if (eos) j["eos_token_id"] = *eos;
  return j.dump(2) + "\n";
}

}  // namespace scaleguard::run
