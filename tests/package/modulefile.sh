#!/usr/bin/env bash
# package.modulefile: the Lmod modulefile the build fills from
# packaging/modulefiles/scaleguard.lua.in parses (luac -p) and, where Lmod is installed
# (Debian: lmod), `module load scaleguard` from a copy of its tree puts the installed
# programs' bin/ on PATH, their man pages on MANPATH, and `module unload` takes them off.
set -euo pipefail
: "${SCALEGUARD_BUILD_DIR:?}"
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
modules=$SCALEGUARD_BUILD_DIR/packaging/modulefiles
file=$(ls "$modules"/scaleguard/*.lua)
[ -f "$file" ] || fail "no modulefile under $modules/scaleguard (cmake/package.cmake)"
grep -q '@[A-Z_]*@' "$file" && fail "unfilled placeholders in $file"
luac=$(command -v luac5.3 || command -v luac5.4 || command -v luac || true)
[ -n "$luac" ] || { echo "SKIP: no luac (lua5.3)"; exit 77; }
echo "== $luac -p $file"
"$luac" -p "$file"

init=/usr/share/lmod/lmod/init/bash
[ -r "$init" ] || { echo "SKIP: Lmod not installed (lmod): parsed only"; exit 77; }
echo "== Lmod: module load scaleguard"
root=$(sed -n 's/^local root *= *"\(.*\)"$/\1/p' "$file")
[ -n "$root" ] || fail "no root in $file"
version=$(basename "$file" .lua)
out=$(env -i HOME="$tmp" PATH=/usr/bin:/bin bash -c '
  set -e
  source "$1"
  module use "$2"
  module load scaleguard
  echo "PATH=$PATH"; echo "MANPATH=$MANPATH"; echo "ROOT=$SCALEGUARD_ROOT"
  module list 2>&1
  module unload scaleguard
  echo "AFTER=$PATH ${SCALEGUARD_ROOT:-unset}"' _ "$init" "$modules" 2>&1) || fail "module load: $out"
echo "$out"
if [ "$root" != /usr ]; then   # a /usr install leaves PATH alone
  grep -q "^PATH=$root/bin:" <<<"$out" || fail "PATH does not start with $root/bin"
  grep -q "^MANPATH=$root/share/man" <<<"$out" || fail "MANPATH does not start with $root/share/man"
fi
grep -q "^ROOT=$root$" <<<"$out" || fail "SCALEGUARD_ROOT is not $root"
grep -q "scaleguard/$version" <<<"$out" || fail "module list does not show scaleguard/$version"
grep -q "^AFTER=.* unset$" <<<"$out" || fail "module unload left SCALEGUARD_ROOT set"
if [ "$root" != /usr ] && grep "^AFTER=" <<<"$out" | grep -q "$root/bin"; then
  fail "module unload left $root/bin on PATH"
fi
echo "== ok"
