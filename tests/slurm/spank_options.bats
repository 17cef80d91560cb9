#!/usr/bin/env bats
# scaleguard SPANK plugin, submitting side: the --train-* options exist on sbatch/srun/salloc,
# reach slurmctld under the names job_submit/scaleguard reads, and bad values (malformed,
# empty, huge, injection-like) fail the submission with the option and its accepted forms.
load helpers

setup_file() { cluster_env; }
setup() {
  cluster_env
  work=$(user_dir)
}
teardown() { rm -rf "$work"; }

options=(train-model train-tokens train-single-gpu-hours train-strategy train-deadline
         train-ckpt-dir train-ckpt-interval train-eval-every train-eval-tokens)

# Job id of a held probe job (cancelled at once): consecutive probes differ by one exactly
# when nothing else was submitted in between.
probe_id() {
  local id
  id=$(sbatch --parsable -H -o /dev/null --wrap true) && scancel "$id" && echo "$id"
}

@test "sbatch, srun and salloc list every --train-* option" {
  for cmd in sbatch srun salloc; do
    run $cmd --help
    for opt in "${options[@]}"; do assert_output --partial -- "--$opt="; done
  done
}

@test "option values reach the job's spank env as _SLURM_SPANK_OPTION_scaleguard_*" {
  # Options without a model (no training intent): the controller judges the raw request.
  # As the test user: $work is theirs, and a checkpoint directory must be the job's user's.
  run as_user "$work" timeout "$SBATCH_WAIT_S" sbatch --wait -o "$work/out" --train-strategy=auto --train-deadline=2h \
    --train-ckpt-interval=30 --train-ckpt-dir="$work/ckpt" --wrap 'env'
  assert_success
  # sbatch exports the job's spank env to the script as SLURM_SPANK_<name>.
  run cat "$work/out"
  assert_line "SLURM_SPANK__SLURM_SPANK_OPTION_scaleguard_train_strategy=auto"
  assert_line "SLURM_SPANK__SLURM_SPANK_OPTION_scaleguard_train_deadline=2h"
  assert_line "SLURM_SPANK__SLURM_SPANK_OPTION_scaleguard_train_ckpt_interval=30"
  assert_line "SLURM_SPANK__SLURM_SPANK_OPTION_scaleguard_train_ckpt_dir=$work/ckpt"
}

@test "SCALEGUARD_TRAIN_* defaults are forwarded under the same names; the command line wins" {
  SCALEGUARD_TRAIN_DEADLINE=3h SCALEGUARD_TRAIN_STRATEGY=zero \
    run timeout "$SBATCH_WAIT_S" sbatch --wait -o "$work/out" --train-strategy=auto --wrap 'env'
  assert_success
  run cat "$work/out"
  assert_line "SLURM_SPANK__SLURM_SPANK_OPTION_scaleguard_train_deadline=3h"
  assert_line "SLURM_SPANK__SLURM_SPANK_OPTION_scaleguard_train_strategy=auto"
  refute_line "SLURM_SPANK__SLURM_SPANK_OPTION_scaleguard_train_strategy=zero"
}

# One malformed value per option, then values every option must refuse.
@test "bad values fail sbatch naming the option and the accepted forms; nothing is queued" {
  declare -A malformed=(
    [train-model]="350Q" [train-tokens]="lots" [train-single-gpu-hours]="-5"
    [train-strategy]="fastest" [train-deadline]="soon" [train-ckpt-dir]="relative/dir"
    [train-ckpt-interval]="0" [train-eval-every]="1.5" [train-eval-tokens]="0"
  )
  local before nl=$'\n'
  before=$(probe_id)
  for opt in "${options[@]}"; do
    for value in "${malformed[$opt]}" "" "x${nl}y" "40B=1" "1;touch $work/pwned" "../../etc" \
                 "\$(id)" "$(head -c 5000 /dev/zero | tr '\0' 1)"; do
      run sbatch --wrap true "--$opt=$value"
      assert_failure
      assert_output --partial "scaleguard: --$opt="
      assert_output --partial "accepted:"
    done
  done
  [ "$(probe_id)" = "$((before + 1))" ]
  [ ! -e "$work/pwned" ]
  assert_slurmctld_alive
}

@test "a 1 MB value in an #SBATCH line is refused without echoing it" {
  { echo '#!/bin/bash'; printf '#SBATCH --train-model=%s\n' "$(head -c 1048576 /dev/zero | tr '\0' a)"
    echo true; } > "$work/big.sh"
  run sbatch "$work/big.sh"
  assert_failure
  assert_output --partial "scaleguard: --train-model='aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...': longer than 4096 bytes"
  assert_slurmctld_alive
}

@test "srun and salloc refuse bad values and bad SCALEGUARD_TRAIN_* defaults too" {
  run srun --train-tokens=12Q true
  assert_failure
  assert_output --partial "scaleguard: --train-tokens='12Q'"
  run salloc --train-strategy=warp true
  assert_failure
  assert_output --partial "scaleguard: --train-strategy='warp'"
  for cmd in "sbatch --wrap true" "srun true" "salloc true"; do
    SCALEGUARD_TRAIN_TOKENS=12Q run $cmd
    assert_failure
    assert_output --partial "SCALEGUARD_TRAIN_TOKENS (default for --train-tokens)='12Q'"
  done
}

@test "a non-root user gets the same checks" {
  run as_user "$work" sbatch --wrap true --train-ckpt-interval=never
  assert_failure
  assert_output --partial "scaleguard: --train-ckpt-interval='never'"
  assert_output --partial "accepted: auto or a whole number of minutes"
}

# A client whose plugstack.conf (beside SLURM_CONF) passes the plugin bad arguments.
client_with_args() {
  mkdir -p "$work/etc"
  cp "$(dirname "$SLURM_CONF")"/*.conf "$work/etc/"
  sed -i "s|scaleguard.so .*|scaleguard.so $*|" "$work/etc/plugstack.conf"
}

@test "strict plugstack arguments: unknown, repeated or relative ones stop the plugin" {
  local policy
  policy=$(sed -n 's/.*policy=\([^ ]*\).*/\1/p' "$(dirname "$SLURM_CONF")/plugstack.conf")
  for args in "policy=$policy bogus=1" "policy=$policy policy=$policy" "policy=relative.ini" \
              "policy=$policy sysfs" "sysfs=/"; do
    client_with_args "$args"
    SLURM_CONF=$work/etc/slurm.conf run sbatch --wrap true
    assert_failure
    assert_output --partial "scaleguard: plugstack.conf:"
  done
  client_with_args "policy=$policy sysfs=/ plan_dir=/run/scaleguard"
  SLURM_CONF=$work/etc/slurm.conf run sbatch --test-only --wrap true
  refute_output --partial "scaleguard: plugstack.conf:"
}
