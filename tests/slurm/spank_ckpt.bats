#!/usr/bin/env bats
# --train-ckpt-dir: inside the policy's checkpoint roots (configs/policy.ini: /scratch, /fsx,
# /tmp) it is created on the nodes by the submitting user, mode 0750; outside, through '..'
# or through a symlink that leaves the roots, it is refused, on submission and on the node.
load helpers

setup_file() { cluster_env; }
setup() {
  cluster_env
  work=$(user_dir)
}
teardown() { rm -rf "$work"; }

@test "inside the roots: created on every node by the (non-root) user, mode 750" {
  run as_user "$work" sbatch --wait -N2 -o "$work/out" --train-ckpt-dir="$work/run1/ckpt" \
    --wrap 'echo "dir=$SCALEGUARD_CKPT_DIR"; srun -N2 -n2 bash -c "echo task=\$SCALEGUARD_CKPT_DIR"'
  assert_success
  run stat -c '%U %a' "$work/run1" "$work/run1/ckpt"
  assert_line --index 0 "$SCALEGUARD_TEST_USER 750"
  assert_line --index 1 "$SCALEGUARD_TEST_USER 750"
  run cat "$work/out"
  assert_line "dir=$work/run1/ckpt"
  assert_line "task=$work/run1/ckpt"
}

@test "srun jobs create it too" {
  run as_user "$work" srun -n1 --train-ckpt-dir="$work/s/ckpt" bash -c 'echo $SCALEGUARD_CKPT_DIR'
  assert_success
  assert_line "$work/s/ckpt"   # job_submit/scaleguard may add its one-line verdict on stderr
  [ "$(stat -c %U "$work/s/ckpt")" = "$SCALEGUARD_TEST_USER" ]
}

@test "outside the roots, '..' and symlinks leaving the roots are refused at submission" {
  ln -s /etc "$work/escape"
  for dir in /etc/scaleguard-ckpt /var/tmp/ckpt "$work/../../etc/x" "$work/escape/ckpt"; do
    run as_user "$work" sbatch --wrap true --train-ckpt-dir="$dir"
    assert_failure
    assert_output --partial "scaleguard: --train-ckpt-dir="
  done
  run as_user "$work" sbatch --wrap true --train-ckpt-dir="$work/escape/ckpt"
  assert_output --partial "resolves to /etc/ckpt, outside the allowed checkpoint roots"
  [ ! -e /etc/ckpt ]
}

@test "a path that leaves the roots after submission is refused on the node" {
  run as_user "$work" sbatch --parsable -H -o "$work/out" --train-ckpt-dir="$work/later/ckpt" \
    --wrap 'touch "$SCALEGUARD_CKPT_DIR/ran"'
  assert_success
  local id=${output##*$'\n'}
  ln -s /etc "$work/later"      # swapped in while the job waits
  scontrol release "$id"
  run wait_job "$id"
  assert_output FAILED
  [ ! -e /etc/ckpt ]
  [ ! -e "$work/later/ckpt/ran" ]
  run cat "$work/out"
  assert_output --partial "resolves to /etc/ckpt, outside the allowed checkpoint roots"
  # The user's mistake fails the job, not the node.
  run sinfo -h -N -o %t
  refute_output --partial drain
}

@test "the directory is never created as root: a root-only parent makes the job fail" {
  mkdir -m 0755 "$work/rootonly"
  chown root:root "$work/rootonly"
  run as_user "$work" sbatch --parsable -o "$work/out" --train-ckpt-dir="$work/rootonly/ckpt" --wrap true
  assert_success
  run wait_job "${output##*$'\n'}"
  assert_output FAILED
  [ ! -e "$work/rootonly/ckpt" ]
  run cat "$work/out"
  assert_output --partial "cannot create $work/rootonly/ckpt: Permission denied"
}
