#!/usr/bin/env bats
# install.sh on a ParallelCluster-shaped head node (pc.bash), as the cluster config's
# CustomActions run it, without daemons: ParallelCluster's files are never edited, the
# CustomSlurmSettings are checked (and named when missing), the compute role works without
# scaleguard-run (a WARNING naming the fix), the dependency and LibTorch options reach the
# package manager and CMake.

load pc

setup() {
  pc_layout
  T=""
}
teardown() { if [ -n "$T" ]; then rm -rf "$T"; fi; }

@test "head: ParallelCluster's slurm.conf and includes untouched, plugins, CLI, policy and plugstack drop-in installed" {
  local before
  before=$(pc_managed_sums)
  run pc_install head
  assert_success
  assert_output --partial "not edited: ParallelCluster manages it"
  assert_output --partial "JobSubmitPlugins=scaleguard PrologFlags=Alloc"
  [ "$(pc_managed_sums)" = "$before" ] || fail "install.sh changed ParallelCluster's files"
  [ -f "$PC_PLUGINS/job_submit_scaleguard.so" ] && [ -f "$PC_PLUGINS/scaleguard.so" ]
  [ -x "$PC_PREFIX/bin/scaleguard" ]
  [ -f "$PC_ETC/scaleguard/policy.ini" ] && [ -f "$PC_ETC/scaleguard/catalog.ini" ]
  run cat "$PC_ETC/plugstack.conf.d/scaleguard.conf"
  assert_output --partial "required $PC_PLUGINS/scaleguard.so policy=$PC_ETC/scaleguard/policy.ini"
  # ParallelCluster's plugstack.conf already includes the drop-in folder: left as it was.
  run cat "$PC_ETC/plugstack.conf"
  assert_output "include $PC_ETC/plugstack.conf.d/*"
  # No runner in this build (no LibTorch): a warning naming the fix, not a failure.
  run pc_install head
  assert_success
  assert_output --partial "nothing to change"
  assert_output --regexp "WARNING: .*scaleguard-run is not installed.*--libtorch"
}

@test "head: CustomSlurmSettings missing: nothing of ParallelCluster's edited, exit 1 naming the YAML to add" {
  pc_layout "JobSubmitPlugins=lua"
  local before
  before=$(pc_managed_sums)
  run pc_install head
  assert_failure 1
  assert_output --partial "ERROR: $PC_ETC/slurm.conf lacks settings"
  assert_output --partial "CustomSlurmSettings:"
  assert_output --partial "- JobSubmitPlugins: lua,scaleguard"
  assert_output --partial "- PrologFlags: Alloc"
  assert_output --partial "- PrEpPlugins: script,scaleguard"
  [ "$(pc_managed_sums)" = "$before" ] || fail "install.sh changed ParallelCluster's files"
  # The rest is installed, so adding the settings and re-running finishes the job.
  [ -f "$PC_PLUGINS/scaleguard.so" ] && [ -f "$PC_ETC/plugstack.conf.d/scaleguard.conf" ]
}

@test "head: no plugstack.conf yet: one is written that includes the drop-in folder" {
  rm -f "$PC_ETC/plugstack.conf"
  run pc_install head
  assert_success
  run cat "$PC_ETC/plugstack.conf"
  assert_output "include $PC_ETC/plugstack.conf.d/*"
}

@test "compute: without scaleguard-run the plugins and CLI are used, a WARNING names the fix, exit 0" {
  # The head node's install from this checkout's install.sh (SCALEGUARD_PC_INSTALL may name
  # another one to test the compute role with).
  PC_INSTALL=$SCALEGUARD_SOURCE_DIR/scripts/parallelcluster/install.sh run pc_install head
  assert_success
  [ ! -e "$PC_PREFIX/bin/scaleguard-run" ]
  # As a compute node sees the head node's install: /opt/slurm and /shared from the head node.
  run "$PC_INSTALL" --role compute --root "$PC_ROOT" --prefix /shared/scaleguard \
    --plugin-dir /opt/slurm/lib/slurm
  assert_success
  assert_output --regexp "WARNING: .*scaleguard-run not found"
  assert_output --partial "--libtorch DIR"
  assert_output --partial "done (compute node)"
  [ -f "$PC_ROOT/etc/profile.d/scaleguard.sh" ]
}

