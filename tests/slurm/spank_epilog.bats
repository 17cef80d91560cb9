#!/usr/bin/env bats
# The SPANK plugin's job epilog (root) removes <plan_dir>/<job>.user, the per-job directory
# the job's user may write (issue 36 class 11): the whole tree the job made there goes,
# nested directories, a locked one, symlinks to root's files and directories outside, a
# FIFO, odd names, and nothing a link points at is touched. Two nodes: both epilogs (one
# plan_dir for the dev cluster's two slurmd) remove the same tree at once.
load helpers

setup_file() { cluster_env; }
setup() {
  cluster_env
  grep -q '^JobSubmitPlugins=scaleguard' "$SLURM_CONF" || skip "dev cluster runs without job_submit/scaleguard"
  work=$(user_dir)
  chmod 755 "$work"
  plans=$SCALEGUARD_DEV_DIR/plans
  # Root's, outside the tree: what the job's links point at.
  victim=$work/victim
  mkdir "$victim"
  echo "root's file" > "$victim/file"
  chmod 755 "$victim"
}
teardown() { rm -rf "$work"; }

@test "the epilog removes the job's whole tree in <job>.user without following links" {
  cat > "$work/job.sh" <<EOF
#!/bin/bash
set -e
d=\$(dirname "\$SCALEGUARD_PLAN_FILE")
echo "DIR=\$d"
mkdir -p "\$d/a/b/c/d/e/f/g/h/i/j"
echo data > "\$d/a/b/c/d/e/f/g/h/i/j/file"
for i in \$(seq 300); do : > "\$d/a/many.\$i"; done   # more names than one read batch
ln -s "$victim/file" "\$d/a/b/link-to-file"
ln -s "$victim" "\$d/a/b/link-to-dir"
ln -s "$victim" "\$d/top-link-to-dir"
mkfifo "\$d/a/b/c/fifo"
mkdir "\$d/a/"\$'odd\\nname\\001 *'
touch "\$d/a/"\$'odd\\nname\\001 *'/\$'-rf \\\\'
chmod 000 "\$d/a/b/c/d"   # the user locks a directory
find "\$d" | wc -l
EOF
  chmod 755 "$work/job.sh"
  run as_user "$work" timeout "$SBATCH_WAIT_S" sbatch --wait --parsable -N2 --ntasks-per-node=1 --gpus-per-node=1 \
    --time=3:00:00 --train-model=350M --train-strategy=ddp --train-single-gpu-hours=200 -o "$work/out" "$work/job.sh"
  [ "$status" -eq 0 ] || { echo "sbatch: $output"; echo "job output:"; cat "$work/out"; }
  assert_success
  local job=${output##*$'\n'} dir
  job=${job%%;*}
  run cat "$work/out"
  dir=$(sed -n 's/^DIR=//p' "$work/out")
  assert_equal "$dir" "$plans/$job.user"
  # The job made the tree (its find counted over 300 entries).
  assert_line --regexp '^[0-9]{3,}$'
  # The epilog runs once the job has ended: wait for it.
  local i
  for ((i = 0; i < 100; i++)); do [ -e "$dir" ] || break; sleep 0.2; done
  if [ -e "$dir" ]; then
    find "$dir" | head -n 20
    fail "$dir is still there after the job's epilog"
  fi
  # What the links pointed at is untouched.
  run cat "$victim/file"
  assert_output "root's file"
  [ "$(stat -c %U "$victim/file")" = root ]
  # No entry of this job is left in plan_dir.
  run bash -c "ls -A '$plans' | grep -E '^$job(\\.|\$)'"
  assert_output ""
}

@test "a tree deeper than the epilog's bound is left and logged, the job and its epilog end" {
  cat > "$work/job.sh" <<'EOF2'
#!/bin/bash
d=$(dirname "$SCALEGUARD_PLAN_FILE")
echo "DIR=$d"
cd "$d" && for i in $(seq 80); do mkdir x && cd x || exit 1; done && echo deep
EOF2
  chmod 755 "$work/job.sh"
  run as_user "$work" timeout "$SBATCH_WAIT_S" sbatch --wait --parsable -N2 --ntasks-per-node=1 --gpus-per-node=1 \
    --time=3:00:00 --train-model=350M --train-strategy=ddp --train-single-gpu-hours=200 -o "$work/out" "$work/job.sh"
  [ "$status" -eq 0 ] || { echo "sbatch: $output"; echo "job output:"; cat "$work/out"; }
  assert_success
  local dir i
  dir=$(sed -n 's/^DIR=//p' "$work/out")
  grep -qx deep "$work/out"
  for ((i = 0; i < 100; i++)); do grep -qs "scaleguard: epilog: $dir not removed" "$SCALEGUARD_DEV_DIR"/log/slurmd-*.log && break; sleep 0.2; done
  run grep -hs "scaleguard: epilog: $dir not removed" "$SCALEGUARD_DEV_DIR"/log/slurmd-*.log
  assert_output --partial "deeper or larger than the plugin removes"
  rm -rf "$dir"
}
