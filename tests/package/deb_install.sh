#!/usr/bin/env bash
# package.deb_install: builds the .deb packages with scripts/package, installs them with
# dpkg -i on this machine, checks that every file lands where packaging/README.md says and
# that the installed programs use the installed configs, then starts a dev cluster
# (scripts/dev-cluster/up, no accounting) whose slurmctld and clients load the plugins FROM
# THE PACKAGE'S PATHS (SCALEGUARD_PLUGIN_DIR = Slurm's PluginDir) and checks they work: the
# SPANK plugin's --train-* options, a refusal and an accepted job's AdminComment from
# job_submit/scaleguard. Purges the packages and stops the cluster on every exit.
# Root only (dpkg, slurmd). Environment: SCALEGUARD_SOURCE_DIR, SCALEGUARD_BUILD_DIR
# (the package build goes to $SCALEGUARD_BUILD_DIR/package-build, the cluster's state to
# $SCALEGUARD_BUILD_DIR/package-cluster), SCALEGUARD_RUN_BIN when the runner is built,
# SCALEGUARD_PACKAGE_ARGS: cmake arguments for the package build (-DSCALEGUARD_RUNNER=OFF).
set -euo pipefail
: "${SCALEGUARD_SOURCE_DIR:?}" "${SCALEGUARD_BUILD_DIR:?}"
src=$SCALEGUARD_SOURCE_DIR
pkg_build=$SCALEGUARD_BUILD_DIR/package-build
export SCALEGUARD_DEV_DIR=$SCALEGUARD_BUILD_DIR/package-cluster
export SCALEGUARD_ACCOUNTING=0
packages=(scaleguard-slurm-plugins scaleguard-run scaleguard)
start=$SECONDS

