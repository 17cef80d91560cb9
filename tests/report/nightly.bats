#!/usr/bin/env bats
# scripts/nightly/submit: strict parsing (line numbers), partitions, dependencies, dry run,
# submission wiring (a stand-in sbatch that hands out job ids) and the scrontab entry.

bats_load_library_path=/usr/lib/bats
load "$bats_load_library_path/bats-support/load"
load "$bats_load_library_path/bats-assert/load"

setup() {
  : "${SCALEGUARD_SOURCE_DIR:?}"
  submit=$SCALEGUARD_SOURCE_DIR/scripts/nightly/submit
  conf=$BATS_TEST_TMPDIR/nightly.conf
  bin=$BATS_TEST_TMPDIR/bin
  mkdir -p "$bin"
  # Partitions come from this policy: scontrol below does not answer (no cluster).
  printf '[partition gpu-od]\ninstance = p4d.24xlarge\ndefault = yes\n[partition gpu-spot]\ninstance = p4d.24xlarge\ncapacity = spot\n' \
    > "$BATS_TEST_TMPDIR/policy.ini"
  printf '#!/bin/sh\necho "scontrol: error: no cluster" >&2\nexit 1\n' > "$bin/scontrol"
  chmod +x "$bin/scontrol"
  export PATH="$bin:$PATH"
}

nightly() { "$submit" --config "$conf" --policy "$BATS_TEST_TMPDIR/policy.ini" "$@"; }

@test "the shipped configs/nightly.conf is valid" {
  run "$submit" --policy "$BATS_TEST_TMPDIR/policy.ini" --dry-run
  assert_success
  assert_line --index 0 --partial "--job-name=nightly-gpt-small"
  assert_line --index 1 --partial '--dependency=afterok:$JOB_gpt-small,singleton'
}

@test "dry run prints sbatch commands in dependency order" {
  cat > "$conf" <<'EOF2'
# comment line
eval    gpu-od   train,prep   --time=00:10:00  scripts/sbatch/train.sbatch eval.ini   # trailing comment
train   gpu-spot prep         scripts/sbatch/train.sbatch train.ini /tmp/ckpt --steps=10
prep    gpu-od   -            scripts/sbatch/sweep.sbatch prep.ini --lr 1e-3
EOF2
  run nightly --dry-run
  assert_success
  assert_equal "${#lines[@]}" 3
  assert_line --index 0 "sbatch --parsable --job-name=nightly-prep --partition=gpu-od --dependency=singleton $SCALEGUARD_SOURCE_DIR/scripts/sbatch/sweep.sbatch prep.ini --lr 1e-3"
  assert_line --index 1 "sbatch --parsable --job-name=nightly-train --partition=gpu-spot --dependency=afterok:\$JOB_prep,singleton $SCALEGUARD_SOURCE_DIR/scripts/sbatch/train.sbatch train.ini /tmp/ckpt --steps=10"
  assert_line --index 2 "sbatch --parsable --job-name=nightly-eval --partition=gpu-od --dependency=afterok:\$JOB_train:\$JOB_prep,singleton --time=00:10:00 $SCALEGUARD_SOURCE_DIR/scripts/sbatch/train.sbatch eval.ini"
}

@test "submission wires the real job ids into the dependencies" {
  cat > "$bin/sbatch" <<EOF2
#!/bin/sh
# hands out 100, 101, ... and records each call
n=\$(cat "$BATS_TEST_TMPDIR/n" 2>/dev/null || echo 100)
echo "\$*" >> "$BATS_TEST_TMPDIR/sbatch.calls"
echo "scaleguard: accept: single gpus=1" >&2
echo "\$n;cluster"
echo \$((n + 1)) > "$BATS_TEST_TMPDIR/n"
EOF2
  chmod +x "$bin/sbatch"
  printf 'a gpu-od - scripts/sbatch/train.sbatch a.ini\nb gpu-spot a scripts/sbatch/train.sbatch b.ini\nc gpu-od a,b scripts/sbatch/train.sbatch c.ini\n' > "$conf"
  run nightly
  assert_success
  assert_line "nightly: a -> job 100 (gpu-od, dependency singleton)"
  assert_line "nightly:   scaleguard: accept: single gpus=1"
  assert_line "nightly: c -> job 102 (gpu-od, dependency afterok:100:101,singleton)"
  run grep -c -- "--dependency=afterok:100,singleton" "$BATS_TEST_TMPDIR/sbatch.calls"
  assert_output 1
}

@test "sbatch refusing a job stops the queue and says what was submitted" {
  printf '#!/bin/sh\ncase "$*" in *nightly-b*) echo "sbatch: error: scaleguard: reject: 8 GPUs for a 350M model" >&2; exit 1;; esac\necho 7\n' > "$bin/sbatch"
  chmod +x "$bin/sbatch"
  printf 'a gpu-od - scripts/sbatch/train.sbatch\nb gpu-od a scripts/sbatch/train.sbatch\nc gpu-od b scripts/sbatch/train.sbatch\n' > "$conf"
  run nightly
  assert_failure
  assert_output --partial "sbatch refused 'b' (line 2): sbatch: error: scaleguard: reject: 8 GPUs for a 350M model"
  assert_output --partial "already submitted: a=7"
}

