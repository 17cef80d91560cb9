#!/usr/bin/env bats
# `scaleguard report --budgets`, `scaleguard budget show|sacctmgr|sync` and `policy check` on the
# budgets fixture (tests/unit/data/budgets: a policy, a ledger, a decision log), through the
# real binary; sync with stand-ins for squeue, sacct and sacctmgr on PATH.

bats_load_library_path=/usr/lib/bats
load "$bats_load_library_path/bats-support/load"
load "$bats_load_library_path/bats-assert/load"
bats_require_minimum_version 1.5.0

setup() {
  : "${SCALEGUARD_BIN:?}" "${SCALEGUARD_TEST_DATA:?}"
  data=$SCALEGUARD_TEST_DATA/budgets
  opts=(--policy "$data/policy.ini" --ledger "$data/ledger.json")
}

sg() { "$SCALEGUARD_BIN" "$@"; }

@test "report --budgets: used, committed, held, left and the forecast from the ledger; refusals from the log" {
  run sg report --budgets "${opts[@]}" --decisions "$data/decisions.jsonl" --format json
  assert_success
  ml=$(jq -c '.budgets[] | select(.budget == "ml")' <<<"$output")
  [ "$(jq -r .used <<<"$ml")" = 40 ]
  [ "$(jq -r .committed <<<"$ml")" = 10 ]
  [ "$(jq -r .held <<<"$ml")" = 20 ]
  [ "$(jq -r .left <<<"$ml")" = 30 ]
  # One decision before the period is not counted: 2 refusals (16 + 8 GPU-hours kept out), 1 warning.
  [ "$(jq -r .refused <<<"$ml")" = 2 ]
  [ "$(jq -r .kept_out_gpu_hours <<<"$ml")" = 24 ]
  [ "$(jq -r .warned <<<"$ml")" = 1 ]
  # Forecast: 40 used in 108 h, so 40/108 per hour until 2100-01-01 from the snapshot.
  awk -v f="$(jq -r .forecast <<<"$ml")" 'BEGIN { want = 40 + 40 / 108 * (4102444800 - 1796472000) / 3600;
                                                   d = f - want; if (d < 0) d = -d; exit !(d < 1e-6 * want) }'
  alice=$(jq -c '.budgets[] | select(.budget == "alice")' <<<"$output")
  [ "$(jq -r .mode <<<"$alice")" = shadow ]
  [ "$(jq -r .would_refuse <<<"$alice")" = 1 ]
  [ "$(jq -r .refused <<<"$alice")" = 0 ]
  [ "$(jq -r '.budgets[] | select(.budget == "cv") | .counted' <<<"$output")" = false ]
  jq -e '.notes[] | select(test("skipped 1 line"))' <<<"$output"
}

@test "report --budgets in text, CSV and HTML; options that do not go with it are usage errors" {
  run sg report --budgets "${opts[@]}" --decisions "$data/decisions.jsonl"
  assert_success
  assert_output --partial 'ml (account ml): 100.00 GPU-hours, range 2026-12-01T00:00:00Z .. 2100-01-01T00:00:00Z'
  assert_output --partial 'used 40.00 (40.0%), committed 10.00 by 1 running job(s), held 20.00 by 2 pending job(s), left 30.00'
  assert_output --partial 'refused 2, kept out 24.00 GPU-hours, warned 1'
  assert_output --partial 'alice (user alice, shadow): $500.00, range'
  assert_output --partial '  would have refused 1, kept out'
  assert_output --partial 'cv (account cv): 10.00 GPU-hours'
  assert_output --partial 'not counted by this ledger'
  run sg report --budgets "${opts[@]}" --decisions "$data/decisions.jsonl" --format csv
  assert_success
  assert_line --index 0 --partial 'budget,scope,mode,unit,period,start,end,total,used,committed,held,left,forecast'
  assert_line --index 1 --partial 'ml,account ml,enforce,GPU-hours,range,2026-12-01T00:00:00Z,2100-01-01T00:00:00Z,100.0000,40.0000,10.0000,20.0000,30.0000'
  run sg report --budgets "${opts[@]}" --decisions "$data/decisions.jsonl" --format html
  assert_success
  assert_output --partial '<svg'
  assert_output --partial 'aria-label="budget use"'
  run sg report --budgets "${opts[@]}" --since 2026-12-01
  assert_failure 2
  assert_output --partial 'does not go with --budgets'
  # --ledger also names the ledger of the default (one-page) report, but not of --decisions alone.
  run sg report --decisions "$data/decisions.jsonl" --ledger "$data/ledger.json"
  assert_failure 2
  assert_output --partial 'does not go with --decisions'
  run sg report --budgets --policy "$data/policy.ini" --ledger /nonexistent/ledger.json
  assert_failure 1
  assert_output --partial 'cannot read the budget ledger /nonexistent/ledger.json'
}

@test "budget show: a user's budgets, an account's" {
  run sg budget show "${opts[@]}" --user alice
  assert_success
  assert_output --partial 'ml (account ml)'
  assert_output --partial 'alice (user alice, shadow)'
  refute_output --partial 'cv (account cv)'
  assert_output --partial 'jobs accepted since 2026-12-05T12:00:00Z are not in these numbers'
  run sg budget show "${opts[@]}" --account cv --json
  assert_success
  [ "$(jq -r '.budgets | length' <<<"$output")" = 1 ]
  [ "$(jq -r '.budgets[0].budget' <<<"$output")" = cv ]
  run sg budget show "${opts[@]}" --user nobody-here
  assert_success
  assert_output 'no budget counts user nobody-here'
}

