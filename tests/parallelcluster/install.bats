#!/usr/bin/env bats
# install.sh on a ParallelCluster-shaped head node (pc.bash), as the cluster config's
# CustomActions run it, without daemons: ParallelCluster's files are never edited, the
# CustomSlurmSettings are checked (and named when missing), the compute role works without
# scaleguard-run (a WARNING naming the fix), the dependency and LibTorch options reach the
# package manager and CMake.

load pc

setup() {
  pc_layout
}

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
