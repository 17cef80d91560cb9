#!/bin/bash
# Installs scaleguard on an AWS ParallelCluster 3 node (or any Slurm node), as a CustomActions
# OnNodeConfigured/OnNodeUpdated script or by hand. Idempotent: a second run changes nothing.
#
# head:    (--install-deps: the build dependencies from apt or dnf), fetch the sources, build
#          (CMake; Open MPI from the EFA installer in /opt/amazon/openmpi and a LibTorch named by
#          --libtorch when there is one), `cmake --install` the programs, man pages and shipped
#          configs into PREFIX and the plugins into Slurm's PluginDir; put the policy and catalog
#          into SLURM_CONF_DIR/scaleguard/ (an installed policy is kept unless --policy names
#          one); write job_submit_scaleguard.conf and plugstack.conf.d/scaleguard.conf (and the
#          plugstack.conf include of that folder); restart slurmctld.
#          slurm.conf needs JobSubmitPlugins=scaleguard and PrologFlags=Alloc. When ParallelCluster
#          manages slurm.conf (it includes slurm_parallelcluster.conf) the script never edits it:
#          it checks the settings (from CustomSlurmSettings) and, when they are missing, says
#          what to put into CustomSlurmSettings and exits 1. Elsewhere it adds them to slurm.conf.
# compute: check that the head node's install is visible (shared PREFIX and PluginDir), write
#          /etc/profile.d/scaleguard.sh, restart slurmd if it runs. A missing scaleguard-run (the
#          head node built without MPI or LibTorch) is a warning naming the fix, not an error.
# Both write /etc/profile.d/scaleguard.sh (PATH; SCALEGUARD_POLICY and SCALEGUARD_CATALOG, the
# CLI's defaults otherwise point into the source tree it was built from).
# Run with --help for the options. Needs bash, coreutils, diff; the head role also cmake (3.18+;
# `cmake3` is used where `cmake` is older), a C++17 compiler and the build dependencies
# (--install-deps, or README.md in this folder).
set -euo pipefail

prog=install.sh
die() { echo "$prog: $*" >&2; exit 1; }
usage_error() { echo "$prog: $*" >&2; echo "run '$prog --help' for the options" >&2; exit 2; }
say() { echo "$prog: $*"; }