@test "budget sacctmgr prints association limits and the caveats, skipping what Slurm cannot hold" {
  run sg budget sacctmgr "${opts[@]}"
  assert_success
  assert_line 'sacctmgr -i modify account where name=ml set GrpTRESMins=gres/gpu=6000'
  assert_line 'sacctmgr -i modify account where name=cv set GrpTRESMins=gres/gpu=600'
  assert_output --partial "# alice: a user's budget across accounts has no association limit; skipped"
  assert_output --partial 'PriorityUsageResetPeriod'
}

@test "policy check shows the budgets; a mistake in a budget names file and line" {
  run sg policy check "$data/policy.ini"
  assert_success
  assert_output --partial 'budget ml: account ml, 100.00 GPU-hours from 2026-12-01T00:00:00Z to 2100-01-01T00:00:00Z: 80% warn, 100% reject'
  assert_output --partial 'budget alice: user alice, $500.00'
  assert_output --partial 'mode shadow'
  sed 's/^gpu_hours = 100$/gpu_hour = 100/' "$data/policy.ini" > "$BATS_TEST_TMPDIR/policy.ini"
  sed -i "s|^catalog = .*|catalog = $(cd "$data/../../../.." && pwd)/configs/catalog.ini|" "$BATS_TEST_TMPDIR/policy.ini"
  run sg policy check "$BATS_TEST_TMPDIR/policy.ini"
  assert_failure 1
  assert_output --regexp "policy.ini:[0-9]+: \[budget ml\] gpu_hour: unknown key 'gpu_hour'"
}

@test "budget sync: squeue, sacct and sacctmgr through stand-ins; a failing one writes no ledger" {
  fake=$BATS_TEST_TMPDIR/bin
  mkdir -p "$fake"
  cp "$data/policy.ini" "$BATS_TEST_TMPDIR/policy.ini"
  sed -i "s|^catalog = .*|catalog = $(cd "$data/../../../.." && pwd)/configs/catalog.ini|" "$BATS_TEST_TMPDIR/policy.ini"
  # One running job of ml (8 GPUs, 30 of 60 min used) and one pending (4 GPUs x 2 h).
  us=$'\x1f'
  {
    printf '%s\n' "7${us}alice${us}ml${us}gpu-od${us}RUNNING${us}1:00:00${us}30:00${us}1${us}1${us}1${us}0${us}*:*:*${us}OK${us}cpu=1,gres/gpu=8${us}gres:gpu:8${us}N/A${us}N/A${us}N/A${us}${us}"
    printf '%s\n' "8${us}bob${us}ml${us}gpu-od${us}PENDING${us}2:00:00${us}0:00${us}1${us}1${us}1${us}0${us}*:*:*${us}OK${us}cpu=1${us}gres:gpu:4${us}N/A${us}N/A${us}N/A${us}${us}"
  } > "$BATS_TEST_TMPDIR/squeue.out"
  cat > "$fake/squeue" <<SH
#!/bin/sh
printf '%s\n' "\$@" > "$BATS_TEST_TMPDIR/squeue.args"
cat "$BATS_TEST_TMPDIR/squeue.out"
SH
  cat > "$fake/sacct" <<SH
#!/bin/sh
printf '%s\n' "\$@" > "$BATS_TEST_TMPDIR/sacct.args"
echo "TZ=\$TZ" >> "$BATS_TEST_TMPDIR/sacct.args"
printf 'JobID${us}User${us}Account${us}Partition${us}State${us}Start${us}End${us}ElapsedRaw${us}AllocTRES${us}ReqTRES${us}NNodes${us}ExitCode${us}NodeList${us}AdminComment\n'
printf '3${us}alice${us}ml${us}gpu-od${us}COMPLETED${us}2026-12-02T00:00:00${us}2026-12-02T02:00:00${us}7200${us}gres/gpu=4${us}gres/gpu=4${us}1${us}0:0${us}n1${us}\n'
exit \${SACCT_RC:-0}
SH
  cat > "$fake/sacctmgr" <<SH
#!/bin/sh
case "\$*" in *DefaultAccount*) echo 'alice|ml' ;; *) echo 'alice|ml'; echo 'bob|ml' ;; esac
SH
  chmod +x "$fake"/*
  ledger=$BATS_TEST_TMPDIR/ledger.json
  PATH=$fake:$PATH run sg budget sync --policy "$BATS_TEST_TMPDIR/policy.ini" --ledger "$ledger"
  assert_success
  assert_output --partial 'ml: used 8.00 GPU-hours, committed 4.00 GPU-hours, held 8.00 GPU-hours of 100.00 GPU-hours'
  assert_output --partial '2 queued job(s), 1 run(s)'
  [ "$(jq -r .budgets.ml.used "$ledger")" = 8 ]
  [ "$(jq -r .default_account.alice "$ledger")" = ml ]
  [ "$(stat -c %a "$ledger")" = 644 ]
  grep -qx -- '-r' "$BATS_TEST_TMPDIR/squeue.args"
  grep -qx -- '-X' "$BATS_TEST_TMPDIR/sacct.args"
  grep -qx -- '--starttime=2026-12-01T00:00:00' "$BATS_TEST_TMPDIR/sacct.args"
  grep -qx 'TZ=UTC' "$BATS_TEST_TMPDIR/sacct.args"
  before=$(cat "$ledger")
  SACCT_RC=1 PATH=$fake:$PATH run sg budget sync --policy "$BATS_TEST_TMPDIR/policy.ini" --ledger "$ledger"
  assert_failure 1
  assert_output --partial 'sacct failed (exit 1)'
  [ "$(cat "$ledger")" = "$before" ]
}
