#!/usr/bin/env bats
# --train-ckpt-dir: inside the policy's checkpoint roots (configs/policy.ini: /scratch, /fsx,
# /tmp) it is created on the nodes by the submitting user, mode 0750; outside, through '..'
# or through a symlink that leaves the roots, it is refused, on submission and on the node.
# Below the root every part must be the user's own (root's on the way to it), never a
# symlink, never writable by every user: a directory or symlink another user planted in /tmp
# is refused with its path and owner.
load helpers

# A second non-root user: the one who plants directories and symlinks for the test user.
other_user=sgother
as_other() { runuser -u "$other_user" -- "$@"; }

setup_file() {
  cluster_env
  id "$other_user" >/dev/null 2>&1 || useradd --no-create-home --shell /bin/bash "$other_user"
}
setup() {
  cluster_env
  work=$(user_dir)
  # Names in /tmp itself (the checkpoint root, mode 1777), where anyone can plant them.
  planted=$(mktemp -u /tmp/scaleguard-planted.XXXXXX)
  theirs=$(mktemp -u /tmp/scaleguard-theirs.XXXXXX)
}
teardown() { rm -rf "$work" "$planted" "$theirs"; }

# Held job as the test user writing into $1; prints its id.
held_job() {
  run as_user "$work" sbatch --parsable -H -o "$work/out" --train-ckpt-dir="$1" --wrap 'touch "$SCALEGUARD_CKPT_DIR/ran"'
  assert_success
  job=${output##*$'\n'}
}

@test "inside the roots: created on every node by the (non-root) user, mode 750" {
  run as_user "$work" timeout "$SBATCH_WAIT_S" sbatch --wait -N2 -o "$work/out" --train-ckpt-dir="$work/run1/ckpt" \
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

@test "a directory another user made in /tmp (mode 0777) is refused at submission, naming it and its owner" {
  as_other mkdir "$planted"
  as_other chmod 0777 "$planted"
  for dir in "$planted" "$planted/ckpt"; do
    run as_user "$work" sbatch --wrap true --train-ckpt-dir="$dir"
    assert_failure
    assert_output --partial "scaleguard: --train-ckpt-dir='${dir:0:40}"
    assert_output --partial "$planted is owned by $other_user (uid $(id -u "$other_user")), not by the job's user $SCALEGUARD_TEST_USER"
  done
  [ ! -e "$planted/ckpt" ]
}

@test "a directory another user plants after submission is refused on the node; the job fails, not the node" {
  held_job "$planted/ckpt"
  as_other mkdir "$planted"
  as_other chmod 0777 "$planted"
  scontrol release "$job"
  run wait_job "$job"
  assert_output FAILED
  [ ! -e "$planted/ckpt" ]
  run cat "$work/out"
  assert_output --partial "scaleguard: checkpoint directory '$planted/ckpt': $planted is owned by $other_user"
  run sinfo -h -N -o %t
  refute_output --partial drain
}

@test "a symlink another user plants (to their own directory inside the roots) is refused" {
  as_other mkdir "$theirs"
  as_other chmod 0777 "$theirs"
  as_other ln -s "$theirs" "$planted"
  for dir in "$planted" "$planted/ckpt"; do
    run as_user "$work" sbatch --wrap true --train-ckpt-dir="$dir"
    assert_failure
    assert_output --partial "$planted is a symlink (to $theirs) owned by $other_user"
  done
  # Planted while the job waits: refused on the node, nothing created in their directory.
  as_other rm "$planted"
  held_job "$planted/ckpt"
  as_other ln -s "$theirs" "$planted"
  scontrol release "$job"
  run wait_job "$job"
  assert_output FAILED
  [ -z "$(ls -A "$theirs")" ]
  run cat "$work/out"
  assert_output --partial "checkpoint directory '$planted/ckpt': $planted is a symlink (to $theirs) owned by $other_user"
}

@test "the user's own symlink is refused too: below the root only real directories" {
  mkdir "$work/real"
  chown "$SCALEGUARD_TEST_USER" "$work/real"
  as_user "$work" ln -s "$work/real" "$work/link"
  run as_user "$work" sbatch --wrap true --train-ckpt-dir="$work/link/ckpt"
  assert_failure
  assert_output --partial "$work/link is a symlink (to $work/real) owned by $SCALEGUARD_TEST_USER"
}

@test "the user's own existing directory is accepted, also below a root-owned one; one writable by all is not" {
  mkdir -m 0755 "$work/shared"                                 # root's, on the way: fine
  mkdir -m 0700 "$work/shared/mine"
  chown "$SCALEGUARD_TEST_USER" "$work/shared/mine"
  run as_user "$work" timeout "$SBATCH_WAIT_S" sbatch --wait -o "$work/out" --train-ckpt-dir="$work/shared/mine" \
    --wrap 'touch "$SCALEGUARD_CKPT_DIR/ran"'
  assert_success
  [ "$(stat -c %U "$work/shared/mine/ran")" = "$SCALEGUARD_TEST_USER" ]
  as_user "$work" chmod 0777 "$work/shared/mine"
  run as_user "$work" sbatch --wrap true --train-ckpt-dir="$work/shared/mine"
  assert_failure
  assert_output --partial "$work/shared/mine (owned by $SCALEGUARD_TEST_USER (uid $(id -u "$SCALEGUARD_TEST_USER"))) is writable by every user (mode 0777)"
}
