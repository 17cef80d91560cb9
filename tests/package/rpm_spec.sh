#!/usr/bin/env bash
# package.rpm_spec: packaging/rpm/scaleguard.spec lints (rpmlint: no errors), expands for the
# default Slurm prefix and for a named one (rpmspec), and builds a source rpm (rpmbuild -bs)
# from a `git archive` of the source tree (the source rpm itself is not linted: unsigned, and
# rpmlint wants Group/Packager tags that modern specs leave out). Exit 77 (skip) without rpm/rpmlint
# (scripts/install-deps.sh installs them).
set -euo pipefail
: "${SCALEGUARD_SOURCE_DIR:?}"
spec=$SCALEGUARD_SOURCE_DIR/packaging/rpm/scaleguard.spec
for tool in rpmlint rpmbuild rpmspec; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# rpmlint keeps its cache in $HOME.
export HOME=$tmp

echo "== rpmlint"
(cd "$tmp" && rpmlint "$spec") || fail "rpmlint $spec"

echo "== rpmspec: packages and the plugin path for a named Slurm"
version=$(sed -n 's/^project(scaleguard VERSION \([0-9.]*\).*/\1/p' "$SCALEGUARD_SOURCE_DIR/CMakeLists.txt")
[ "$(rpmspec -q --srpm --qf '%{version}\n' "$spec")" = "$version" ] ||
  fail "spec Version is not the project's $version"
out=$(rpmspec -q --qf '%{name}\n' "$spec")
[ "$out" = $'scaleguard\nscaleguard-run\nscaleguard-slurm-plugins' ] || fail "packages: $out"
out=$(rpmspec -q --qf '%{name}\n' --without runner "$spec")
[ "$out" = $'scaleguard\nscaleguard-slurm-plugins' ] || fail "packages --without runner: $out"
out=$(rpmspec -P --define 'slurm_prefix /opt/slurm-24.05' --define 'slurm_release 24.05' "$spec")
grep -q -- '-DSCALEGUARD_SLURM_PREFIX=/opt/slurm-24.05 ' <<<"$out" || fail "slurm_prefix not passed to cmake"
grep -q '^/opt/slurm-24.05/lib/slurm/job_submit_scaleguard.so$' <<<"$out" || fail "plugins not in the named PluginDir"
grep -q '^Provides: *scaleguard-slurm-plugins-24.05 ' <<<"$out" || fail "no Provides naming Slurm 24.05"
grep -q '^/opt/slurm/lib/slurm/scaleguard.so$' <(rpmspec -P "$spec") || fail "default prefix is not /opt/slurm"

echo "== rpmbuild -bs"
mkdir -p "$tmp/SOURCES"
tarball=$tmp/SOURCES/scaleguard-$version.tar.gz
if git -C "$SCALEGUARD_SOURCE_DIR" rev-parse --git-dir >/dev/null 2>&1; then
  git -C "$SCALEGUARD_SOURCE_DIR" archive --prefix="scaleguard-$version/" -o "$tarball" HEAD
else
  tar -C "$SCALEGUARD_SOURCE_DIR/.." -czf "$tarball" --exclude='build*' \
    --transform "s|^$(basename "$SCALEGUARD_SOURCE_DIR")|scaleguard-$version|" "$(basename "$SCALEGUARD_SOURCE_DIR")"
fi
rpmbuild -bs --quiet --define "_topdir $tmp" "$spec" >/dev/null
srpm=$tmp/SRPMS/scaleguard-$version-1.src.rpm
[ -f "$srpm" ] || fail "no $srpm"
contents=$(rpm -qpl "$srpm")
grep -qx scaleguard.spec <<<"$contents" || fail "spec not in the source rpm: $contents"
echo "== ok"
