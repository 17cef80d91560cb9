#!/usr/bin/env bash
# The HTML reports render in headless Chromium with no network: produce them from the sacct
# fixture, the decision-log fixture and the budgets fixture, screenshot them, and check each PNG is a real picture
# (several times the size of a blank page's screenshot) and that Chromium reported no page or
# network error.
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
for page in report decisions budgets; do
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
if [ -n "${KEEP_DIR:-}" ]; then mkdir -p "$KEEP_DIR" && cp "$work"/report.* "$work"/decisions.* "$work"/budgets.* "$KEEP_DIR"/; fi
echo "PASS"