@test "compute: the head node's install missing is still an error" {
  run pc_install compute
  assert_failure 1
  assert_output --partial "run the head node install first"
}

@test "head --install-deps --libtorch: the OS's package manager, the EFA installer's Open MPI and LibTorch reach CMake (dry run)" {
  local root=$PC_WORK/dry
  rm -rf "$root"
  mkdir -p "$root/opt/slurm/etc" "$root/opt/amazon/openmpi/bin" "$root/opt/libtorch/share/cmake/Torch"
  : > "$root/opt/slurm/etc/slurm.conf"
  printf '#!/bin/sh\n' > "$root/opt/amazon/openmpi/bin/mpicc"; chmod +x "$root/opt/amazon/openmpi/bin/mpicc"
  : > "$root/opt/libtorch/share/cmake/Torch/TorchConfig.cmake"
  run "$PC_INSTALL" --role head --install-deps --libtorch /opt/libtorch --root "$root" \
    --build-dir "$root/build" --dry-run
  assert_success
  if command -v apt-get > /dev/null; then
    assert_output --regexp '\+ env DEBIAN_FRONTEND=noninteractive apt-get install .*libboost-program-options-dev'
  else
    assert_output --regexp '\+ dnf install .*boost-devel'
  fi
  assert_output --partial "Open MPI: /opt/amazon/openmpi (the EFA installer's)"
  assert_output --regexp '\+ cmake -S .* -DMPI_HOME=/opt/amazon/openmpi -DCMAKE_PREFIX_PATH=/opt/libtorch;/opt/amazon/openmpi'
  # Not ParallelCluster's slurm.conf (no slurm_parallelcluster.conf include): edited as before.
  assert_output --partial "JobSubmitPlugins=scaleguard"
  assert_output --partial "dry run: nothing was changed"
  rm -rf "$root"
}

# --- Root-side directories another user could make first (issue 36 class 10) --------------
# A sticky world-writable folder like /var/tmp, where the test user plants things first.
attack_dir() {
  : "${SCALEGUARD_TEST_USER:=sguser}"
  id "$SCALEGUARD_TEST_USER" > /dev/null 2>&1 || skip "no test user $SCALEGUARD_TEST_USER (scripts/dev-cluster/up makes it)"
  T=$(mktemp -d /var/tmp/sg-pc-attack.XXXXXX)
  chmod 1777 "$T"
}
as_test_user() { runuser -u "$SCALEGUARD_TEST_USER" -- "$@"; }

@test "head: a build directory another user made is refused: none of its programs runs as root, its plugin path is not written" {
  attack_dir
  # The user's "configured build": a cache naming their make and plugin folder, a Makefile
  # that "builds" their CLI and plugins, an install script. install.sh as CustomActions run
  # it (builds; the plugin folder is the build's).
  as_test_user bash -c '
    T=$1
    mkdir -p "$T/evil" "$T/build"
    chmod 777 "$T/evil"
    printf "%s\n" "CMAKE_GENERATOR:INTERNAL=Unix Makefiles" "CMAKE_HOME_DIRECTORY:INTERNAL=$T" \
      "CMAKE_PROJECT_NAME:STATIC=scaleguard" "CMAKE_MAKE_PROGRAM:FILEPATH=/usr/bin/make" \
      "SCALEGUARD_SLURM_PLUGIN_DIR:PATH=$T/evil" > "$T/build/CMakeCache.txt"
    printf "%s\n" "all:" \
      "	id -u > $T/evil/ran-make" \
      "	mkdir -p cli spank-plugin/spank spank-plugin/job_submit" \
      "	printf \"#!/bin/sh\\nid -u > $T/evil/ran-cli\\n\" > cli/scaleguard; chmod 755 cli/scaleguard" \
      "	touch spank-plugin/spank/scaleguard.so spank-plugin/job_submit/job_submit_scaleguard.so" \
      "help scaleguard scaleguard_spank job_submit_scaleguard: all" > "$T/build/Makefile"
    printf "file(WRITE \"%s/evil/ran-install\" \"as root\")\n" "$T" > "$T/build/cmake_install.cmake"
    touch "$T/evil/scaleguard.so"
  ' _ "$T"
  run "$PC_INSTALL" --role head --build-dir "$T/build" --prefix "$PC_PREFIX" --slurm-conf-dir "$PC_ETC" \
    --profile none --no-restart
  local out=$output st=$status m
  for m in ran-make ran-cli ran-install; do
    [ ! -e "$T/evil/$m" ] || fail "the user's $m: their code ran as uid $(stat -c %u "$T/evil/$m"): $out"
  done
  ! grep -rqs "$T" "$PC_ETC/plugstack.conf.d" "$PC_ETC/plugstack.conf" || fail "plugstack.conf names the user's plugin: $(cat "$PC_ETC/plugstack.conf.d/scaleguard.conf")"
  [ "$st" -ne 0 ] || fail "install.sh accepted the user's build directory: $out"
  [[ $out == *"--build-dir $T/build: not used"*"is owned by uid $(id -u "$SCALEGUARD_TEST_USER")"* ]] || fail "no reason given: $out"
}

