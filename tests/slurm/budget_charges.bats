#!/usr/bin/env bats
# What a job is charged (issue 36, classes 2, 3, 7): caps and budgets judge the whole job, and
# no sequence of updates and syncs lets it grow uncharged. Each class test failed against the
# plugin of main before the change (78148c9); the lowered-task-count test holds the ledger and
# budget_property.py's oracle to the GPUs Slurm really allocates. The policy:
# configs/policy.ini with gpu-spot left ungoverned (no [partition gpu-spot]), max_job_gpu_hours
# = 150 only warning, and budgets of accounts of their own (sgb-ch-*), synced by hand; restores
# the cluster's policy afterwards.

load helpers
load budget_helpers

setup_file() {
  cluster_env
  export BUD_SKIP=
  accounting_on || { BUD_SKIP="the dev cluster has no accounting (budgets count sacct's usage)"; return 0; }
  resume_nodes
  export BUD_TMP=$(user_dir)
  make_ledger_dir
  cp "$SCALEGUARD_SOURCE_DIR/configs/catalog.ini" "$BUD_TMP/"
  add_accounts sgb-ch-up sgb-ch-warn
  # gpu-spot's section removed: its jobs are ungoverned (no cap, no budget).
  awk '/^\[partition gpu-spot\]/ { skip = 1; next } /^\[/ { skip = 0 } !skip' "$SCALEGUARD_SOURCE_DIR/configs/policy.ini" |
    sed -e 's/^distributed_min_gpu_hours *=.*/distributed_min_gpu_hours = off/' \
        -e 's/^max_job_gpu_hours *=.*/max_job_gpu_hours = 150 warn/' > "$BUD_TMP/policy.ini"
  cat >> "$BUD_TMP/policy.ini" <<EOT

[budgets]
ledger = $BUD_LEDGER
ledger_max_age = 10m
on_stale_ledger = closed

[budget up]
account = sgb-ch-up
gpu_hours = 10
period = day
actions = 100% reject

[budget warn]
account = sgb-ch-warn
gpu_hours = 500
period = day
actions = 100% reject
EOT
  export SETTINGS=$SCALEGUARD_DEV_DIR/etc/job_submit_scaleguard.conf
  use_policy
  printf '#!/bin/sh\ntrue\n' > "$BUD_TMP/job.sh"
  chmod 755 "$BUD_TMP/job.sh"
}

teardown_file() {
  budget_teardown sg-ch
}

setup() {
  budget_setup
}

user_sbatch() { as_user "$BUD_TMP" sbatch -J sg-ch -H "$@" 2>&1; }

@test "class 7: a partition list past 256 bytes is judged in the governed partition after the cut" {
  local list
  list=$(printf 'gpu-spot,%.0s' {1..60})gpu-od   # 540 bytes; gpu-od past byte 256
  # 8 GPUs x 3 days = 576 GPU-hours: over the (warning) cap and over budget warn's 500.
  run user_sbatch -A sgb-ch-warn -p "$list" --gpus=8 -t 3-0 --wrap true
  sync_ledger
  run user_sbatch -A sgb-ch-warn -p "$list" --gpus=8 -t 3-0 --wrap true
  assert_failure
  assert_output --partial 'budget warn (account sgb-ch-warn'
  # Slurm's own view: the job the plugin let in (if any) carries the cap's warning, so it was judged.
  run grep -c "decision sg-[0-9-]* event=submit job=new uid=$(id -u "$SCALEGUARD_TEST_USER") partition=gpu-spot,gpu-spot.*rules=max_job_gpu_hours" \
    "$SCALEGUARD_DEV_DIR/log/slurmctld.log"
  assert_output --regexp '^[1-9]'
  # A list the plugin cannot read whole is refused, not cut.
  run user_sbatch -p "$(printf 'gpu-spot,%.0s' {1..7300})gpu-od" --gpus=1 -t 10 --wrap true
  assert_failure
  assert_output --partial 'partition list longer than 65536 bytes'
  scancel --name=sg-ch
}

@test "class 3: a cap that only warns charges the budget the whole job" {
  scancel --name=sg-ch --state=PENDING; sleep 1
  sync_ledger
  # 8 GPUs x 2 days = 384 GPU-hours: the warning cap of 150 leaves it whole; budget warn has 500.
  run user_sbatch -A sgb-ch-warn -p gpu-od --gpus=8 -t 2-0 --wrap true
  assert_success
  assert_output --partial 'max_job_gpu_hours'
  # Charged 384 (was 150): a second one does not fit.
  run user_sbatch -A sgb-ch-warn -p gpu-od --gpus=8 -t 2-0 --wrap true
  assert_failure
  assert_output --partial 'budget warn (account sgb-ch-warn'
  assert_output --partial '384.00 accepted since the last sync'
  sync_ledger
  assert_close "$(budget_value sgb-ch-warn held)" 384 held
  scancel --name=sg-ch
}

