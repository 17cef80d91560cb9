#!/usr/bin/env bash
# Installs every Debian 12 package scaleguard needs to build, test, run the demo and the
# benchmarks. Idempotent: packages already present are skipped by apt; services are not
# started (the dev cluster and tests start what they need themselves).
set -euo pipefail

packages=(
  # build
  build-essential cmake ninja-build ccache pkg-config git
  # planner + CLI + tests + benchmarks
  libboost-program-options-dev nlohmann-json3-dev libxxhash-dev libgtest-dev libgmock-dev googletest libbenchmark-dev
  # budget periods in a time zone (budget/zone: date/tz over the OS tz database; the CLI only)
  libhowardhinnant-date-dev tzdata
  # fuzzing (fuzz/): clang, and libFuzzer's runtime + FuzzedDataProvider.h (not a clang-14 dependency)
  clang libclang-rt-14-dev
  # Slurm 22.05 (plugins, dev cluster, accounting)
  slurm-wlm slurmctld slurmd slurmdbd slurm-client libslurm-dev slurm-wlm-basic-plugins
  munge libmunge-dev mariadb-server lua5.3
  # Slurm releases built from source (scripts/slurm-release): mysql_config and libmariadb for
  # slurmdbd's accounting_storage/mysql
  libmariadb-dev libmariadb-dev-compat
  # MPI (srun --mpi=pmix dlopens the unversioned libpmix.so from libpmix-dev)
  openmpi-bin libopenmpi-dev libpmix-dev
  # LibTorch (CPU) with the fast BLAS; python3-torch is the DDP baseline in bench/
  libtorch-dev libopenblas0-openmp python3-torch python3-numpy
  # HDF5 checkpoints
  libhdf5-dev hdf5-tools python3-h5py
  # data and tools used by tests, demo and reports
  bats bats-assert bats-support fortunes jq procps psmisc util-linux iproute2 e2fsprogs chromium
  python3-yaml groff-base man-db
  # TensorBoard event files read back by an independent reader (tests/runner/tfevents.py;
  # Debian 12 has no python3-tensorboard)
  python3-crcmod python3-protobuf
  # packaging (packaging/, tests/package): rpm spec lint and source rpm, Lmod modulefile load
  rpm rpmlint lmod
  # metrics (tests/metrics, tests/slurm/metrics.bats): promtool (in prometheus) lints the
  # exposition, a node exporter serves the textfiles; their services are never started here
  # (policy-rc.d below; the tests start their own exporter on a free loopback port)
  prometheus prometheus-node-exporter
  # tokenizers (tokenizer/): SentencePiece models, PCRE2 for the BPE pre-tokenizer regexes; the
  # references tests/tokenizer compares with: python3-sentencepiece, and tiktoken under node
  # (npm ci below; a nodejs that bundles npm, as NodeSource's, is kept)
  libsentencepiece-dev libpcre2-dev python3-sentencepiece nodejs
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  # Never let package scripts start daemons on a build or CI machine.
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # Where an existing policy-rc.d let them start, the exporters just installed are stopped and
  # disabled: CI machines run only what the tests start.
  for service in prometheus prometheus-node-exporter; do
    if [[ " ${missing[*]} " == *" $service "* ]] && [ -d /run/systemd/system ]; then
      systemctl disable --now "$service" >/dev/null 2>&1 || true
    fi
  done
fi

# Debian's libtorch calls whatever libblas.so.3 is selected; the reference BLAS is ~16x
# slower for training. Select OpenBLAS (OpenMP variant: the pthread one fights torch).
blas=$(update-alternatives --list libblas.so.3-x86_64-linux-gnu 2>/dev/null | grep openblas | head -n1 || true)
[ -n "$blas" ] && update-alternatives --set libblas.so.3-x86_64-linux-gnu "$blas" >/dev/null
lapack=$(update-alternatives --list liblapack.so.3-x86_64-linux-gnu 2>/dev/null | grep openblas | head -n1 || true)
[ -n "$lapack" ] && update-alternatives --set liblapack.so.3-x86_64-linux-gnu "$lapack" >/dev/null
# tests/tokenizer's byte-level BPE reference: OpenAI's tiktoken from npm, the version pinned
# in its package-lock.json, into tests/tokenizer/js/node_modules (never at test time).
command -v npm >/dev/null || apt-get install -y -qq --no-install-recommends npm >/dev/null
(cd "$(dirname "$0")/../tests/tokenizer/js" && npm ci --no-audit --no-fund --loglevel=error)
echo "install-deps: done"
