#!/usr/bin/env bash
# Runs the fuzz harnesses (see fuzz/README.md).
#   fuzz/run.sh --short            CI: each harness 20 s (SCALEGUARD_FUZZ_SECONDS overrides)
#   fuzz/run.sh --long             each harness 300 s
#   fuzz/run.sh --time S [HARNESS...]
# Options:
#   --build-dir DIR   build there with fuzz/build.sh first (default: build-fuzz in the repo)
#   --bin-dir DIR     use harnesses already built there (no build)
#   --keep DIR        keep each harness's grown corpus in DIR/<harness> (default: thrown away)
#   --summary FILE    append one line of figures per harness (markdown table row)
# The seed corpus fuzz/corpus/<harness> is copied to a temporary folder: the repository is
# never written. Crash/leak/timeout/UBSan inputs are saved to $ARTIFACTS (default:
# <build dir>/artifacts/<harness>/) and named in the output.
# Exit: 0 all ran clean, 1 a harness found a problem (or failed to start), 77 no clang/libFuzzer
# (skipped: the ctest entry fuzz.short reports it as skipped, not passed).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")

seconds=20
build_dir=$root/build-fuzz
bin_dir=""
keep=""
summary=""
harnesses=()
while [ $# -gt 0 ]; do
  case "$1" in
    --short) seconds=${SCALEGUARD_FUZZ_SECONDS:-20} ;;
    --long) seconds=${SCALEGUARD_FUZZ_SECONDS:-300} ;;
    --time) seconds=$2; shift ;;
    --build-dir) build_dir=$2; shift ;;
    --bin-dir) bin_dir=$2; shift ;;
    --keep) keep=$2; shift ;;
    --summary) summary=$2; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    -*) echo "fuzz/run.sh: unknown option $1" >&2; exit 2 ;;
    *) harnesses+=("$1") ;;
  esac
  shift
done
[ ${#harnesses[@]} -gt 0 ] || harnesses=(fuzz_parsers fuzz_policy fuzz_decide fuzz_budget fuzz_job_submit)

if [ -z "$bin_dir" ]; then
  "$here/build.sh" "$build_dir"
  rc=$?
  [ $rc -eq 77 ] && { echo "fuzz/run.sh: SKIPPED (no clang with libFuzzer)"; exit 77; }
  [ $rc -eq 0 ] || { echo "fuzz/run.sh: build failed" >&2; exit 1; }
  bin_dir=$build_dir
fi
artifacts=${ARTIFACTS:-$bin_dir/artifacts}

# UBSan reports abort (the harnesses are built with -fno-sanitize-recover=all too).
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}

work=$(mktemp -d "${TMPDIR:-/tmp}/sg-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
failed=0
printf '%-16s %10s %8s %6s %7s %7s  %s\n' harness execs exec/s cov ft corpus result
for h in "${harnesses[@]}"; do
  bin=$bin_dir/$h
  if [ ! -x "$bin" ]; then
    echo "fuzz/run.sh: $bin not built" >&2
    failed=1
    continue
  fi
  corpus=$work/$h
  mkdir -p "$corpus" "$artifacts/$h"
  [ -d "$here/corpus/$h" ] && cp "$here/corpus/$h"/* "$corpus/" 2>/dev/null
  dict=()
  [ -f "$here/dict/$h.dict" ] && dict=(-dict="$here/dict/$h.dict")
  log=$work/$h.log
  # -error_exitcode=1: libFuzzer's default (77) would read as "skipped" to ctest.
  # One fuzzing process (no -jobs: that forks workers that write fuzz-N.log into the current
  # folder), niced so that it never starves the machine's other work.
  max_len=(-max_len=4096)
  [ "$h" = fuzz_policy ] && max_len=(-max_len=16384)  # the shipped catalog is ~9 KB
  nice -n 10 "$bin" "$corpus" "${dict[@]}" "${max_len[@]}" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -error_exitcode=1 -timeout_exitcode=1 \
    -artifact_prefix="$artifacts/$h/" >"$log" 2>&1 </dev/null
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -n1 | grep -o '[0-9]*$')
  speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | tail -n1 | grep -o '[0-9]*$')
  last=$(grep -E '^#[0-9]+' "$log" | grep -E 'cov: ' | tail -n1)
  cov=$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.*ft: \([0-9]*\).*/\1/p' <<<"$last")
  units=$(find "$corpus" -type f | wc -l)
  if [ $rc -eq 0 ]; then
    result=ok
  else
    result="FAILED (exit $rc)"
    failed=1
  fi
  printf '%-16s %10s %8s %6s %7s %7s  %s\n' "$h" "${execs:-?}" "${speed:-?}" "${cov:-?}" "${ft:-?}" "$units" "$result"
  [ -n "$summary" ] && printf '| %s | %s s | %s | %s | %s | %s | %s |\n' "$h" "$seconds" "${execs:-?}" "${speed:-?}" \
    "${cov:-?}" "${ft:-?}" "$units" >>"$summary"
  if [ $rc -ne 0 ]; then
    echo "---- $h: last lines of the log ----"
    grep -vE '^#[0-9]+' "$log" | tail -n 60
    found=$(grep -oE "(crash|leak|timeout|oom|slow-unit)-[0-9a-f]+" "$log" | tail -n1)
    [ -n "$found" ] && echo "---- reproduce: $bin $artifacts/$h/$found"
  fi
  if [ -n "$keep" ]; then
    mkdir -p "$keep/$h" && cp "$corpus"/* "$keep/$h/" 2>/dev/null
  fi
done
exit $failed