@test "head: a build directory whose parent others can write (not sticky) is refused" {
  attack_dir
  local b=$T/open/build
  mkdir -p "$b" && cp -a "$PC_BUILD/." "$b/"   # root's own build, in a folder anyone can write
  chmod 777 "$T/open"
  run pc_install head --build-dir "$b"
  assert_failure
  assert_output --partial "$T/open is writable by group or others (mode 777)"
  [ ! -e "$PC_ETC/plugstack.conf.d/scaleguard.conf" ]
}

@test "head: a sources folder (DIR-src) another user made is refused, not adopted or raced" {
  attack_dir
  local tgz=$T/src.tar.gz pkg
  pkg=$(mktemp -d)
  mkdir -p "$pkg/sg/configs"
  echo 'message(FATAL_ERROR "the test tarball: never configured here")' > "$pkg/sg/CMakeLists.txt"
  cp "$SCALEGUARD_SOURCE_DIR/configs/policy.ini" "$pkg/sg/configs/"
  tar -czf "$tgz" -C "$pkg" sg
  rm -rf "$pkg"
  as_test_user mkdir -p "$T/build-src/sg"
  run "$PC_INSTALL" --role head --source "$tgz" --build-dir "$T/build" --prefix "$PC_PREFIX" \
    --slurm-conf-dir "$PC_ETC" --plugin-dir "$PC_PLUGINS" --profile none --no-restart
  assert_failure
  assert_output --partial "the sources' folder $T/build-src: not used"
  [ ! -e "$T/build" ] || fail "a build directory was made: $(ls -la "$T/build")"
  # Without the user's folder: root makes both, mode 0700, its own (the tarball then fails to configure).
  rm -rf "$T/build-src"
  run "$PC_INSTALL" --role head --source "$tgz" --build-dir "$T/build" --prefix "$PC_PREFIX" \
    --slurm-conf-dir "$PC_ETC" --plugin-dir "$PC_PLUGINS" --profile none --no-restart
  assert_failure
  assert_output --partial "the test tarball: never configured here"
  [ "$(stat -c '%u %a' "$T/build-src" "$T/build")" = "0 700"$'\n'"0 700" ]
  [ "$(stat -c %u "$T/build-src/sg/CMakeLists.txt")" = 0 ]
}

@test "head and compute: a plugin folder others can write is refused before plugstack.conf names it" {
  chmod g+w "$PC_PLUGINS"
  run pc_install head
  assert_failure
  assert_output --partial "slurmd and slurmctld would load plugins from it as root, but $PC_PLUGINS is writable by group or others"
  [ ! -e "$PC_ETC/plugstack.conf.d/scaleguard.conf" ]
  chmod g-w "$PC_PLUGINS"
  run pc_install head
  assert_success
  chmod g+w "$PC_PLUGINS"
  run "$PC_INSTALL" --role compute --prefix "$PC_PREFIX" --slurm-conf-dir "$PC_ETC" \
    --plugin-dir "$PC_PLUGINS" --profile none --no-restart
  assert_failure
  assert_output --partial "$PC_PLUGINS is writable by group or others"
  chmod g-w "$PC_PLUGINS"
}
