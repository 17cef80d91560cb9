#!/usr/bin/env bats
# scripts/parallelcluster/install.sh below a temporary --root: the files a head node and a
# compute node get, the slurm.conf / plugstack.conf edits, idempotence (a second run changes
# no byte), an admin's policy kept, the dry run, and bad input. Installs from the ctest
# build directory (--no-build); restarts nothing (--root).

bats_load_library_path=/usr/lib/bats
load "$bats_load_library_path/bats-support/load"
load "$bats_load_library_path/bats-assert/load"

setup() {
  : "${SCALEGUARD_SOURCE_DIR:?}" "${SCALEGUARD_BUILD_DIR:?}"
  install_sh=$SCALEGUARD_SOURCE_DIR/scripts/parallelcluster/install.sh
  root=$BATS_TEST_TMPDIR/root
  etc=$root/opt/slurm/etc
  mkdir -p "$etc"
  # A slurm.conf of the admin's own (no JobSubmitPlugins, no PrologFlags, no PluginDir), which
  # install.sh edits. ParallelCluster's own, which it must not edit: tests/parallelcluster.
  printf '%s\n' 'ClusterName=pc' 'SlurmctldHost=ip-10-0-0-1' 'SchedulerType=sched/backfill' \
    'include cluster_nodes.conf' > "$etc/slurm.conf"
  unset SLURM_CONF
  plugin_dir=$(sed -n 's/^SCALEGUARD_SLURM_PLUGIN_DIR:[A-Z]*=//p' "$SCALEGUARD_BUILD_DIR/CMakeCache.txt")
}

head_install() {
  "$install_sh" --role head --source "$SCALEGUARD_SOURCE_DIR" --build-dir "$SCALEGUARD_BUILD_DIR" \
    --no-build --prefix /opt/scaleguard --root "$root" "$@"
}

# Every file below the root with its checksum and mode: equal snapshots = nothing changed.
snapshot() { (cd "$root" && find . -type f -print0 | sort -z | xargs -0 -r sha256sum; find . -printf '%p %m\n' | sort); }

@test "--help lists the options" {
  run "$install_sh" --help
  assert_success
  for opt in --role --source --build-dir --no-build --cmake-arg --prefix --slurm-conf-dir \
             --plugin-dir --policy --catalog --root --no-restart --dry-run; do
    assert_output --partial "  $opt"
  done
}

@test "head node: programs, plugins, policy, Slurm config edits" {
  run head_install
  assert_success
  assert_output --partial "not restarting slurmctld (--root"
  [ -x "$root/opt/scaleguard/bin/scaleguard" ]
  [ -f "$root$plugin_dir/scaleguard.so" ]
  [ -f "$root$plugin_dir/job_submit_scaleguard.so" ]
  [ -f "$root/opt/scaleguard/share/man/man1/scaleguard.1" ]
  [ -f "$root/opt/scaleguard/share/scaleguard/nccl/efa-v1.ini" ]
  cmp "$SCALEGUARD_SOURCE_DIR/configs/policy.ini" "$etc/scaleguard/policy.ini"
  cmp "$SCALEGUARD_SOURCE_DIR/configs/catalog.ini" "$etc/scaleguard/catalog.ini"
  # The installed CLI accepts the installed policy (its catalog is found beside it).
  run "$root/opt/scaleguard/bin/scaleguard" policy check "$etc/scaleguard/policy.ini"
  assert_success
  assert_output --partial "[partition gpu-spot]"
  run cat "$etc/job_submit_scaleguard.conf"
  assert_line "policy=/opt/slurm/etc/scaleguard/policy.ini"
  run cat "$etc/plugstack.conf.d/scaleguard.conf"
  assert_line "required $plugin_dir/scaleguard.so policy=/opt/slurm/etc/scaleguard/policy.ini profiles=/opt/scaleguard/share/scaleguard/nccl"
  run cat "$etc/plugstack.conf"
  assert_output "include /opt/slurm/etc/plugstack.conf.d/*"
  run cat "$etc/slurm.conf"
  assert_line --index 0 "ClusterName=pc"
  assert_line --index 3 "include cluster_nodes.conf"
  assert_line "JobSubmitPlugins=scaleguard"
  assert_line "PrologFlags=Alloc"
  assert_line "PrEpPlugins=script,scaleguard"   # Slurm's default `script` kept beside prep/scaleguard
  run cat "$root/etc/profile.d/scaleguard.sh"
  assert_output --partial "PATH=/opt/scaleguard/bin:"
  assert_output --partial "SCALEGUARD_POLICY=\${SCALEGUARD_POLICY:-/opt/slurm/etc/scaleguard/policy.ini}"
  assert_output --partial "SCALEGUARD_CATALOG=\${SCALEGUARD_CATALOG:-/opt/slurm/etc/scaleguard/catalog.ini}"
  # The profile works in a shell: the installed CLI plans with the installed catalog.
  run env -i HOME=/nonexistent PATH=/usr/bin:/bin bash -c ". '$root/etc/profile.d/scaleguard.sh'; echo \$PATH; echo \$SCALEGUARD_CATALOG"
  assert_line --index 0 "/opt/scaleguard/bin:/usr/bin:/bin"
  assert_line --index 1 "/opt/slurm/etc/scaleguard/catalog.ini"
}

