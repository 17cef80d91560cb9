#!/usr/bin/env bash
# The HTML reports render in headless Chromium with no network: produce them from the sacct
# fixture, the decision-log fixture and the budgets fixture, screenshot them, and check each PNG is a real picture
# (several times the size of a blank page's screenshot) and that Chromium reported no page or
# network error. The one-page report (usage, decisions, budgets) and the y axis of a small
# window (about a GPU-minute) and of a month (thousands of GPU-hours a day): the tick labels
# Chromium's DOM holds are distinct, in order and readable.
# Keeps the files in $KEEP_DIR when set, to look at.
set -euo pipefail
: "${SCALEGUARD_BIN:?}" "${SCALEGUARD_SOURCE_DIR:?}" "${SCALEGUARD_TEST_DATA:?}"
chromium=$(command -v chromium || command -v chromium-browser || true)
[ -n "$chromium" ] || { echo "SKIP: chromium not installed"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$SCALEGUARD_BIN" report --sacct-file "$SCALEGUARD_TEST_DATA/sacct-mixed.txt" \
  --since 2026-12-01 --until 2026-12-03 --policy "$SCALEGUARD_SOURCE_DIR/configs/policy.ini" \
  --format html --output "$work/report.html"
"$SCALEGUARD_BIN" report --decisions "$SCALEGUARD_TEST_DATA/decisions.jsonl" \
  --since 2026-12-03T00:00:00Z --until 2026-12-04T00:00:00Z \
  --format html --output "$work/decisions.html" 2>/dev/null   # its skipped lines: on stderr
"$SCALEGUARD_BIN" report --budgets --policy "$SCALEGUARD_TEST_DATA/budgets/policy.ini" \
  --ledger "$SCALEGUARD_TEST_DATA/budgets/ledger.json" --decisions "$SCALEGUARD_TEST_DATA/budgets/decisions.jsonl" \
  --format html --output "$work/budgets.html"
"$SCALEGUARD_BIN" report --sacct-file "$SCALEGUARD_TEST_DATA/sacct-mixed.txt" \
  --since 2026-12-01 --until 2026-12-04 --policy "$SCALEGUARD_TEST_DATA/budgets/policy.ini" \
  --ledger "$SCALEGUARD_TEST_DATA/budgets/ledger.json" --decision-log "$SCALEGUARD_TEST_DATA/decisions.jsonl" \
  --format html --output "$work/page.html" 2>/dev/null   # the log's skipped lines: on stderr
# A small window: one GPU for 61 s (0.0169 GPU-hours).
hdr='JobID|User|Account|Partition|State|Start|End|ElapsedRaw|AllocTRES|ReqTRES|NNodes|ExitCode|NodeList|AdminComment'
{ echo "$hdr"
  echo '1|ann|ml|gpu-od|COMPLETED|2026-12-01T10:00:00|2026-12-01T10:01:01|61|gres/gpu=1,node=1|gres/gpu=1|1|0:0|n1|'
} > "$work/small.txt"
# A month: every day 12 jobs of 8 GPUs, 2 to 23 h long (1,000 to 1,300 GPU-hours a day).
{ echo "$hdr"
  for d in $(seq 1 30); do
    for j in $(seq 1 12); do
      h=$(( (d * 7 + j * 5) % 22 + 2 ))
      printf '%d|u%d|ml|gpu-od|COMPLETED|2026-11-%02dT00:00:00|2026-11-%02dT%02d:00:00|%d|gres/gpu=8,node=1|gres/gpu=8|1|0:0|n1|\n' \
        $((d * 100 + j)) "$j" "$d" "$d" "$h" $((h * 3600))
    done
  done
} > "$work/month.txt"
"$SCALEGUARD_BIN" report --sacct-file "$work/small.txt" --policy "$SCALEGUARD_SOURCE_DIR/configs/policy.ini" \
  --format html --output "$work/small.html"
"$SCALEGUARD_BIN" report --sacct-file "$work/month.txt" --policy "$SCALEGUARD_SOURCE_DIR/configs/policy.ini" \
  --since 2026-11-01 --until 2026-12-01 --format html --output "$work/month.html"
printf '<!DOCTYPE html><html><body></body></html>\n' > "$work/blank.html"

shoot() {  # shoot NAME: screenshot $work/NAME.html to $work/NAME.png, log in $work/NAME.log
  timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$(mktemp -d -p "$work")" --window-size=1200,1600 \
    --screenshot="$work/$1.png" "file://$work/$1.html" >"$work/$1.log" 2>&1 ||
    { cat "$work/$1.log"; echo "FAIL: chromium exited non-zero for $1.html"; exit 1; }
}
shoot blank
blank=$(stat -c %s "$work/blank.png")
for page in report decisions budgets page small month; do
  shoot "$page"
  png_magic=$(head -c 8 "$work/$page.png" | od -An -tx1 | tr -d ' \n')
  [ "$png_magic" = 89504e470d0a1a0a ] || { echo "FAIL: $page.png is not a PNG"; exit 1; }
  size=$(stat -c %s "$work/$page.png")
  echo "$page.png $size bytes, blank page $blank bytes"
  [ "$size" -gt $((blank * 4)) ] || { echo "FAIL: $page.png looks empty"; exit 1; }
  # D-Bus complaints are about the missing desktop session, not the page.
  if grep -v -i dbus "$work/$page.log" | grep -E 'net::ERR|Uncaught|CONSOLE|Failed to load'; then
    echo "FAIL: chromium reported errors for the $page page"
    exit 1
  fi
done

# The y axis as Chromium holds it: the labels of the day chart's ticks, bottom to top.
ticks() {  # ticks NAME: one label a line
  timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --user-data-dir="$(mktemp -d -p "$work")" \
    --dump-dom "file://$work/$1.html" 2>/dev/null > "$work/$1.dom"
  grep -o '<text[^>]*class="axis ytick"[^>]*>[^<]*</text>' "$work/$1.dom" | sed 's/.*>\([^<]*\)<\/text>/\1/'
}
check_ticks() {  # check_ticks NAME EXPECTED...: the labels are these, distinct and rising
  local name=$1; shift
  local got; got=$(ticks "$name" | tr '\n' ' ' | sed 's/ $//')
  echo "$name.html y axis: $got"
  [ "$got" = "$*" ] || { echo "FAIL: $name.html y axis reads '$got', expected '$*'"; exit 1; }
  [ "$(ticks "$name" | sort -u | wc -l)" = "$#" ] || { echo "FAIL: $name.html has ticks alike"; exit 1; }
}
check_ticks small 0 0.005 0.010 0.015 0.020
check_ticks month 0 500 1,000 1,500
# The one page has each part: usage, the decisions with what they avoided, the budgets.
ticks page >/dev/null   # leaves Chromium's DOM of the page in page.dom
for want in 'id="usage"' 'id="decisions"' 'GPU-hours avoided' 'dollars avoided' 'max_job_gpu_hours' 'id="budgets"' 'aria-label="budget use"'; do
  grep -q -- "$want" "$work/page.dom" || { echo "FAIL: page.html lacks $want"; exit 1; }
done
if [ -n "${KEEP_DIR:-}" ]; then
  mkdir -p "$KEEP_DIR" && for p in report decisions budgets page small month; do cp "$work/$p".* "$KEEP_DIR"/; done
fi
echo "PASS"
