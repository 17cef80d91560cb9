#!/usr/bin/env bats
# Prometheus metrics (issue 40) on the dev cluster: job_submit/scaleguard writes its textfile
# (job_submit_scaleguard.conf metrics_file, every second here) and `scaleguard budget sync
# --metrics-file` its own; a real node exporter on a free loopback port serves both through its
# textfile collector. The demo's refusal is in the scrape (rule, outcome, GPU-hours avoided
# as the audit line says), a budget's left matches `scaleguard budget show`, and `promtool
# check metrics` finds nothing in what was scraped. Restores the cluster's settings afterwards.

load helpers
load budget_helpers

policy_text() {
  sed -e "s|^# audit_file = .*|audit_file = $BUD_TMP/audit.jsonl|" \
      -e "s|^catalog *=.*|catalog = $SCALEGUARD_SOURCE_DIR/configs/catalog.ini|" \
      "$SCALEGUARD_SOURCE_DIR/configs/policy.ini"
  cat <<EOT

[budgets]
ledger = $BUD_LEDGER
ledger_max_age = 10m

[budget mlm]
account = sgm-ml
gpu_hours = 10
period = day
actions = 100% reject
EOT
}

# The exporter's page (fails when it does not answer).
scrape() { curl -sf "http://127.0.0.1:$EXPORTER_PORT/metrics"; }
# value SERIES: the sample of SERIES in a scrape, or "". The exporter writes labels sorted by
# name: SERIES is name{labels} in that order.
value() { scrape | awk -v s="$1" '$1 == s { print $2 }'; }
# Waits (bounded, 30 s: a hang guard) until SERIES's value satisfies the awk condition on v.
wait_value() {
  local i v
  for ((i = 0; i < 150; i++)); do
    v=$(value "$1")
    [ -n "$v" ] && awk -v v="$v" "BEGIN { exit !($2) }" && return 0
    sleep 0.2
  done
  fail "$1 is '${v}', expected $2; scrape: $(scrape | grep '^scaleguard_' | head -40)"
}

setup_file() {
  cluster_env
  export BUD_TMP=$(user_dir)
  make_ledger_dir
  mkdir -m 0755 "$BUD_TMP/prom" && chown root:root "$BUD_TMP/prom"
  export PROM_DIR=$BUD_TMP/prom
  ACCOUNTING=0
  if accounting_on; then ACCOUNTING=1; add_accounts sgm-ml; fi
  export ACCOUNTING
  policy_text > "$BUD_TMP/policy.ini"
  export SETTINGS=$SCALEGUARD_DEV_DIR/etc/job_submit_scaleguard.conf
  cp "$SETTINGS" "$BUD_TMP/settings.orig"
  sed -i "s|^policy=.*|policy=$BUD_TMP/policy.ini|" "$SETTINGS"
  printf 'metrics_file=%s\nmetrics_interval=1\n' "$PROM_DIR/scaleguard.prom" >> "$SETTINGS"
  restart_slurmctld
  EXPORTER_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  export EXPORTER_PORT
  prometheus-node-exporter --web.listen-address="127.0.0.1:$EXPORTER_PORT" --collector.disable-defaults \
    --collector.textfile --collector.textfile.directory="$PROM_DIR" >"$BUD_TMP/exporter.log" 2>&1 3>&- &
  echo $! > "$BUD_TMP/exporter.pid"
  local i
  for ((i = 0; i < 100; i++)); do scrape | grep -q '^scaleguard_policy_loaded_timestamp_seconds' && return 0; sleep 0.2; done
  cat "$BUD_TMP/exporter.log" >&2; ls -la "$PROM_DIR" >&2
  return 1
}

teardown_file() {
  [ -n "${BUD_TMP:-}" ] || return 0
  [ -f "$BUD_TMP/exporter.pid" ] && kill "$(cat "$BUD_TMP/exporter.pid")" 2>/dev/null
  scancel --quiet --name=sg-met 2>/dev/null || true
  cp "$BUD_TMP/settings.orig" "$SETTINGS"
  restart_slurmctld
  rm -rf "$BUD_TMP"
}

setup() {
  cluster_env
  cd "$BUD_TMP"
}

@test "the demo's refusal is scraped: rule, outcome and the GPU-hours avoided the audit line records" {
  require_spank
  local d='event="submit",mode="enforce",outcome="reject",partition="gpu-od"'
  local decisions="scaleguard_decisions_total{$d}"
  local rule='scaleguard_rule_hits_total{event="submit",mode="enforce",outcome="reject",partition="gpu-od",rule="distributed_min_gpu_hours"}'
  local avoided="scaleguard_avoided_gpu_seconds_total{$d}"
  local n0 r0 a0
  n0=$(value "$decisions"); r0=$(value "$rule"); a0=$(value "$avoided")
  run as_user "$BUD_TMP" sbatch -J sg-met --gpus=8 --train-model=350M --train-tokens=1.2B --wrap true
  assert_failure
  assert_output --partial "distributed_min_gpu_hours"
  local audit_avoided
  audit_avoided=$(jq -r 'select(.action == "reject" and (.rules | index("distributed_min_gpu_hours"))) | .avoided_gpu_hours' \
    "$BUD_TMP/audit.jsonl" | tail -n 1)
  awk -v a="$audit_avoided" 'BEGIN { exit !(a > 0) }' || fail "audit avoided_gpu_hours: '$audit_avoided'"
  wait_value "$decisions" "v == ${n0:-0} + 1"
  wait_value "$rule" "v == ${r0:-0} + 1"
  wait_value "$avoided" "v - ${a0:-0} > $audit_avoided * 3600 * (1 - 1e-9) && v - ${a0:-0} < $audit_avoided * 3600 * (1 + 1e-9)"
  # The latency of that call, and the file's health as the exporter sees it.
  wait_value 'scaleguard_decision_duration_seconds_count{event="submit"}' "v >= 1"
  [ "$(value 'node_textfile_scrape_error')" = 0 ]
}

@test "a budget's left GPU-hours in the scrape match scaleguard budget show; the sync writes its own file" {
  [ "$ACCOUNTING" = 1 ] || skip "no accounting on the dev cluster (budgets count sacct's usage)"
  sync_ledger
  run as_user "$BUD_TMP" sbatch -J sg-met -H -A sgm-ml --gpus=1 --time=60 --wrap true
  assert_success
  # The sync counts the held job (1 GPU-hour held) and writes its metrics file.
  run scaleguard budget sync --policy "$BUD_TMP/policy.ini" --metrics-file "$PROM_DIR/budget-sync.prom"
  assert_success
  local left held
  left=$(budget_value sgm-ml left)
  held=$(budget_value sgm-ml held)
  assert_close "$held" 1 held
  local b='account="sgm-ml",budget="mlm",mode="enforce",period="day",user=""'
  wait_value "scaleguard_budget_left_gpu_seconds{$b}" "v / 3600 > $left - 1e-6 && v / 3600 < $left + 1e-6"
  wait_value "scaleguard_budget_held_gpu_seconds{$b}" "v == 3600"
  wait_value "scaleguard_budget_checked{$b}" "v == 1"
  wait_value 'scaleguard_budget_ledger_usable' "v == 1"
  wait_value 'scaleguard_budget_sync_success' "v == 1"
  wait_value 'scaleguard_budget_sync_budgets' "v == 1"
}

@test "promtool check metrics finds nothing in the scrape" {
  scrape > "$BUD_TMP/scrape.txt"
  grep -q '^scaleguard_decisions_total' "$BUD_TMP/scrape.txt"
  run promtool check metrics < "$BUD_TMP/scrape.txt"
  assert_success
  assert_output ""
}