@test "a malformed line is named by its number" {
  printf '# header\n\ngood gpu-od - scripts/sbatch/train.sbatch\nbroken gpu-od\n' > "$conf"
  run nightly --dry-run
  assert_failure
  assert_output "nightly: $conf:4: expected 'NAME PARTITION AFTER [--OPTION=VALUE...] SCRIPT [ARGS...]', got 2 field(s): broken gpu-od"
}

@test "unsafe words, bad names and options we set are refused" {
  printf 'x gpu-od - scripts/sbatch/train.sbatch $(reboot)\n' > "$conf"
  run nightly --dry-run
  assert_failure
  assert_output --partial "$conf:1: '\$(reboot)' has characters other than"
  printf '9lives gpu-od - scripts/sbatch/train.sbatch\n' > "$conf"
  run nightly --dry-run
  assert_failure
  assert_output --partial "job name '9lives' must start with a letter"
  printf 'x gpu-od - --dependency=afterany:1 scripts/sbatch/train.sbatch\n' > "$conf"
  run nightly --dry-run
  assert_failure
  assert_output --partial "submit sets --dependency itself"
  printf 'x gpu-od - --time=1:00:00\n' > "$conf"
  run nightly --dry-run
  assert_failure
  assert_output --partial "$conf:1: no SCRIPT after the sbatch options"
  printf 'x gpu-od - scripts/sbatch/missing.sbatch\n' > "$conf"
  run nightly --dry-run
  assert_failure
  assert_output --partial "scripts/sbatch/missing.sbatch does not exist"
}

@test "an unknown partition is refused with the known ones" {
  printf 'a gpu-od - scripts/sbatch/train.sbatch\nb gpu-big - scripts/sbatch/train.sbatch\n' > "$conf"
  run nightly --dry-run
  assert_failure
  assert_output "nightly: $conf:2: unknown partition 'gpu-big' (known from $BATS_TEST_TMPDIR/policy.ini: gpu-od gpu-spot)"
}

@test "partitions come from scontrol when the cluster answers" {
  printf '#!/bin/sh\necho "PartitionName=debug AllowGroups=ALL"\necho "PartitionName=gpu-big Nodes=x"\n' > "$bin/scontrol"
  printf 'b gpu-big - scripts/sbatch/train.sbatch\nc gpu-od - scripts/sbatch/train.sbatch\n' > "$conf"
  run nightly --dry-run
  assert_failure
  assert_output "nightly: $conf:2: unknown partition 'gpu-od' (known from scontrol show partition: debug gpu-big)"
}

@test "duplicates, unknown dependencies and cycles are refused" {
  printf 'a gpu-od - scripts/sbatch/train.sbatch\na gpu-od - scripts/sbatch/train.sbatch\n' > "$conf"
  run nightly --dry-run
  assert_failure
  assert_output "nightly: $conf:2: duplicate job name 'a' (first on line 1)"
  printf 'a gpu-od ghost scripts/sbatch/train.sbatch\n' > "$conf"
  run nightly --dry-run
  assert_failure
  assert_output "nightly: $conf:1: 'a' waits for unknown job 'ghost'"
  printf 'a gpu-od c scripts/sbatch/train.sbatch\nb gpu-od a scripts/sbatch/train.sbatch\nc gpu-od b scripts/sbatch/train.sbatch\n' > "$conf"
  run nightly --dry-run
  assert_failure
  assert_output "nightly: $conf:1: dependency cycle: a -> c -> b -> a"
  printf 'a gpu-od a scripts/sbatch/train.sbatch\n' > "$conf"
  run nightly --dry-run
  assert_failure
  assert_output "nightly: $conf:1: 'a' waits for itself"
  : > "$conf"
  run nightly --dry-run
  assert_failure
  assert_output --partial "no jobs"
}

@test "scrontab entry: printed, installed next to other entries, bad times refused" {
  printf 'a gpu-od - scripts/sbatch/train.sbatch\n' > "$conf"
  run nightly --print-scrontab --at "30 1 * * 1-5"
  assert_success
  assert_line --index 0 "#SCRON --job-name=nightly-submit --time=00:10:00"
  assert_line --index 1 "30 1 * * 1-5 $SCALEGUARD_SOURCE_DIR/scripts/nightly/submit --config $conf --root $SCALEGUARD_SOURCE_DIR --policy $BATS_TEST_TMPDIR/policy.ini"
  run nightly --print-scrontab --at "every night"
  assert_failure
  assert_output --partial "is not five cron fields"
  # scrontab stand-in: -l prints the installed table, FILE installs it.
  printf '#SCRON --time=1\n0 0 * * * /bin/true\n#SCRON --job-name=nightly-submit --time=00:10:00\n0 2 * * * old-entry\n' > "$BATS_TEST_TMPDIR/table"
  printf '#!/bin/sh\nif [ "$1" = -l ]; then cat "%s"; else cp "$1" "%s"; fi\n' "$BATS_TEST_TMPDIR/table" "$BATS_TEST_TMPDIR/table" > "$bin/scrontab"
  chmod +x "$bin/scrontab"
  run nightly --install-scrontab
  assert_success
  run cat "$BATS_TEST_TMPDIR/table"
  assert_line --index 0 "#SCRON --time=1"
  assert_line --index 1 "0 0 * * * /bin/true"
  assert_line --index 2 "#SCRON --job-name=nightly-submit --time=00:10:00"
  assert_line --index 3 --partial "0 2 * * * $SCALEGUARD_SOURCE_DIR/scripts/nightly/submit"
  assert_equal "${#lines[@]}" 4
}
