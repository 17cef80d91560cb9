// load(): reads the file (bounded) and tells its kind from the content.
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "scaleguard/tokenizer.h"

namespace scaleguard::tokenizer {
namespace {

bool is_dir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_file(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string read_bounded(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw Error("tokenizer '" + path + "': " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw Error("tokenizer '" + path + "' is not a regular file");
  if (static_cast<uint64_t>(st.st_size) > kMaxTokenizerBytes)
    throw Error("tokenizer '" + path + "' has " + std::to_string(st.st_size) + " bytes, more than the " +
                std::to_string(kMaxTokenizerBytes >> 20) + " MiB a tokenizer file may have");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("tokenizer '" + path + "': " + std::strerror(errno));
  std::string data(static_cast<size_t>(st.st_size), '\0');
  in.read(data.data(), static_cast<std::streamsize>(data.size()));
  if (static_cast<size_t>(in.gcount()) != data.size()) throw Error("tokenizer '" + path + "': read error");
  if (data.empty()) throw Error("tokenizer '" + path + "' is empty");
  return data;
}

// "BASE64 DIGITS" on the first line.
bool looks_like_tiktoken(const std::string& d) {
  const size_t eol = std::min(d.find('\n'), d.size());
  const size_t space = d.find(' ');
  if (space == std::string::npos || space == 0 || space >= eol) return false;
  for (size_t i = 0; i < space; ++i)
    if (!std::isalnum(static_cast<unsigned char>(d[i])) && d[i] != '+' && d[i] != '/' && d[i] != '=') return false;
  for (size_t i = space + 1; i < eol; ++i)
    if (!std::isdigit(static_cast<unsigned char>(d[i])) && !(d[i] == '\r' && i + 1 == eol)) return false;
  return eol > space + 1;
}

}  // namespace

std::unique_ptr<Tokenizer> load(const std::string& path_arg) {
  std::string path = path_arg;
  if (is_dir(path)) {  // a Hugging Face model directory
    if (is_file(path + "/tokenizer.json")) path += "/tokenizer.json";
    else if (is_file(path + "/tokenizer.model")) path += "/tokenizer.model";
    else throw Error("tokenizer directory '" + path + "' holds neither tokenizer.json nor tokenizer.model");
  }
  const std::string data = read_bounded(path);
  const size_t first = data.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && data[first] == '{') {
    std::string config;
    const size_t slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
    if (is_file(dir + "/tokenizer_config.json")) config = read_bounded(dir + "/tokenizer_config.json");
    return load_hf_json(data, path, config);
  }
  if (looks_like_tiktoken(data)) return load_tiktoken(data, path);
  return load_sentencepiece(data, path);
}

}  // namespace scaleguard::tokenizer
