#!/usr/bin/env bats
# Issue 13's property, generated: with `max_job_gpu_hours = 150 reject` (and
# `max_array_gpu_hours = 150 reject` where the policy knows that rule; gpu-spot's own
# `max_job_gpu_hours = 100 rewrite`; a reservation `sgprop` in gpu-spot), every request shape the
# test user can submit -- random combinations of the sbatch/salloc/srun options that change
# nodes, tasks, GPUs, time, partition or exclusivity, het jobs, arrays, --train-* intent and
# `scontrol update` after submission -- is refused, or Slurm's own view of the held job
# (`scontrol show job -d`) bounds it to <= 150 GPU-hours; a released sample's real allocation
# too; slurmctld stays alive. The generator and oracle: property/envelope_property.py.
# SEED=N reproduces a run; SCALEGUARD_PROPERTY_SHAPES (default 300) sets its size.
# The whole output is kept in $SCALEGUARD_DEV_DIR/log/envelope-property.log.

load helpers
# At file level: bats 1.8 arms a test's timeout before its body runs (an assignment inside the
# test is ignored and helpers.bash's 240 s applies).
BATS_TEST_TIMEOUT=800
source "$BATS_TEST_DIRNAME/property/policy.bash"

setup_file() {
  cluster_env
  resume_nodes
  export POL_TMP=$(user_dir)
  export SETTINGS=$SCALEGUARD_DEV_DIR/etc/job_submit_scaleguard.conf
  PROP_ARGS="$(prop_tighten_policy "$SETTINGS" "$POL_TMP" 150 gpu-spot=100) $(prop_make_reservation "$SCALEGUARD_TEST_USER")"
  export PROP_ARGS
  restart_slurmctld
}

teardown_file() {
  local dropped=0
  scancel --quiet --user="$SCALEGUARD_TEST_USER" 2>/dev/null || true
  prop_drop_reservation || dropped=1
  prop_restore_policy "$SETTINGS" "$POL_TMP"
  restart_slurmctld
  rm -rf "$POL_TMP"
  return "$dropped"   # a reservation left behind would hold the nodes from every later file
}

@test "every generated shape is refused or granted <= 150 GPU-hours (100 in gpu-spot); slurmctld stays alive" {
  # The shapes this file promises: a missing reservation or spot cap would quietly test less.
  [[ $PROP_ARGS == *"--partition-cap gpu-spot="* && $PROP_ARGS == *"--reservation sgprop"* ]] ||
    fail "the property would run without the spot cap or the reservation: '$PROP_ARGS' (see setup_file's stderr)"
  local log=$SCALEGUARD_DEV_DIR/log/envelope-property.log
  # shellcheck disable=SC2086
  run python3 "$BATS_TEST_DIRNAME/property/envelope_property.py" $PROP_ARGS \
    --shapes "${SCALEGUARD_PROPERTY_SHAPES:-300}" --sample 8 \
    --pidfile "$SCALEGUARD_DEV_DIR/run/slurmctld.pid"
  printf '%s\n' "$output" > "$log"
  grep -E '^(envelope property|summary|  (refused|updates|released|shapes over|violations|slurmctld))' "$log" >&3 || true
  assert_success
  assert_output --partial 'violations: 0'
  assert_slurmctld_alive
}
