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

sg_tokenizer_prep_fn entry() {
  static sg_tokenizer_prep_fn fn = [] {
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
      if (auto f = reinterpret_cast<sg_tokenizer_prep_fn>(::dlsym(h, "sg_tokenizer_prep_v1"))) return f;
      tried += "\n  " + p + ": no sg_tokenizer_prep_v1";
    }
    throw std::runtime_error("the tokenizer module libscaleguard_tokenizer.so could not be loaded (looked beside "
                             "the program, in " SCALEGUARD_TOKENIZER_MODULE_INSTALLED " and " SCALEGUARD_TOKENIZER_MODULE_BUILT
                             "; SCALEGUARD_TOKENIZER_MODULE names another)" + tried);
  }();
  return fn;
}

}  // namespace

sg_tokenizer_prep_result prep_in_module(const sg_tokenizer_prep_args& args) {
  sg_tokenizer_prep_result r;
  if (entry()(&args, &r) != 0) throw std::runtime_error(r.error);
  return r;
}

}  // namespace scaleguard::tokenizer
