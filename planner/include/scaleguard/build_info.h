// What the build compiled in: the version and the configuration directory.
// Functions, not macros in every translation unit: a package build (another install prefix)
// then recompiles one file, and ccache serves the rest of it from the main build.
#pragma once

namespace scaleguard {

const char* build_version();     // the project's version, "0.1.0"
const char* build_config_dir();  // the compiled-in configs/ directory (source tree or share/scaleguard)

}  // namespace scaleguard
