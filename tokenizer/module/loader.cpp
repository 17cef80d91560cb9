#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>

#include "scaleguard/tokenizer_module.h"

namespace scaleguard::tokenizer {
namespace {

std::string beside_executable() {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "";
  std::string dir(self, static_cast<size_t>(n));
  return dir.substr(0, dir.rfind('/') + 1) + "libscaleguard_tokenizer.so";
}

// The module, loaded once: its handle.
void* module() {
  static void* handle = [] {
    std::vector<std::string> paths;
    if (const char* env = std::getenv("SCALEGUARD_TOKENIZER_MODULE")) paths.push_back(env);
    else paths = {beside_executable(), SCALEGUARD_TOKENIZER_MODULE_INSTALLED, SCALEGUARD_TOKENIZER_MODULE_BUILT};
    std::string tried;
    for (const std::string& p : paths) {
      if (p.empty() || ::access(p.c_str(), R_OK) != 0) continue;
      // DEEPBIND: libsentencepiece binds to its own protobuf-lite, not LibTorch's libprotobuf.
      void* h = ::dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
      if (!h) {
        tried += std::string("\n  ") + ::dlerror();
        continue;
      }
      if (::dlsym(h, "sg_tokenizer_prep_v1")) return h;
      tried += "\n  " + p + ": no sg_tokenizer_prep_v1";
    }
    throw std::runtime_error("the tokenizer module libscaleguard_tokenizer.so could not be loaded (looked beside "
                             "the program, in " SCALEGUARD_TOKENIZER_MODULE_INSTALLED " and " SCALEGUARD_TOKENIZER_MODULE_BUILT
                             "; SCALEGUARD_TOKENIZER_MODULE names another)" + tried);
  }();
  return handle;
}

// An entry point of the module; a module without it (an older one) is an error naming it.
template <class Fn>
Fn symbol(const char* name) {
  if (void* f = ::dlsym(module(), name)) return reinterpret_cast<Fn>(f);
  throw std::runtime_error(std::string("the tokenizer module has no ") + name + " (an older libscaleguard_tokenizer.so?)");
}

sg_tokenizer_prep_fn entry() { return symbol<sg_tokenizer_prep_fn>("sg_tokenizer_prep_v1"); }

}  // namespace

sg_tokenizer_prep_result prep_in_module(const sg_tokenizer_prep_args& args) {
  sg_tokenizer_prep_result r;
  if (entry()(&args, &r) != 0) throw std::runtime_error(r.error);
  return r;
}

}  // namespace scaleguard::tokenizer

namespace scaleguard::tokenizer {

ModuleTokenizer::ModuleTokenizer(const std::string& path) {
  handle_ = symbol<sg_tokenizer_open_fn>("sg_tokenizer_open_v1")(path.c_str(), &info_);
  if (!handle_) throw std::runtime_error(info_.error);
}

ModuleTokenizer::~ModuleTokenizer() {
  if (handle_) symbol<sg_tokenizer_close_fn>("sg_tokenizer_close_v1")(handle_);
}

std::vector<uint32_t> ModuleTokenizer::encode(const std::string& text) const {
  auto fn = symbol<sg_tokenizer_encode_fn>("sg_tokenizer_encode_v1");
  std::vector<uint32_t> ids(text.size() + 16);
  char error[4096] = "";
  for (;;) {
    const long n = fn(handle_, text.data(), text.size(), ids.data(), ids.size(), error, sizeof error);
    if (n < 0) throw std::runtime_error(error);
    if (static_cast<size_t>(n) <= ids.size()) {
      ids.resize(static_cast<size_t>(n));
      return ids;
    }
    ids.resize(static_cast<size_t>(n));
  }
}

std::string ModuleTokenizer::decode(const std::vector<uint32_t>& ids) const {
  auto fn = symbol<sg_tokenizer_decode_fn>("sg_tokenizer_decode_v1");
  std::string text(ids.size() * 8 + 16, '\0');
  char error[4096] = "";
  for (;;) {
    const long n = fn(handle_, ids.data(), ids.size(), text.data(), text.size(), error, sizeof error);
    if (n < 0) throw std::runtime_error(error);
    if (static_cast<size_t>(n) <= text.size()) {
      text.resize(static_cast<size_t>(n));
      return text;
    }
    text.resize(static_cast<size_t>(n));
  }
}

}  // namespace scaleguard::tokenizer