@test "class 2: lower, sync, raise: the raise is charged against what the ledger holds" {
  scancel --name=sg-ch --state=PENDING; sleep 1
  sync_ledger
  # 4 GPUs x 2 h = 8 of the 10 GPU-hours.
  run user_sbatch -A sgb-ch-up --parsable -p gpu-od -N1 --gpus-per-node=4 -t 2:00:00 --wrap true
  assert_success
  local id
  id=$(parsed_job_id)
  run as_user "$BUD_TMP" scontrol update job="$id" TresPerNode=gres:gpu:1   # lowered: 2 GPU-hours
  assert_success
  sync_ledger
  assert_close "$(budget_value sgb-ch-up held)" 2 held
  # Another job takes 6 more: 8 of 10 held.
  run user_sbatch -A sgb-ch-up -p gpu-od --gpus=3 -t 2:00:00 --wrap true
  assert_success
  # Raised back to 4 GPUs: 6 more GPU-hours than the ledger holds for it, 14 > 10: refused
  # (was charged 8 - 8 = 0 against the job's record, which only grows).
  run as_user "$BUD_TMP" scontrol update job="$id" TresPerNode=gres:gpu:4
  assert_failure
  run job_field "$id" TresPerNode
  assert_output --regexp "gpu:1$"
  run grep "update of job $id by uid $(id -u "$SCALEGUARD_TEST_USER") refused: scaleguard: budget up (account sgb-ch-up.*this update (to 4 GPUs x 2:00:00, 6.00 GPU-hours more)" \
    "$SCALEGUARD_DEV_DIR/log/slurmctld.log"
  assert_success
  scancel --name=sg-ch
}

@test "a lowered task count: the ledger holds, and the property oracle counts, what Slurm then allocates" {
  # Soak SEED=703725473 on 25.11.7 reported a budget over by its oracle: NumNodes=2 of a
  # -n16 --gpus-per-task=1 --gpus-per-node=4 job set NumTasks=8, and 25.11 validates the GRES
  # again with the new count (8 GPUs shown, allocated 8); the oracle kept the largest NumTasks
  # it had seen (16, 22.05's rule: 22.05 keeps the GRES it validated) and counted 16 GPU-hours.
  # The plugin (its record only grows: 16) and the ledger (what Slurm holds: 8) were right.
  # The same mechanism with an explicit NumTasks, a shape both releases run: -N2 -n16
  # --gpus-per-task=1 lowered to NumTasks=4 gets 16 GPUs on 22.05.8, 4 on 25.11.7.
  scancel --name=sg-ch; wait_no_running_jobs
  run user_sbatch -A sgb-ch-warn --parsable -p gpu-od -N2 -n16 --gpus-per-task=1 -t 60 --wrap 'sleep 600'
  assert_success
  local id oracle record ledger alloc i
  id=$(parsed_job_id)
  # The oracle of tests/slurm/property (as budget_property.py counts a job) sees the job
  # before and after the user's update, as it does in a run.
  run python3 - "$BATS_TEST_DIRNAME/property" "$id" "$SCALEGUARD_TEST_USER" "$BUD_TMP" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import budget_property as bp
import envelope_property as ep
job, user, workdir = sys.argv[2], sys.argv[3], sys.argv[4]
run = ep.Runner(user, workdir)
cluster, state = ep.Cluster(run), bp.State()
bp.all_records(run, state, cluster)
rc, out, err = run(["scontrol", "update", f"JobId={job}", "NumTasks=4"])
if rc:
    sys.exit(f"update refused: {err}{out}")
recs = [r for r in bp.all_records(run, state, cluster) if r.get("JobId") == job]
print(f"{bp.held_gpu_hours(recs, cluster)[0]:g}")
PY
  assert_success
  oracle=$output
  record=$(job_comment "$id" | sed -n 's/.*\[sg=\([^;]*\);.*/\1/p')
  [ -n "$record" ] || fail "job $id carries no scaleguard record"
  sync_ledger
  ledger=$(jq -r --arg r "$record" '.jobs[$r]' "$BUD_LEDGER")
  # What Slurm grants: the job released on the idle cluster, its allocated GPUs x 1 h.
  scontrol release "$id"
  for ((i = 0; i < 300; i++)); do
    [ "$(squeue -h -j "$id" -o %T)" = RUNNING ] && break
    sleep 0.2
  done
  alloc=$(squeue -h -j "$id" -O tres-alloc:0 | sed -n 's/.*gres\/gpu=\([0-9]*\).*/\1/p')
  scancel "$id"
  [ -n "$alloc" ] || fail "job $id did not start: $(squeue -h -j "$id" -o '%T %r')"
  echo "# $(scontrol --version): allocated $alloc GPUs; ledger $ledger, oracle $oracle GPU-hours" >&3
  awk -v l="$ledger" -v a="$alloc" 'BEGIN { exit !(l + 1e-9 >= a) }' ||
    fail "the ledger holds $ledger GPU-hours for job $id, Slurm allocated $alloc GPUs x 1 h"
  assert_close "$oracle" "$alloc" "the oracle's GPU-hours for job $id (allocated $alloc GPUs x 1 h)"
}

@test "the sync refuses a ledger directory others may write (a user could block or delete the ledger)" {
  local open_dir
  open_dir=$(mktemp -d /tmp/sg-ledger.XXXXXX)
  chmod 1777 "$open_dir"
  run scaleguard budget sync --policy "$BUD_TMP/policy.ini" --ledger "$open_dir/ledger.json"
  assert_failure
  assert_output --partial "the ledger directory $open_dir may be written by others"
  run ls -A "$open_dir"
  assert_output ""   # nothing written there
  rm -rf "$open_dir"
}

@test "the sync reads sacct and squeue in their standard time format whatever root's SLURM_TIME_FORMAT says" {
  # With SLURM_TIME_FORMAT=%s leaking into the sync, every budget became unusable (refusing all).
  SLURM_TIME_FORMAT=%s sync_ledger
  run jq -r '[.budgets[] | select(has("unusable"))] | length' "$BUD_LEDGER"
  assert_output 0
}
