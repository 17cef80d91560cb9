#!/usr/bin/env bats
# Budgets on the account tree (issue 40): a budget on an account covers the jobs of its
# sub-accounts as Slurm's associations nest. `budget sync` reads the tree with sacctmgr and
# keeps it in the ledger; job_submit/scaleguard judges every enclosing budget, the tightest
# decides. Accounts sgt-inst > sgt-proj of their own, so other files' jobs never count.

load helpers
load budget_helpers

setup_file() {
  cluster_env
  export BUD_SKIP=
  accounting_on || { BUD_SKIP="the dev cluster has no accounting (scripts/dev-cluster/accounting)"; return 0; }
  export BUD_TMP=$(user_dir)
  make_ledger_dir
  sacctmgr -i add account sgt-inst >/dev/null || true
  sacctmgr -i add account sgt-proj parent=sgt-inst >/dev/null || true
  sacctmgr -i add user "$SCALEGUARD_TEST_USER" account=sgt-proj >/dev/null || true
  cp "$SCALEGUARD_SOURCE_DIR/configs/catalog.ini" "$BUD_TMP/"
  # configs/policy.ini without the small-job rule (these jobs are small on purpose).
  sed -e 's/^distributed_min_gpu_hours *=.*/distributed_min_gpu_hours = off/' \
    "$SCALEGUARD_SOURCE_DIR/configs/policy.ini" > "$BUD_TMP/policy.ini"
  cat >> "$BUD_TMP/policy.ini" <<EOT
[budgets]
ledger = $BUD_LEDGER
ledger_max_age = 10m

[budget inst]
account = sgt-inst
gpu_hours = 3
period = day
actions = 100% reject

[budget proj]
account = sgt-proj
gpu_hours = 100
period = day
actions = 100% reject
EOT
  export SETTINGS=$SCALEGUARD_DEV_DIR/etc/job_submit_scaleguard.conf
  use_policy
}

teardown_file() {
  budget_teardown sg-tree
}

setup() {
  budget_setup
}

@test "a parent account's budget refuses a child account's job; the sync counts the child's jobs in the parent's budget" {
  run sacctmgr -n -P show assoc where account=sgt-proj format=Account,ParentName,User
  assert_line 'sgt-proj|sgt-inst|'
  sync_ledger
  run jq -c '.account_tree["sgt-proj"]' "$BUD_LEDGER"
  assert_output '["sgt-inst"]'
  # 2 of the parent's 3 GPU-hours, in the child account: fits both.
  run as_user "$BUD_TMP" sbatch -J sg-tree -H -A sgt-proj --gpus=2 --time=60 --wrap true
  assert_success
  sync_ledger
  assert_close "$(budget_value sgt-inst held)" 2 "sgt-inst held"
  # 2 more fit the child's own 100 but not the parent's 3: refused by the parent's budget.
  run as_user "$BUD_TMP" sbatch -J sg-tree -H -A sgt-proj --gpus=2 --time=60 --wrap true
  assert_failure
  assert_output --partial 'budget inst (account sgt-inst, which covers sub-account sgt-proj'
  assert_output --partial 'this job (2 GPUs x 1:00:00, 2.00 GPU-hours) does not fit'
  # What fits the parent still passes.
  run as_user "$BUD_TMP" sbatch -J sg-tree -H -A sgt-proj --gpus=1 --time=60 --wrap true
  assert_success
  # The user sees the enclosing budget among theirs.
  run as_user "$BUD_TMP" scaleguard budget show --policy "$BUD_TMP/policy.ini"
  assert_output --partial 'inst'
}