@test "Slurm's sbatch loads the installed SPANK plugin with the arguments install.sh wrote" {
  command -v sbatch > /dev/null || skip "sbatch is not installed"
  head_install
  # The files name paths as they will be on the node; point them below the test root.
  sed -i "s|/opt/|$root/opt/|g; s| $plugin_dir/| $root$plugin_dir/|" \
    "$etc/plugstack.conf" "$etc/plugstack.conf.d/scaleguard.conf"
  printf '%s\n' ClusterName=t SlurmctldHost=localhost "PlugStackConfig=$etc/plugstack.conf" > "$BATS_TEST_TMPDIR/slurm.conf"
  SLURM_CONF=$BATS_TEST_TMPDIR/slurm.conf run sbatch --help
  assert_success
  assert_output --partial "--train-model=SPEC"
  assert_output --partial "--train-ckpt-dir"
  refute_output --partial "sbatch: error"
  # A broken argument is what slurmctld and slurmstepd would refuse too.
  sed -i 's/ policy=/ polcy=/' "$etc/plugstack.conf.d/scaleguard.conf"
  SLURM_CONF=$BATS_TEST_TMPDIR/slurm.conf run sbatch --help
  assert_output --partial "unknown argument 'polcy="
}

@test "a second run changes nothing" {
  head_install
  before=$(snapshot)
  run head_install
  assert_success
  assert_output --partial "nothing to change: already installed"
  refute_output --partial "update "
  [ "$(snapshot)" = "$before" ]
}