usage() {
  cat <<'EOF'
usage: install.sh [options]
  --role head|compute    what this node is (default: cfn_node_type from
                         /etc/parallelcluster/cfnconfig under --root)
  --source SRC           scaleguard sources: a directory, a .tar.gz, or an s3:// or https://
                         URL of a .tar.gz (default: the checkout holding this script)
  --build-dir DIR        CMake build directory (default: /var/cache/scaleguard/build);
                         made mode 0700 when missing, configured when it has no
                         CMakeCache.txt; sources from a .tar.gz are unpacked beside it, in
                         DIR-src. Root runs what is in it: an existing one (and DIR-src) must
                         be root's and writable by nobody else, as must every directory above
                         it (a sticky one such as /var/tmp may be world-writable), or the
                         script stops
  --no-build             install from --build-dir as it is (already built)
  --install-deps         head: install the build dependencies first, with apt-get (Ubuntu,
                         Debian) or dnf (Amazon Linux 2023, RHEL 9 and the like)
  --libtorch DIR         head: a LibTorch (the CUDA build from pytorch.org, unpacked) for
                         scaleguard-run: DIR goes on CMAKE_PREFIX_PATH (DIR/share/cmake/Torch;
                         not there: a WARNING, the plugins and the CLI are installed anyway)
  --mpi DIR              head: the Open MPI for scaleguard-run (default: /opt/amazon/openmpi,
                         the EFA installer's, when it exists)
  --cmake-arg ARG        extra CMake configure argument, repeatable
                         (e.g. -DCMAKE_PREFIX_PATH=/opt/libtorch)
  --prefix DIR           install prefix of programs, man pages, shipped configs
                         (default: /opt/scaleguard; shared with compute nodes)
  --slurm-conf-dir DIR   directory of slurm.conf (default: dirname of $SLURM_CONF, else
                         /opt/slurm/etc when it exists, else /etc/slurm)
  --slurm-conf MODE      head: auto (default): `check` when ParallelCluster manages slurm.conf
                         (it includes slurm_parallelcluster.conf), else `edit`;
                         check: never write slurm.conf, fail naming the CustomSlurmSettings
                         that are missing; edit: add the settings to slurm.conf
  --plugin-dir DIR       where the Slurm plugins are (head default: the build's
                         SCALEGUARD_SLURM_PLUGIN_DIR, which CMake detects; compute default:
                         PluginDir of slurm.conf, else /opt/slurm/lib/slurm)
  --policy FILE          install this policy (checked with `scaleguard policy check` first);
                         default: keep an installed one, else install the shipped one
  --catalog FILE         install this catalog (default: keep, else the shipped one)
  --profile FILE         the login profile to write (default /etc/profile.d/scaleguard.sh;
                         `none`: write none)
  --root DIR             install below DIR instead of / (tests, images); restarts nothing
  --no-restart           do not restart slurmctld / slurmd
  --dry-run              print what would be done and every file change; change nothing
  -h, --help             this help
EOF
}

# Paths end up in plugstack.conf and slurm.conf, which split on spaces: allow only safe ones.
check_path() {  # NAME VALUE
  [[ $2 == /* ]] || usage_error "$1 '$2': must be an absolute path"
  [[ $2 =~ ^[A-Za-z0-9._/+@-]+$ ]] || usage_error "$1 '$2': only letters, digits and . _ / + @ - are allowed"
  [[ /$2/ != */../* ]] || usage_error "$1 '$2': '..' is not allowed"
}

# Root runs what a build directory holds and writes paths from its cache into plugstack.conf,
# and slurmd loads the plugin plugstack.conf names as root: such a path must be root's (or
# this user's) and writable by nobody else, and so must every directory above it up to /,
# link and target alike, or another user could swap it. A world-writable directory above is
# allowed only when sticky (/tmp, /var/tmp): nobody else can rename or remove our entry.
# Prints why not and returns 1.
trusted_path() {  # PATH
  local real p uid mode type leaf
  real=$(realpath -e -- "$1" 2> /dev/null) || { echo "$1 does not exist"; return 1; }
  for p in "$1" "$real"; do
    leaf=1
    while :; do
      read -r uid mode type <<< "$(stat -c '%u %a %F' -- "$p")"   # the link itself, not its target
      [ "$uid" = 0 ] || [ "$uid" = "$EUID" ] || { echo "$p is owned by uid $uid"; return 1; }
      if [ "$type" != "symbolic link" ] && (( 8#$mode & 8#022 )) && { [ "$leaf" = 1 ] || ! (( 8#$mode & 8#1000 )); }; then
        echo "$p is writable by group or others (mode $mode)"; return 1
      fi
      [ "$p" = / ] && break
      p=$(dirname -- "$p"); leaf=0
    done
  done
}

# A directory root makes (mode 0700) or reuses only if trusted_path says it is root's.
private_dir() {  # DIR WHAT
  local why
  if [ -e "$1" ] || [ -L "$1" ]; then
    why=$(trusted_path "$1") ||
      die "$2 $1: not used, someone other than root made it or can change it ($why): remove it or name another"
    [ -d "$1" ] || die "$2 $1: not a directory"
    return 0
  fi
  [ "$dry_run" = 1 ] && { echo "+ mkdir -m 0700 $1"; return 0; }
  mkdir -p -- "$(dirname -- "$1")"
  # Not -p: if someone made it since the test above, this fails instead of adopting theirs.
  mkdir -m 0700 -- "$1" || die "$2 $1: cannot make it (someone else made it just now?)"
  why=$(trusted_path "$1") || die "$2 $1: $why"
}

role="" source="" build_dir=/var/cache/scaleguard/build build=1 prefix=/opt/scaleguard
conf_dir="" plugin_dir="" policy="" catalog="" root="" restart=1 dry_run=0
install_deps=0 libtorch="" mpi="" conf_mode=auto profile=/etc/profile.d/scaleguard.sh
cmake_args=()
while [ $# -gt 0 ]; do
  opt=$1
  case $opt in
    -h|--help) usage; exit 0 ;;
    --no-build) build=0; shift; continue ;;
    --no-restart) restart=0; shift; continue ;;
    --dry-run) dry_run=1; shift; continue ;;
    --install-deps) install_deps=1; shift; continue ;;
    --role|--source|--build-dir|--cmake-arg|--prefix|--slurm-conf-dir|--plugin-dir|--policy|--catalog|--root|--libtorch|--mpi|--slurm-conf|--profile)
      [ $# -ge 2 ] && [ -n "$2" ] || usage_error "$opt needs a value" ;;
    *) usage_error "unknown option '$opt'" ;;
  esac
  val=$2
  shift 2
  case $opt in
    --role) case $val in head|compute) role=$val ;; *) usage_error "--role '$val': expected head or compute" ;; esac ;;
    --source) source=$val ;;
    --build-dir) check_path --build-dir "$val"; build_dir=$val ;;
    --cmake-arg) cmake_args+=("$val") ;;
    --prefix) check_path --prefix "$val"; prefix=${val%/} ;;
    --slurm-conf-dir) check_path --slurm-conf-dir "$val"; conf_dir=${val%/} ;;
    --plugin-dir) check_path --plugin-dir "$val"; plugin_dir=${val%/} ;;
    --policy) [ -f "$val" ] && [ -r "$val" ] || usage_error "--policy '$val': no such readable file"; policy=$(realpath "$val") ;;
    --catalog) [ -f "$val" ] && [ -r "$val" ] || usage_error "--catalog '$val': no such readable file"; catalog=$(realpath "$val") ;;
    --root) check_path --root "$val"; [ -d "$val" ] || usage_error "--root '$val': not a directory"; root=${val%/} ;;
    --libtorch) check_path --libtorch "$val"; libtorch=${val%/} ;;
    --mpi) check_path --mpi "$val"; mpi=${val%/} ;;
    --slurm-conf) case $val in auto|check|edit) conf_mode=$val ;; *) usage_error "--slurm-conf '$val': expected auto, check or edit" ;; esac ;;
    --profile) [ "$val" = none ] || check_path --profile "$val"; profile=$val ;;
  esac
done
[ -n "$root" ] && restart=0

# The node's role, as ParallelCluster records it.
if [ -z "$role" ]; then
  cfn=$root/etc/parallelcluster/cfnconfig
  [ -r "$cfn" ] || usage_error "--role not given and $cfn not found"
  node_type=$(sed -n 's/^cfn_node_type=//p' "$cfn" | tr -d '"' | tail -n 1)
  case $node_type in
    HeadNode) role=head ;;
    ComputeFleet) role=compute ;;
    *) usage_error "$cfn: cfn_node_type='$node_type' (expected HeadNode or ComputeFleet); give --role" ;;
  esac
fi

if [ -z "$conf_dir" ]; then
  if [ -n "${SLURM_CONF:-}" ]; then conf_dir=$(dirname "$SLURM_CONF")
  elif [ -d "$root/opt/slurm/etc" ]; then conf_dir=/opt/slurm/etc
  else conf_dir=/etc/slurm
  fi
  check_path "slurm config dir" "$conf_dir"
fi
slurm_conf=$root$conf_dir/slurm.conf
[ "$role" = compute ] || [ -f "$slurm_conf" ] || die "$slurm_conf not found (give --slurm-conf-dir)"

run() {  # print a command; run it unless --dry-run
  echo "+ $*"
  [ "$dry_run" = 1 ] || "$@"
}

changed=0
# Write CONTENT (stdin) to FILE when it differs; show the difference. Keeps an existing mode.
put() {  # FILE MODE [quiet: do not show a new file's content]
  local file=$1 mode=$2 new
  new=$(mktemp)
  cat > "$new"
  if [ -f "$file" ] && cmp -s "$new" "$file"; then
    rm -f "$new"
    return 0
  fi
  changed=1
  if [ -f "$file" ]; then
    say "update $file"
    diff -u "$file" "$new" | sed '1,2d' || true
  else
    say "create $file"
    [ -n "${3:-}" ] || sed 's/^/+/' "$new"
  fi
  if [ "$dry_run" = 1 ]; then rm -f "$new"; return 0; fi
  mkdir -p "$(dirname "$file")"
  [ -f "$file" ] && chmod --reference="$file" "$new" || chmod "$mode" "$new"
  mv -f "$new" "$file"
}

put_from() {  # FILE SOURCE_FILE (a dry run from a URL has no sources to compare)
  if [ ! -f "$2" ] && [ "$dry_run" = 1 ]; then say "install $1 from $2"; changed=1; return 0; fi
  put "$1" 0644 quiet < "$2"
}

# Make `KEY=...` in a Slurm config contain ITEM in its comma list, or add `KEY=ITEM`.
# Keys are case-insensitive in Slurm; the first uncommented line with the key is edited.
ensure_list_item() {  # FILE KEY ITEM SEPARATOR
  local file=$1 key=$2 item=$3 sep=$4
  awk -v key="$key" -v item="$item" -v sep="$sep" '
    BEGIN { lkey = tolower(key) }
    !done && $0 !~ /^[[:space:]]*#/ && index($0, "=") {
      split($0, kv, "=")
      k = kv[1]; gsub(/[[:space:]]/, "", k)
      if (tolower(k) == lkey) {
        v = substr($0, index($0, "=") + 1); sub(/[[:space:]]*(#.*)?$/, "", v); gsub(/^[[:space:]]+/, "", v)
        n = split(v, items, sep); found = 0
        for (i = 1; i <= n; i++) if (items[i] == item) found = 1
        print (found ? $0 : key "=" (v == "" ? item : v sep item))
        done = 1; next
      }
    }
    { print }
    END { if (!done) print key "=" item }' "$file"
}

# ---------------------------------------------------------------- sources and build (head)
self_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=""
trap 'rm -rf "$work"' EXIT
fetch_source() {
  case $source in
    "")
      source=$(cd "$self_dir/../.." && pwd)
      [ -f "$source/CMakeLists.txt" ] && [ -d "$source/planner" ] ||
        die "this script is not inside a scaleguard checkout: give --source" ;;
    s3://*|https://*)
      [[ $source == *.tar.gz ]] || usage_error "--source '$source': a URL must name a .tar.gz"
      work=$(mktemp -d)
      if [[ $source == s3://* ]]; then
        [ "$dry_run" = 1 ] || command -v aws > /dev/null || die "--source $source: the aws CLI is not installed"
        run aws s3 cp --only-show-errors "$source" "$work/src.tar.gz"
      else
        run curl -fsSL -o "$work/src.tar.gz" "$source"
      fi
      source=$work/src.tar.gz ;;
  esac
  if [ -f "$source" ] || [[ $source == *.tar.gz ]]; then
    [ "$dry_run" = 1 ] && [ ! -f "$source" ] && { src=$work/src; echo "+ tar -xzf $source"; return; }
    [[ $source == *.tar.gz ]] || usage_error "--source '$source': expected a directory or a .tar.gz"
    tar -tzf "$source" > /dev/null 2>&1 || die "--source '$source': not a readable .tar.gz"
    # A build keeps its sources where the next run finds them again (CMake remembers the
    # source directory); a dry run or --no-build only reads configs from a temporary copy.
    local tree
    if [ "$build" = 1 ] && [ "$dry_run" = 0 ]; then
      tree=$build_dir-src
      # Made afresh, never one that is there (private_dir refuses one made by someone else).
      if [ -e "$tree" ] || [ -L "$tree" ]; then private_dir "$tree" "the sources' folder"; rm -rf -- "$tree"; fi
      private_dir "$tree" "the sources' folder"
    else
      work=${work:-$(mktemp -d)}
      tree=$work/src
      mkdir "$tree"
    fi
    # Owners and modes from the archive are not kept: the tree is root's, not writable by others.
    tar -xzf "$source" -C "$tree" --no-same-owner --no-same-permissions
    # A tarball holds the tree either at its top or in one folder.
    src=$tree
    [ -f "$src/CMakeLists.txt" ] || src=$(dirname "$(find "$tree" -maxdepth 2 -name CMakeLists.txt -print -quit)")
  elif [ -d "$source" ]; then
    src=$(cd "$source" && pwd)
  else
    usage_error "--source '$source': no such directory or file"
  fi
  [ "$src" != . ] && [ -f "$src/CMakeLists.txt" ] && [ -f "$src/configs/policy.ini" ] ||
    die "--source: $source holds no scaleguard source tree (CMakeLists.txt, configs/policy.ini)"
}

# ---------------------------------------------------------------- build dependencies (head)
# The OS's own packages. LibTorch is not among them (Ubuntu and Amazon Linux have no CUDA
# LibTorch package): the admin unpacks the one matching the nodes' CUDA and names it with
# --libtorch. Open MPI comes from the EFA installer on ParallelCluster's images.
do_install_deps() {
  if command -v apt-get > /dev/null; then
    run env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    run env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      build-essential cmake ninja-build pkg-config git libboost-program-options-dev \
      nlohmann-json3-dev libxxhash-dev libhdf5-dev
  elif command -v dnf > /dev/null; then
    run dnf install -y -q gcc-c++ make cmake ninja-build pkgconf-pkg-config git boost-devel \
      json-devel xxhash-devel hdf5-devel
  elif command -v yum > /dev/null; then  # older RHEL-likes: CMake 3 is `cmake3` there
    run yum install -y -q gcc-c++ make cmake3 ninja-build git boost-devel json-devel xxhash-devel hdf5-devel
  else
    die "--install-deps: neither apt-get nor dnf nor yum found; install the build dependencies by hand (README.md)"
  fi
}

# `cmake` when it is 3.18 or newer, else `cmake3` (the name on RHEL-likes with an old cmake).
cmake_bin=cmake
pick_cmake() {
  local c v
  for c in cmake cmake3; do
    command -v "$c" > /dev/null || continue
    v=$("$c" --version | sed -n '1s/^cmake[0-9]* version \([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
    set -- $v
    if [ -n "$v" ] && { [ "$1" -gt 3 ] || { [ "$1" = 3 ] && [ "$2" -ge 18 ]; }; }; then
      cmake_bin=$c; return 0
    fi
  done
  [ "$dry_run" = 1 ] && return 0
  die "no cmake 3.18 or newer found (cmake, cmake3): use --install-deps, or pip install cmake"
}

# -DCMAKE_PREFIX_PATH / -DMPI_HOME from --libtorch and --mpi (or the EFA installer's Open MPI).
runner_args=()
find_runner_deps() {
  local prefix_path=()
  if [ -n "$libtorch" ]; then
    if [ -f "$root$libtorch/share/cmake/Torch/TorchConfig.cmake" ]; then
      prefix_path+=("$libtorch")
    else
      # Not fatal: the plugins and the CLI do not need it (a failed head node action would
      # fail the whole cluster). The runner is then not built; the WARNING below says so.
      say "WARNING: --libtorch $libtorch: no $libtorch/share/cmake/Torch/TorchConfig.cmake there (unpack pytorch.org's CUDA libtorch zip into $libtorch): scaleguard-run cannot be built"
    fi
  fi
  if [ -z "$mpi" ] && [ -x "$root/opt/amazon/openmpi/bin/mpicc" ]; then
    mpi=/opt/amazon/openmpi
    say "Open MPI: $mpi (the EFA installer's)"
  fi
  if [ -n "$mpi" ]; then
    [ -x "$root$mpi/bin/mpicc" ] || [ "$dry_run" = 1 ] || die "--mpi $mpi: no bin/mpicc there"
    prefix_path+=("$mpi")
    runner_args+=(-DMPI_HOME="$mpi")
  fi
  if [ ${#prefix_path[@]} -gt 0 ]; then
    local IFS=';'
    runner_args+=(-DCMAKE_PREFIX_PATH="${prefix_path[*]}")
  fi
}

cache_value() {  # VAR: its value in the build's CMakeCache.txt
  sed -n "s/^$1:[A-Z]*=//p" "$build_dir/CMakeCache.txt"
}

build_and_install() {
  local gen=() targets
  [ "$build" = 1 ] || [ -e "$build_dir" ] || die "--no-build: $build_dir is not a configured build directory (it does not exist)"
  private_dir "$build_dir" --build-dir
  pick_cmake
  if [ "$build" = 1 ]; then find_runner_deps; fi
  if [ ! -f "$build_dir/CMakeCache.txt" ]; then
    [ "$build" = 1 ] || die "--no-build: $build_dir is not a configured build directory"
    command -v ninja > /dev/null && gen=(-G Ninja)
    # Slurm's headers beside its config (ParallelCluster: /opt/slurm/{etc,include}), which
    # CMake would not search; the plugins must be built against the Slurm that loads them.
    local slurm_inc
    slurm_inc=$(dirname "$conf_dir")/include
    [ -f "$slurm_inc/slurm/spank.h" ] && gen+=(-DSLURM_INCLUDE_DIR="$slurm_inc")
    run "$cmake_bin" -S "$src" -B "$build_dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DSCALEGUARD_TESTS=OFF -DSCALEGUARD_BENCH=OFF \
      ${plugin_dir:+-DSCALEGUARD_SLURM_PLUGIN_DIR=$plugin_dir} "${runner_args[@]}" "${cmake_args[@]}"
  elif [ -n "$plugin_dir" ] && [ "$(cache_value SCALEGUARD_SLURM_PLUGIN_DIR)" != "$plugin_dir" ]; then
    [ "$build" = 1 ] || die "--no-build: $build_dir installs plugins into $(cache_value SCALEGUARD_SLURM_PLUGIN_DIR), not --plugin-dir $plugin_dir"
    run "$cmake_bin" -S "$src" -B "$build_dir" -DSCALEGUARD_SLURM_PLUGIN_DIR="$plugin_dir" "${runner_args[@]}" "${cmake_args[@]}"
  elif [ "$build" = 1 ] && [ $((${#runner_args[@]} + ${#cmake_args[@]})) -gt 0 ]; then
    # A re-run with --libtorch (the fix for a head node built without it) configures again.
    run "$cmake_bin" -S "$src" -B "$build_dir" "${runner_args[@]}" "${cmake_args[@]}"
  fi
  if [ "$build" = 1 ]; then
    targets=(scaleguard scaleguard_spank job_submit_scaleguard)
    if [ "$dry_run" = 1 ] || "$cmake_bin" --build "$build_dir" --target help 2>/dev/null | grep -Eq '(^|\.\.\. )scaleguard-run(:|$)'; then
      targets+=(scaleguard-run)
    else
      say "scaleguard-run cannot be built here (MPI or LibTorch not found; the CMake output above says which)"
    fi
    run "$cmake_bin" --build "$build_dir" --parallel "$(nproc)" --target "${targets[@]}"
  fi
  if [ "$dry_run" = 1 ] && [ ! -f "$build_dir/CMakeCache.txt" ]; then
    plugin_dir=${plugin_dir:-"(the plugin dir CMake detects)"}
  else
    plugin_dir=$(cache_value SCALEGUARD_SLURM_PLUGIN_DIR)
    [ -n "$plugin_dir" ] || die "$build_dir has no SCALEGUARD_SLURM_PLUGIN_DIR: configure it again (cmake -S SRC -B $build_dir)"
    [[ $plugin_dir == /* ]] || plugin_dir=$prefix/$plugin_dir
    check_path "SCALEGUARD_SLURM_PLUGIN_DIR of $build_dir/CMakeCache.txt" "$plugin_dir"
  fi
  scaleguard_bin=$build_dir/cli/scaleguard
  for f in cli/scaleguard spank-plugin/spank/scaleguard.so spank-plugin/job_submit/job_submit_scaleguard.so; do
    [ "$dry_run" = 1 ] || [ -f "$build_dir/$f" ] ||
      die "$build_dir/$f was not built (Slurm headers missing? see the CMake output)"
  done
  check_configs
  echo "+ DESTDIR=$root $cmake_bin --install $build_dir --prefix $prefix"
  [ "$dry_run" = 1 ] || DESTDIR=$root "$cmake_bin" --install "$build_dir" --prefix "$prefix" > /dev/null
  if [ "$dry_run" = 0 ] && [ ! -x "$root$prefix/bin/scaleguard-run" ]; then
    say "WARNING: $prefix/bin/scaleguard-run is not installed ($build_dir has no scaleguard-run): jobs cannot run it. Fix: run the head role again with --libtorch DIR (a CUDA LibTorch) and Open MPI (/opt/amazon/openmpi or --mpi DIR)"
  fi
}

# --------------------------------------------------------------- policy, catalog (head)
sg_dir=$conf_dir/scaleguard
# The policy and catalog as they will be installed (new, else installed, else shipped),
# checked side by side as in SLURM_CONF_DIR/scaleguard/, so a relative `catalog =` resolves
# as it will there.
check_configs() {
  local p=${policy:-$root$sg_dir/policy.ini} c=${catalog:-$root$sg_dir/catalog.ini} stage
  [ -f "$p" ] || p=$src/configs/policy.ini
  [ -f "$c" ] || c=$src/configs/catalog.ini
  if [ ! -x "$scaleguard_bin" ] || [ ! -f "$p" ] || [ ! -f "$c" ]; then   # a dry run before the build
    echo "+ scaleguard policy check $p (with $c beside it)"
    return 0
  fi
  stage=$(mktemp -d)
  cp "$p" "$stage/policy.ini"
  cp "$c" "$stage/catalog.ini"
  if ! "$scaleguard_bin" policy check "$stage/policy.ini" > /dev/null 2> "$stage/err"; then
    sed "s|$stage/policy.ini|$p|g; s|$stage/catalog.ini|$c|g" "$stage/err" >&2
    rm -rf "$stage"
    die "policy $p with catalog $c is not valid (the error is above); nothing was installed"
  fi
  rm -rf "$stage"
}

# The plugins Slurm's daemons load as root, as installed: root's, not writable by others
# (a dry run before the build, or a compute node without the job_submit plugin, has fewer).
check_plugins() {
  local p why
  for p in "$plugin_dir" "$plugin_dir/scaleguard.so" "$plugin_dir/job_submit_scaleguard.so" "$plugin_dir/prep_scaleguard.so"; do
    [ -e "$root$p" ] || [ -L "$root$p" ] || continue
    why=$(trusted_path "$root$p") ||
      die "$p: slurmd and slurmctld would load plugins from it as root, but $why; plugstack.conf and slurm.conf not written"
  done
}

install_configs() {
  check_plugins
  if [ -n "$policy" ] || [ ! -f "$root$sg_dir/policy.ini" ]; then
    put_from "$root$sg_dir/policy.ini" "${policy:-$src/configs/policy.ini}"
  else
    say "keeping the installed $sg_dir/policy.ini (--policy replaces it)"
  fi
  if [ -n "$catalog" ] || [ ! -f "$root$sg_dir/catalog.ini" ]; then
    put_from "$root$sg_dir/catalog.ini" "${catalog:-$src/configs/catalog.ini}"
  fi
  # The policy's `catalog = catalog.ini` is relative to it, so the pair needs no catalog= line.
  put "$root$conf_dir/job_submit_scaleguard.conf" 0644 <<EOF
# Written by scaleguard's install.sh: job_submit/scaleguard settings (spank-plugin/job_submit).
policy=$sg_dir/policy.ini
EOF
  put "$root$conf_dir/plugstack.conf.d/scaleguard.conf" 0644 <<EOF
# Written by scaleguard's install.sh: the scaleguard SPANK plugin (spank-plugin/spank/README.md).
required $plugin_dir/scaleguard.so policy=$sg_dir/policy.ini profiles=$prefix/share/scaleguard/nccl
EOF
  # plugstack.conf: include the drop-in directory unless an include already covers it.
  local stack=$root$conf_dir/plugstack.conf include="include $conf_dir/plugstack.conf.d/*"
  if [ -f "$stack" ] && grep -Eq "^[[:space:]]*include[[:space:]]+$conf_dir/plugstack\.conf\.d/(\*|\*\.conf|scaleguard\.conf)[[:space:]]*$" "$stack"; then
    :
  else
    { [ -f "$stack" ] && cat "$stack"; echo "$include"; } | put "$stack" 0644
  fi
  # slurm.conf: our job_submit plugin, the job prolog at allocation (the SPANK plugin's plan
  # for srun/salloc jobs needs it), and the plugin dir when slurm.conf names PluginDir.
  if [ "$conf_mode" = check ]; then
    check_slurm_conf
    return
  fi
  local conf
  conf=$(ensure_list_item "$slurm_conf" JobSubmitPlugins scaleguard ,)
  conf=$(ensure_list_item <(printf '%s\n' "$conf") PrologFlags Alloc ,)
  # prep/scaleguard: every new run of a job (requeues) checked against its budgets. Slurm's
  # default PrEpPlugins is `script` (Prolog/Epilog/PrologSlurmctld): kept in the list.
  local prep_item=script,scaleguard
  [ -n "$(conf_value PrEpPlugins < <(printf '%s\n' "$conf"))" ] && prep_item=scaleguard
  conf=$(ensure_list_item <(printf '%s\n' "$conf") PrEpPlugins "$prep_item" ,)
  if grep -Eiq '^[[:space:]]*PluginDir[[:space:]]*=' "$slurm_conf"; then
    conf=$(ensure_list_item <(printf '%s\n' "$conf") PluginDir "$plugin_dir" :)
  fi
  printf '%s\n' "$conf" | put "$slurm_conf" 0644
}

# slurm.conf and the files it includes, in Slurm's order (an include's relative path is
# relative to slurm.conf's directory; globs are expanded), comments and blank lines dropped.
# Paths are as on the node: $root is put in front to read them.
conf_lines() {  # FILE DEPTH
  local file=$1 depth=$2 line inc f
  [ "$depth" -lt 10 ] || return 0
  while IFS= read -r line || [ -n "$line" ]; do
    line=${line%%#*}
    [[ $line =~ ^[[:space:]]*$ ]] && continue
    if [[ $line =~ ^[[:space:]]*[Ii][Nn][Cc][Ll][Uu][Dd][Ee][[:space:]]+([^[:space:]]+) ]]; then
      inc=${BASH_REMATCH[1]}
      [[ $inc == /* ]] || inc=$conf_dir/$inc
      for f in $root$inc; do
        [ -f "$f" ] && conf_lines "$f" $((depth + 1))
      done
      continue
    fi
    printf '%s\n' "$line"
  done < "$file"
  return 0
}

# The value Slurm uses for KEY (the last one set; keys are case-insensitive), on stdin's lines.
conf_value() {  # KEY
  awk -v key="$1" 'BEGIN { lkey = tolower(key) }
    index($0, "=") { k = substr($0, 1, index($0, "=") - 1); gsub(/[[:space:]]/, "", k)
      if (tolower(k) == lkey) { v = substr($0, index($0, "=") + 1); gsub(/^[[:space:]]+|[[:space:]]+$/, "", v); val = v } }
    END { print val }'
}

has_item() {  # LIST SEPARATOR ITEM: ITEM is in LIST (case-insensitive)
  local IFS=$2 i
  for i in $1; do [ "${i,,}" = "${3,,}" ] && return 0; done
  return 1
}

# ParallelCluster writes slurm.conf and regenerates it: the settings come from the cluster
# config's Scheduling/SlurmSettings/CustomSlurmSettings (pcluster/custom_slurm_settings_include_file_slurm.conf).
# Check them; when one is missing say what to add, and fail.
check_slurm_conf() {
  local lines jsp pf pd pp missing=() want_jsp want_pf
  lines=$(conf_lines "$slurm_conf" 0)
  jsp=$(conf_value JobSubmitPlugins <<< "$lines")
  pp=$(conf_value PrEpPlugins <<< "$lines")
  pf=$(conf_value PrologFlags <<< "$lines")
  pd=$(conf_value PluginDir <<< "$lines")
  if has_item "$jsp" , scaleguard || has_item "$jsp" , job_submit/scaleguard; then :; else
    want_jsp=${jsp:+$jsp,}scaleguard
    missing+=("JobSubmitPlugins: $want_jsp")
  fi
  if ! has_item "$pf" , alloc; then
    want_pf=${pf:+$pf,}Alloc
    missing+=("PrologFlags: $want_pf")
  fi
  if ! has_item "$pp" , scaleguard && ! has_item "$pp" , prep/scaleguard; then
    missing+=("PrEpPlugins: ${pp:-script},scaleguard")
  fi
  if [ -n "$pd" ] && ! has_item "$pd" : "$plugin_dir"; then
    missing+=("PluginDir: $pd:$plugin_dir")
  fi
  if [ ${#missing[@]} -eq 0 ]; then
    say "$conf_dir/slurm.conf (not edited: ${pc_managed:+ParallelCluster manages it, }--slurm-conf check) has JobSubmitPlugins=$jsp PrologFlags=$pf"
    return 0
  fi
  slurm_conf_missing=1
  {
    echo "$prog: ERROR: $conf_dir/slurm.conf lacks settings scaleguard needs; it is not edited (${pc_managed:+ParallelCluster manages it and rewrites it, }--slurm-conf check)."
    echo "$prog: add them to the cluster config, then run \`pcluster update-cluster\` (or put them in the file CustomSlurmSettingsIncludeFile names):"
    echo "  Scheduling:"
    echo "    SlurmSettings:"
    echo "      CustomSlurmSettings:"
    local m
    for m in "${missing[@]}"; do echo "        - $m"; done
    echo "$prog: everything else is installed; run this again once slurm.conf has them."
  } >&2
}

# ---------------------------------------------------------------- both roles
write_profile() {
  [ "$profile" != none ] || return 0
  put "$root$profile" 0644 <<EOF
# Written by scaleguard's install.sh: the CLI, its man pages and the cluster's policy.
case ":\$PATH:" in *":$prefix/bin:"*) ;; *) PATH=$prefix/bin:\$PATH ;; esac
export PATH
export SCALEGUARD_POLICY=\${SCALEGUARD_POLICY:-$sg_dir/policy.ini}
export SCALEGUARD_CATALOG=\${SCALEGUARD_CATALOG:-$sg_dir/catalog.ini}
EOF
}

check_shared() {  # compute: the head node's install must be visible here
  local f
  for f in "$prefix/bin/scaleguard" "$plugin_dir/scaleguard.so" "$sg_dir/policy.ini"; do
    [ -f "$root$f" ] || die "$root$f not found: run the head node install first, with --prefix and --plugin-dir on storage the compute nodes share"
  done
  check_plugins
  # The runner is optional: plugins and CLI work without it; jobs that run it cannot.
  [ -x "$root$prefix/bin/scaleguard-run" ] ||
    say "WARNING: $root$prefix/bin/scaleguard-run not found: the head node built scaleguard without MPI or LibTorch, so jobs cannot run scaleguard-run (the plugins and the CLI work). Fix: run the head role again with --libtorch DIR (a CUDA LibTorch; Open MPI from /opt/amazon/openmpi or --mpi DIR), then this again"
}

restart_daemon() {  # UNIT MODE
  if [ "$restart" = 0 ]; then
    say "not restarting $1 (${root:+--root }${root:---no-restart})"
  elif [ "$2" = try ]; then
    run systemctl try-restart "$1"
  else
    run systemctl restart "$1"
  fi
}

# Does ParallelCluster manage slurm.conf? Its slurm.conf includes slurm_parallelcluster.conf.
pc_managed=""
if [ -f "$slurm_conf" ] && grep -Eiq '^[[:space:]]*include[[:space:]]+([^[:space:]]*/)?slurm_parallelcluster\.conf[[:space:]]*$' "$slurm_conf"; then
  pc_managed=1
fi
if [ "$conf_mode" = auto ]; then conf_mode=${pc_managed:+check}; conf_mode=${conf_mode:-edit}; fi
slurm_conf_missing=0

if [ "$role" = head ]; then
  if [ "$install_deps" = 1 ]; then do_install_deps; fi
  fetch_source
  build_and_install
  install_configs
  write_profile
  restart_daemon slurmctld always
else
  if [ -z "$plugin_dir" ]; then
    plugin_dir=$(sed -n 's/^[[:space:]]*[Pp][Ll][Uu][Gg][Ii][Nn][Dd][Ii][Rr][[:space:]]*=[[:space:]]*//p' "$slurm_conf" 2>/dev/null | cut -d: -f1 | tail -n 1)
    [ -n "$plugin_dir" ] || plugin_dir=/opt/slurm/lib/slurm
  fi
  check_shared
  write_profile
  restart_daemon slurmd try
fi
if [ "$changed" = 0 ]; then say "nothing to change: already installed"; fi
if [ "$slurm_conf_missing" = 1 ]; then
  say "incomplete: slurm.conf lacks settings (the ERROR above)" >&2
  exit 1
fi
if [ "$dry_run" = 1 ]; then say "dry run: nothing was changed"; else say "done ($role node)"; fi
