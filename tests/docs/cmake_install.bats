#!/usr/bin/env bats
# `cmake --install` of the ctest build directory (cmake/install.cmake) into a DESTDIR and
# into another --prefix: the installed programs run, the plugins land in the Slurm plugin
# directory, man pages render from where they are installed, configs are there.

bats_load_library_path=/usr/lib/bats
load "$bats_load_library_path/bats-support/load"
load "$bats_load_library_path/bats-assert/load"

setup() {
  : "${SCALEGUARD_SOURCE_DIR:?}" "${SCALEGUARD_BUILD_DIR:?}"
  cache=$SCALEGUARD_BUILD_DIR/CMakeCache.txt
  plugin_dir=$(sed -n 's/^SCALEGUARD_SLURM_PLUGIN_DIR:[A-Z]*=//p' "$cache")
  prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:[A-Z]*=//p' "$cache")
  dest=$BATS_TEST_TMPDIR/dest
}

@test "DESTDIR install: programs, plugins, man pages, configs, docs" {
  [ -n "$plugin_dir" ]
  DESTDIR=$dest run cmake --install "$SCALEGUARD_BUILD_DIR"
  assert_success
  [[ $plugin_dir == /* ]] || plugin_dir=$prefix/$plugin_dir
  run "$dest$prefix/bin/scaleguard" --version
  assert_success
  assert_output --regexp '^scaleguard [0-9]+\.[0-9]+\.[0-9]+$'
  if grep -q '^SCALEGUARD_RUNNER:BOOL=ON' "$cache" && [ -n "${SCALEGUARD_RUN_BIN:-}" ]; then
    [ -x "$dest$prefix/bin/scaleguard-run" ]
  fi
  for so in scaleguard.so job_submit_scaleguard.so; do
    [ -f "$dest$plugin_dir/$so" ]
    # Only the plugin symbols are exported (the linker scripts survive installation).
    run nm -D --defined-only "$dest$plugin_dir/$so"
    assert_output --partial "plugin_type"
  done
  for page in man1/scaleguard.1 man1/scaleguard-run.1 man5/scaleguard-policy.5; do
    # Only warnings reach the output: the rendered page goes to /dev/null.
    run bash -c 'MANPAGER=cat MANWIDTH=80 man --warnings -l "$1" > /dev/null' _ "$dest$prefix/share/man/$page"
    assert_success
    assert_output ""
  done
  share=$dest$prefix/share/scaleguard
  cmp "$SCALEGUARD_SOURCE_DIR/configs/policy.ini" "$share/policy.ini"
  [ -f "$share/catalog.ini" ] && [ -f "$share/nccl/efa-v1.ini" ] && [ -f "$share/nccl/tcp-v1.ini" ]
  [ -f "$share/examples/gpt-small.ini" ] && [ -f "$share/parallelcluster/cluster.yaml" ]
  [ -f "$share/sbatch/train.sbatch" ]
  [ -f "$dest$prefix/share/doc/scaleguard/admin-guide.md" ]
  # The installed CLI checks the installed policy (its catalog beside it).
  run "$dest$prefix/bin/scaleguard" policy check "$share/policy.ini"
  assert_success
  assert_output --partial "[partition gpu-od] (default)"
}

@test "--prefix moves programs and data, not the Slurm plugins" {
  DESTDIR=$dest run cmake --install "$SCALEGUARD_BUILD_DIR" --prefix /opt/sg
  assert_success
  [ -x "$dest/opt/sg/bin/scaleguard" ]
  [ -f "$dest/opt/sg/share/man/man5/scaleguard-policy.5" ]
  if [[ $plugin_dir == /* ]]; then
    [ -f "$dest$plugin_dir/job_submit_scaleguard.so" ]
    [ ! -e "$dest/opt/sg$plugin_dir" ]
  fi
}

@test "SCALEGUARD_CONFIG_DIR: the source configs for the build tree, share/scaleguard for an install" {
  # This (ctest) build: the default, the source tree's configs/.
  run sed -n 's/^SCALEGUARD_CONFIG_DIR:[A-Z]*=//p' "$cache"
  assert_output "$SCALEGUARD_SOURCE_DIR/configs"
  grep -qF -- "-DSCALEGUARD_CONFIG_DIR=\\\"$SCALEGUARD_SOURCE_DIR/configs\\\"" "$SCALEGUARD_BUILD_DIR/build.ninja"
  # A build for installation (planner only: configuring is enough to see the flag); a
  # relative value is under the install prefix, where cmake --install puts the configs.
  tree=$BATS_TEST_TMPDIR/installed-build
  for value in share/scaleguard /etc/scaleguard; do
    run cmake -S "$SCALEGUARD_SOURCE_DIR" -B "$tree" -G Ninja -DCMAKE_INSTALL_PREFIX=/opt/sg \
      -DSCALEGUARD_CONFIG_DIR="$value" -DSCALEGUARD_SLURM=OFF -DSCALEGUARD_RUNNER=OFF \
      -DSCALEGUARD_TESTS=OFF -DSCALEGUARD_BENCH=OFF
    assert_success
    want=$value
    [[ $want == /* ]] || want=/opt/sg/$value
    grep -qF -- "-DSCALEGUARD_CONFIG_DIR=\\\"$want\\\"" "$tree/build.ninja"
    run grep -cF -- "-DSCALEGUARD_CONFIG_DIR=\\\"$SCALEGUARD_SOURCE_DIR/configs\\\"" "$tree/build.ninja"
    assert_output 0
  done
}
