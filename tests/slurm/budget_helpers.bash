# Shared by the budget files (budget_charges.bats; the helpers budget.bats also uses): a
# policy copy with budgets, a ledger directory root owns, syncs the plugin has read.
# Needs: BUD_TMP (a directory of the test's), BUD_LEDGER, SETTINGS (job_submit_scaleguard.conf).

accounting_on() {
  scontrol show config | grep -Eq '^AccountingStorageType += accounting_storage/slurmdbd' &&
    sacct -n -X -j 1 >/dev/null 2>&1
}

# The test user's association with each account named (sacctmgr says "Nothing new added",
# exit 1, when it exists).
add_accounts() {
  local a
  for a in "$@"; do
    sacctmgr -i add account "$a" >/dev/null || true
    sacctmgr -i add user "$SCALEGUARD_TEST_USER" account="$a" >/dev/null || true
    sacctmgr -n -P show assoc where account="$a" user="$SCALEGUARD_TEST_USER" format=User | grep -qx "$SCALEGUARD_TEST_USER"
  done
}

# A root-owned ledger directory in BUD_TMP (the plugin refuses a ledger others may write).
make_ledger_dir() {
  mkdir -m 0755 "$BUD_TMP/ledger" && chown root:root "$BUD_TMP/ledger"
  export BUD_LEDGER=$BUD_TMP/ledger/budget-ledger.json
}

# Points slurmctld at $BUD_TMP/policy.ini (the settings file is restored by restore_settings).
use_policy() {
  cp "$SETTINGS" "$BUD_TMP/settings.orig"
  sed -i "s|^policy=.*|policy=$BUD_TMP/policy.ini|" "$SETTINGS"
  restart_slurmctld
}
restore_settings() {
  [ -f "$BUD_TMP/settings.orig" ] && cp "$BUD_TMP/settings.orig" "$SETTINGS"
  restart_slurmctld
}

# Runs the sync and waits (bounded) until slurmctld's ledger thread (once a second) has read it.
sync_ledger() {
  local log=$SCALEGUARD_DEV_DIR/log/slurmctld.log i before
  before=$(grep -c "budget ledger $BUD_LEDGER loaded" "$log" || true)
  run scaleguard budget sync --policy "$BUD_TMP/policy.ini"
  assert_success
  for ((i = 0; i < 50; i++)); do
    [ "$(grep -c "budget ledger $BUD_LEDGER loaded" "$log" || true)" -gt "$before" ] && return 0
    sleep 0.2
  done
  fail "slurmctld did not load the new ledger"
}

# One number of a budget from `scaleguard budget show --json` (what users see).
budget_value() {  # budget_value ACCOUNT FIELD
  scaleguard budget show --policy "$BUD_TMP/policy.ini" --account "$1" --json | jq -r ".budgets[0].$2"
}

assert_close() {  # assert_close GOT WANT [WHAT]: within 1e-6 relative
  awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b; if (m < 1) m = 1;
                                   exit !(d <= 1e-6 * m) }' || fail "${3:-value}: got $1, expected $2"
}

# teardown_file of a budget file: its jobs (by name) cancelled and gone, the settings back.
budget_teardown() {
  [ -n "${BUD_TMP:-}" ] || return 0
  scancel --quiet --name="$1" 2>/dev/null || true
  wait_no_running_jobs   # the next file (cluster.bats) expects idle nodes
  restore_settings
  rm -rf "$BUD_TMP"
}

# setup of a budget file: skipped with the reason setup_file found (no accounting), the
# cluster's environment, in BUD_TMP.
budget_setup() {
  [ -z "$BUD_SKIP" ] || skip "$BUD_SKIP"
  cluster_env
  cd "$BUD_TMP" || return 1
}
