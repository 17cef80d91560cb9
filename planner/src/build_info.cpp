#include "scaleguard/build_info.h"

namespace scaleguard {

const char* build_version() { return SCALEGUARD_VERSION; }
const char* build_config_dir() { return SCALEGUARD_CONFIG_DIR; }

}  // namespace scaleguard
