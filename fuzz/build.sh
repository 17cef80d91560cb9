#!/usr/bin/env bash
# Builds the fuzz harnesses with clang (libFuzzer + ASan + UBSan) in a build folder of their
# own, separate from the main GCC build: only the planner, the job_submit request path and
# fuzz/*.cpp are compiled.
#   fuzz/build.sh [BUILD_DIR]       (default: build-fuzz at the repository root)
# Environment: CXX (a clang++; default: clang++, else the newest clang++-N), JOBS (default 2).
# Exit 77 when no clang with libFuzzer is installed (scripts/install-deps.sh installs one).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build=${1:-$root/build-fuzz}

cxx=${CXX:-}
if [ -z "$cxx" ] || ! "$cxx" --version 2>/dev/null | grep -qi clang; then
  cxx=$(command -v clang++ || true)
  [ -n "$cxx" ] || cxx=$(compgen -c clang++- 2>/dev/null | sort -t- -k2 -n | tail -n1 || true)
fi
if [ -z "$cxx" ] || ! command -v "$cxx" >/dev/null; then
  echo "fuzz/build.sh: no clang++ found (apt-get install clang libclang-rt-14-dev): skipped" >&2
  exit 77
fi
# libFuzzer's runtime must link (Debian: libclang-rt-N-dev).
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '#include <cstddef>\n#include <cstdint>\nextern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n' \
  > "$probe/p.cpp"
if ! "$cxx" -fsanitize=fuzzer,address,undefined "$probe/p.cpp" -o "$probe/p" 2>"$probe/err"; then
  echo "fuzz/build.sh: $cxx cannot link -fsanitize=fuzzer (install libclang-rt-N-dev): skipped" >&2
  sed 's/^/  /' "$probe/err" | head -n 5 >&2
  exit 77
fi

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$here" -B "$build" "${generator[@]}" -DCMAKE_CXX_COMPILER="$cxx" >/dev/null
fi
cmake --build "$build" -j "${JOBS:-2}"