step() { echo "== $* ($((SECONDS - start)) s)"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]; }
purge() {
  local p present=()
  for p in "${packages[@]}"; do
    dpkg-query -W "$p" >/dev/null 2>&1 && present+=("$p")
  done
  [ ${#present[@]} -eq 0 ] || dpkg --purge "${present[@]}" >/dev/null
}
cleanup() {
  local rc=$?
  if [ $rc != 0 ] && [ -f "$SCALEGUARD_DEV_DIR/log/slurmctld.log" ]; then
    echo "--- slurmctld.log (tail)" >&2; tail -n 20 "$SCALEGUARD_DEV_DIR/log/slurmctld.log" >&2
  fi
  "$src/scripts/dev-cluster/down" >/dev/null 2>&1 || true
  purge || { echo "FAIL: dpkg --purge ${packages[*]}" >&2; rc=1; }
  exit $rc
}

[ "$(id -u)" = 0 ] || { echo "SKIP: root only (dpkg -i, slurmd)"; exit 77; }
# A run killed before its trap ran (ctest's timeout) leaves its packages installed (this also
# purges scaleguard packages installed by hand: run it on build and CI machines only).
purge
trap cleanup EXIT

step "scripts/package $pkg_build"
# shellcheck disable=SC2086  # SCALEGUARD_PACKAGE_ARGS: extra cmake arguments, split on spaces
mapfile -t debs < <("$src/scripts/package" "$pkg_build" -- ${SCALEGUARD_PACKAGE_ARGS:-} | grep '\.deb$')
printf '   %s\n' "${debs[@]}"
deb_of() {  # the .deb of package $1, or nothing
  local d
  for d in "${debs[@]}"; do
    if [[ $(basename "$d") == "$1"_* ]]; then echo "$d"; fi
  done
}
cli_deb=$(deb_of scaleguard); plugins_deb=$(deb_of scaleguard-slurm-plugins); run_deb=$(deb_of scaleguard-run)
[ -n "$cli_deb" ] && [ -n "$plugins_deb" ] || fail "scaleguard or scaleguard-slurm-plugins .deb missing"
if [ -n "${SCALEGUARD_RUN_BIN:-}" ]; then
  [ -n "$run_deb" ] || fail "the runner is built but there is no scaleguard-run .deb"
fi

step "control fields name the Slurm release the plugins were built for"
version=$(dpkg-deb -f "$cli_deb" Version); version=${version%-*}   # 0.1.0-1 -> 0.1.0
system_plugins=$(dirname "$(dpkg -L slurm-wlm-basic-plugins | grep '/auth_munge\.so$')")
slurm_release=$(dpkg-query -W -f='${Version}' slurm-wlm-basic-plugins | sed -E 's/^([0-9]+\.[0-9]+).*/\1/')
depends=$(dpkg-deb -f "$plugins_deb" Depends)
provides=$(dpkg-deb -f "$plugins_deb" Provides)
echo "   Depends: $depends"; echo "   Provides: $provides"
[[ $depends == *"slurm-wlm-basic-plugins (>= $slurm_release)"* ]] || fail "Depends lacks slurm-wlm-basic-plugins (>= $slurm_release)"
[[ $depends == *"slurm-wlm-basic-plugins (<< "* ]] || fail "Depends has no upper bound on slurm-wlm-basic-plugins"
[[ $depends == *"scaleguard (= "* ]] || fail "Depends lacks scaleguard (= version)"
[[ $provides == "scaleguard-slurm-plugins-$slurm_release" ]] || fail "Provides: $provides"
# (grep -q on a variable: on a pipe, its early exit fails the writer under pipefail)
description=$(dpkg-deb -f "$plugins_deb" Description)
grep -q "Slurm $slurm_release" <<<"$description" || fail "Description does not name Slurm $slurm_release"
# Exactly the plugins (and their note) in the plugin package.
extra=$(dpkg-deb -c "$plugins_deb" | awk '{print $6}' | grep -v '/$' |
  grep -v -e "^\.$system_plugins/scaleguard\.so$" -e "^\.$system_plugins/job_submit_scaleguard\.so$" \
          -e "^\.$system_plugins/prep_scaleguard\.so$" \
          -e '^\./usr/share/doc/scaleguard-slurm-plugins/' || true)
[ -z "$extra" ] || fail "unexpected files in scaleguard-slurm-plugins: $extra"

step "dpkg -i"
dpkg -i "${debs[@]}" >/dev/null
for p in scaleguard scaleguard-slurm-plugins ${run_deb:+scaleguard-run}; do
  installed "$p" || fail "$p not installed"
done

step "files land where stated"
want=(/usr/bin/scaleguard
  /usr/share/scaleguard/policy.ini /usr/share/scaleguard/catalog.ini
  /usr/share/scaleguard/nccl/efa-v1.ini /usr/share/scaleguard/sbatch/train.sbatch
  /usr/share/scaleguard/examples/gpt-small.ini
  /usr/share/man/man1/scaleguard.1 /usr/share/man/man5/scaleguard-policy.5
  /usr/share/doc/scaleguard/admin-guide.md
  "$system_plugins/scaleguard.so" "$system_plugins/job_submit_scaleguard.so" "$system_plugins/prep_scaleguard.so"
  /usr/share/doc/scaleguard-slurm-plugins/slurm-release)
[ -n "$run_deb" ] && want+=(/usr/bin/scaleguard-run /usr/share/man/man1/scaleguard-run.1
  /usr/share/modulefiles/scaleguard/$version.lua)
for f in "${want[@]}"; do
  [ -f "$f" ] || fail "$f missing"
  dpkg -S "$f" >/dev/null 2>&1 || fail "$f is not owned by a package"
done
grep -q "Slurm $slurm_release" /usr/share/doc/scaleguard-slurm-plugins/slurm-release
# Stripped, and only the plugin symbols exported (the linker scripts survive packaging).
for so in scaleguard.so job_submit_scaleguard.so; do
  symbols=$(nm -D --defined-only "$system_plugins/$so")
  grep -q plugin_type <<<"$symbols" || fail "$so exports no plugin_type"
done
[ "$(/usr/bin/scaleguard --version)" = "scaleguard $version" ] || fail "scaleguard --version: $(/usr/bin/scaleguard --version)"
# The installed CLI reads the installed policy by default (compiled-in /usr/share/scaleguard).
out=$(cd / && env -u SCALEGUARD_POLICY -u SCALEGUARD_CATALOG /usr/bin/scaleguard policy check 2>&1) ||
  fail "scaleguard policy check (installed defaults): $out"
grep -q '\[partition gpu-od\] (default)' <<<"$out" || fail "policy check output: $out"
page=$(man -w scaleguard)
[ "$page" = /usr/share/man/man1/scaleguard.1 ] || fail "man -w scaleguard: $page"
if [ -n "$run_deb" ]; then
  /usr/bin/scaleguard-run --help >/dev/null || fail "scaleguard-run --help"
fi

step "dev cluster with the plugins from $system_plugins"
SCALEGUARD_PLUGIN_DIR=$system_plugins SCALEGUARD_POLICY=/usr/share/scaleguard/policy.ini \
  "$src/scripts/dev-cluster/up" >/dev/null
source "$SCALEGUARD_DEV_DIR/env.sh"
grep -q "^required $system_plugins/scaleguard\.so " "$SCALEGUARD_DEV_DIR/etc/plugstack.conf" ||
  fail "plugstack.conf does not load $system_plugins/scaleguard.so: $(cat "$SCALEGUARD_DEV_DIR/etc/plugstack.conf")"
ctld=$(cat "$SCALEGUARD_DEV_DIR/run/slurmctld.pid")
grep -q " $system_plugins/job_submit_scaleguard\.so$" "/proc/$ctld/maps" ||
  fail "slurmctld has not mapped $system_plugins/job_submit_scaleguard.so"
help=$(sbatch --help)
grep -q -- '--train-model' <<<"$help" || fail "sbatch --help shows no --train-* option"

step "job_submit/scaleguard judges jobs"
cd "$SCALEGUARD_DEV_DIR"
intent=(--train-model=350M --train-tokens=1.2B)
if out=$(sbatch -J sg-pkg --gpus=8 "${intent[@]}" --wrap true 2>&1); then
  fail "350M on 8 GPUs was accepted: $out"
fi
grep -q 'distributed_min_gpu_hours' <<<"$out" || fail "refusal without the rule: $out"
out=$(sbatch --parsable -J sg-pkg --hold --gpus=1 --time=12:00:00 "${intent[@]}" --wrap true 2>&1) ||
  fail "1 GPU refused: $out"
job_id=$(grep -E '^[0-9]+(;[^ ]*)?$' <<<"$out" | tail -n 1 | cut -d';' -f1)
[ -n "$job_id" ] || fail "no job id in: $out"
comment=$(scontrol show job "$job_id" | sed -n 's/^ *AdminComment=//p')
echo "   AdminComment=$comment"
[[ $comment =~ ^scaleguard:\ (accept|warn).*single\ gpus=1\ nodes=1 ]] || fail "AdminComment: $comment"
scancel "$job_id"

step "purge"
"$src/scripts/dev-cluster/down" >/dev/null
purge
for f in "${want[@]}"; do
  [ ! -e "$f" ] || fail "$f left after dpkg --purge"
done
step "ok"