@test "existing JobSubmitPlugins, PrologFlags, PluginDir, PrEpPlugins and plugstack include are extended, once" {
  printf '%s\n' 'ClusterName=pc' 'JobSubmitPlugins=lua  # site rules' 'PrologFlags=Contain,X11' \
    "PluginDir=/opt/slurm/lib/slurm" 'PrEpPlugins=script' > "$etc/slurm.conf"
  printf '%s\n' 'optional /opt/pyxis/spank_pyxis.so' 'include /opt/slurm/etc/plugstack.conf.d/*' > "$etc/plugstack.conf"
  head_install
  run cat "$etc/slurm.conf"
  assert_output "ClusterName=pc
JobSubmitPlugins=lua,scaleguard
PrologFlags=Contain,X11,Alloc
PluginDir=/opt/slurm/lib/slurm:$plugin_dir
PrEpPlugins=script,scaleguard"
  run cat "$etc/plugstack.conf"
  assert_output "optional /opt/pyxis/spank_pyxis.so
include /opt/slurm/etc/plugstack.conf.d/*"
  before=$(snapshot)
  head_install
  [ "$(snapshot)" = "$before" ]
}

@test "an edited policy is kept; --policy replaces it after checking it" {
  head_install
  sed -i 's/^signal_before_s = 300/signal_before_s = 600/' "$etc/scaleguard/policy.ini"
  run head_install
  assert_success
  assert_output --partial "keeping the installed /opt/slurm/etc/scaleguard/policy.ini"
  grep -q '^signal_before_s = 600' "$etc/scaleguard/policy.ini"
  cp "$SCALEGUARD_SOURCE_DIR/configs/policy.ini" "$BATS_TEST_TMPDIR/new.ini"
  run head_install --policy "$BATS_TEST_TMPDIR/new.ini"
  assert_success
  assert_output --partial "update $etc/scaleguard/policy.ini"
  cmp "$SCALEGUARD_SOURCE_DIR/configs/policy.ini" "$etc/scaleguard/policy.ini"
}

@test "a policy that fails 'scaleguard policy check' is refused before anything is installed" {
  { cat "$SCALEGUARD_SOURCE_DIR/configs/policy.ini"; echo "[rules]"; echo "max_comm_ration = 0.3 rewrite"; } \
    > "$BATS_TEST_TMPDIR/bad.ini"
  sed -i "s|^catalog = .*|catalog = $SCALEGUARD_SOURCE_DIR/configs/catalog.ini|" "$BATS_TEST_TMPDIR/bad.ini"
  before=$(snapshot)
  run head_install --policy "$BATS_TEST_TMPDIR/bad.ini"
  assert_failure 1
  assert_output --partial "bad.ini"
  assert_output --partial "is not valid"
  [ "$(snapshot)" = "$before" ]
}

@test "--dry-run shows every change and makes none" {
  before=$(snapshot)
  run head_install --dry-run
  assert_success
  assert_output --partial "+ DESTDIR=$root cmake --install $SCALEGUARD_BUILD_DIR --prefix /opt/scaleguard"
  assert_output --partial "create $etc/scaleguard/policy.ini"
  assert_output --partial "create $etc/plugstack.conf.d/scaleguard.conf"
  assert_output --partial "update $etc/slurm.conf"
  assert_output --partial "+JobSubmitPlugins=scaleguard"
  assert_output --partial "dry run: nothing was changed"
  [ "$(snapshot)" = "$before" ]
}

@test "compute node: checks the shared install, writes the profile; role from cfnconfig" {
  run "$install_sh" --role compute --prefix /opt/scaleguard --plugin-dir "$plugin_dir" --root "$root"
  assert_failure 1
  assert_output --partial "$root/opt/scaleguard/bin/scaleguard not found: run the head node install first"
  head_install
  rm "$root/etc/profile.d/scaleguard.sh"
  mkdir -p "$root/etc/parallelcluster"
  echo 'cfn_node_type=ComputeFleet' > "$root/etc/parallelcluster/cfnconfig"
  run "$install_sh" --prefix /opt/scaleguard --plugin-dir "$plugin_dir" --root "$root"
  assert_success
  assert_output --partial "create $root/etc/profile.d/scaleguard.sh"
  assert_output --partial "not restarting slurmd"
  [ -f "$root/etc/profile.d/scaleguard.sh" ]
}

@test "sources from a .tar.gz with the tree in one folder" {
  mkdir -p "$BATS_TEST_TMPDIR/t/scaleguard-0.1.0"
  cp -r "$SCALEGUARD_SOURCE_DIR/CMakeLists.txt" "$SCALEGUARD_SOURCE_DIR/configs" "$BATS_TEST_TMPDIR/t/scaleguard-0.1.0/"
  tar -czf "$BATS_TEST_TMPDIR/src.tar.gz" -C "$BATS_TEST_TMPDIR/t" scaleguard-0.1.0
  run "$install_sh" --role head --source "$BATS_TEST_TMPDIR/src.tar.gz" --build-dir "$SCALEGUARD_BUILD_DIR" \
    --no-build --root "$root"
  assert_success
  cmp "$SCALEGUARD_SOURCE_DIR/configs/policy.ini" "$etc/scaleguard/policy.ini"
}

@test "bad input is refused with a clear message" {
  run "$install_sh" --frobnicate
  assert_failure 2
  assert_output --partial "unknown option '--frobnicate'"
  run "$install_sh" --role login
  assert_failure 2
  assert_output --partial "--role 'login': expected head or compute"
  run "$install_sh" --role head --prefix opt/scaleguard
  assert_failure 2
  assert_output --partial "--prefix 'opt/scaleguard': must be an absolute path"
  run "$install_sh" --role head --prefix '/opt/scale guard'
  assert_failure 2
  assert_output --partial "only letters, digits"
  run "$install_sh" --role head --prefix /opt/../etc
  assert_failure 2
  assert_output --partial "'..' is not allowed"
  run "$install_sh" --role head --policy /nonexistent.ini
  assert_failure 2
  assert_output --partial "--policy '/nonexistent.ini': no such readable file"
  run "$install_sh" --role head --root "$BATS_TEST_TMPDIR/missing"
  assert_failure 2
  assert_output --partial "not a directory"
  run "$install_sh" --role head --source
  assert_failure 2
  assert_output --partial "--source needs a value"
  run "$install_sh" --root "$root"
  assert_failure 2
  assert_output --partial "--role not given and $root/etc/parallelcluster/cfnconfig not found"
  run "$install_sh" --role head --root "$root" --slurm-conf-dir /etc/nowhere
  assert_failure 1
  assert_output --partial "$root/etc/nowhere/slurm.conf not found"
  run head_install --source "$BATS_TEST_TMPDIR/nothing-here"
  assert_failure 2
  assert_output --partial "no such directory or file"
  run head_install --source https://example.invalid/scaleguard.zip
  assert_failure 2
  assert_output --partial "a URL must name a .tar.gz"
  run "$install_sh" --role head --source "$SCALEGUARD_SOURCE_DIR" --build-dir "$BATS_TEST_TMPDIR/nobuild" --no-build --root "$root"
  assert_failure 1
  assert_output --partial "not a configured build directory"
}
