# Shared by the ParallelCluster-shaped tests (load pc): a fake head node's /opt/slurm laid out
# as ParallelCluster 3 lays it out, and install.sh run against it the way the cluster config's
# CustomActions run it. prepare.sh has built the Slurm release and $PC_WORK/build.
#
#   $PC_ROOT/opt/slurm/{bin,sbin,include} -> the Slurm release's; lib/slurm: its plugins
#     (symlinks; install.sh adds ours beside them)
#   $PC_ROOT/opt/slurm/etc/ (ParallelCluster's files, from its cookbook's templates):
#     slurm.conf                      "include slurm_parallelcluster.conf" and
#                                     "include pcluster/custom_slurm_settings_include_file_slurm.conf"
#     slurm_parallelcluster.conf      SlurmctldHost, one include per queue
#     pcluster/slurm_parallelcluster_<queue>_partition.conf   NodeName/NodeSet/PartitionName
#     pcluster/custom_slurm_settings_include_file_slurm.conf  Scheduling/SlurmSettings/
#                                     CustomSlurmSettings of configs/parallelcluster/cluster.yaml,
#                                     rendered as ParallelCluster renders them (Key=Value lines)
#     plugstack.conf                  "include .../plugstack.conf.d/*" (ParallelCluster's example)
#     gres.conf, cgroup.conf
#   $PC_ROOT/shared/scaleguard        install.sh --prefix (the shared EBS volume)
# Two queues with one static node each, as ParallelCluster names them: gpu-od-st-p4d-1 and
# gpu-spot-st-p4d-1 (two slurmd on this host, scripts/dev-cluster). What differs from a real
# head node for the test's sake: local paths instead of /opt/slurm and /var/spool, a
# PluginDir naming the fake /opt/slurm/lib/slurm, own munged and ports, proctrack/linuxproc
# and no task plugin (no cgroups here), no power saving (no EC2).

bats_load_library_path=/usr/lib/bats
load "$bats_load_library_path/bats-support/load"
load "$bats_load_library_path/bats-assert/load"

: "${SCALEGUARD_SOURCE_DIR:=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}"
: "${SCALEGUARD_PC_WORK:?set by ctest: the binary folder of tests/parallelcluster}"
export SCALEGUARD_SOURCE_DIR SCALEGUARD_PC_WORK
PC_WORK=$SCALEGUARD_PC_WORK
PC_ROOT=$PC_WORK/root
PC_ETC=$PC_ROOT/opt/slurm/etc
PC_PREFIX=$PC_ROOT/shared/scaleguard
PC_PLUGINS=$PC_ROOT/opt/slurm/lib/slurm
PC_BUILD=$PC_WORK/build
PC_DEV=$PC_WORK/dev
# SCALEGUARD_PC_INSTALL: another install.sh to test (e.g. an older commit's, from `git archive`).
PC_INSTALL=${SCALEGUARD_PC_INSTALL:-$SCALEGUARD_SOURCE_DIR/scripts/parallelcluster/install.sh}
PC_NODES="gpu-od-st-p4d-1 gpu-spot-st-p4d-1"
: "${BATS_TEST_TIMEOUT:=240}"
export BATS_TEST_TIMEOUT

pc_slurm_prefix() { cat "$PC_WORK/prefix"; }

# The cluster config's CustomSlurmSettings as ParallelCluster writes them (Key=Value per line).
pc_custom_settings() {
  python3 - "$SCALEGUARD_SOURCE_DIR/configs/parallelcluster/cluster.yaml" <<'PY'
import sys, yaml
conf = yaml.safe_load(open(sys.argv[1]))
for item in conf["Scheduling"]["SlurmSettings"].get("CustomSlurmSettings", []):
    print(" ".join(f"{k}={v}" for k, v in item.items()))
PY
}

# Lays out $PC_ROOT afresh. $1: the CustomSlurmSettings lines (default: cluster.yaml's).
pc_layout() {
  local prefix host port custom
  prefix=$(pc_slurm_prefix)
  host=$(hostname -s)
  # scripts/dev-cluster/up's port for this state directory.
  port=$((20000 + $(printf %s "$PC_DEV" | cksum | cut -d' ' -f1) % 1200 * 10))
  custom=${1-$(pc_custom_settings)}
  rm -rf "$PC_ROOT"
  mkdir -p "$PC_ROOT/opt/slurm/lib" "$PC_ETC/pcluster" "$PC_ETC/plugstack.conf.d" "$PC_ROOT/shared" "$PC_ROOT/etc/profile.d"
  for d in bin sbin include; do ln -s "$prefix/$d" "$PC_ROOT/opt/slurm/$d"; done
  cp -rs "$prefix/lib/slurm" "$PC_PLUGINS"
  cat > "$PC_ETC/slurm.conf" <<CONF
#
# Example slurm.conf file. Please run configurator.html
# (in doc/html) to build a configuration file customized
# for your environment.
# (tests/parallelcluster: ParallelCluster 3's slurm.conf, with this host's paths and ports)
#
# CLUSTER SETTINGS
ClusterName=parallelcluster
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$PC_DEV/munge/munge.socket.2
StateSaveLocation=$PC_DEV/state
SlurmdSpoolDir=${SCALEGUARD_SPOOL_ROOT:-/run/scaleguard-spool}/$(printf %s "$PC_DEV" | cksum | cut -d" " -f1)/%n
SlurmctldPidFile=$PC_DEV/run/slurmctld.pid
SlurmdPidFile=$PC_DEV/run/slurmd-%n.pid
TmpFS=$PC_DEV/tmp/%n
ReconfigFlags=KeepPartState
# test: the fake /opt/slurm's plugin folder (ParallelCluster: Slurm's built-in /opt/slurm/lib/slurm)
PluginDir=$PC_PLUGINS
#
# TIMERS
SlurmctldTimeout=300
SlurmdTimeout=180
InactiveLimit=0
MinJobAge=300
KillWait=5
Waittime=0
MessageTimeout=60
#
# SCHEDULING, JOB, AND NODE SETTINGS
EnforcePartLimits=ALL
SchedulerType=sched/backfill
# test: ParallelCluster has proctrack/cgroup and TaskPlugin=task/affinity,task/cgroup
ProctrackType=proctrack/linuxproc
MpiDefault=none
ReturnToService=2
# test: one host declares two 8-CPU nodes; no scheduler delay
SlurmdParameters=config_overrides
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
#
# TRES AND GPU CONFIG OPTIONS
GresTypes=gpu
SelectType=select/cons_tres
#
# LOGGING
SlurmctldDebug=info
SlurmctldLogFile=$PC_DEV/log/slurmctld.log
SlurmdDebug=info
SlurmdLogFile=$PC_DEV/log/slurmd-%n.log
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
#
# WARNING!!! The slurm_parallelcluster.conf file included
# get updated by pcluster process, be careful
# when manually editing!
include slurm_parallelcluster.conf
# WARNING!!! The custom_slurm_settings_include_file_slurm.conf file included below can be updated by the pcluster process.
# Please do not edit it.
include pcluster/custom_slurm_settings_include_file_slurm.conf
CONF
  cat > "$PC_ETC/slurm_parallelcluster.conf" <<CONF
# slurm_parallelcluster.conf is managed by the pcluster processes.
# Do not modify.
# Please use CustomSlurmSettings in the ParallelCluster configuration file to add user-specific slurm configuration
# options

SlurmctldHost=$host(127.0.0.1)
SelectTypeParameters=CR_CPU

include $PC_ETC/pcluster/slurm_parallelcluster_gpu-od_partition.conf
include $PC_ETC/pcluster/slurm_parallelcluster_gpu-spot_partition.conf
CONF
  local q i=0
  for q in gpu-od gpu-spot; do
    i=$((i + 1))
    cat > "$PC_ETC/pcluster/slurm_parallelcluster_${q}_partition.conf" <<CONF
# This file is automatically generated by pcluster

NodeName=$q-st-p4d-1 NodeHostname=$host NodeAddr=127.0.0.1 Port=$((port + i)) CPUs=8 Gres=gpu:a100:8 State=UNKNOWN Features=static,p4d.24xlarge,p4d,efa
NodeSet=${q}_nodes Nodes=$q-st-p4d-1
PartitionName=$q Nodes=${q}_nodes MaxTime=INFINITE State=UP$([ $q = gpu-od ] && echo ' Default=YES')
CONF
  done
  { echo "# This file is automatically generated by pcluster"; echo; printf '%s\n' "$custom"; } \
    > "$PC_ETC/pcluster/custom_slurm_settings_include_file_slurm.conf"
  # Fake GPUs: symlinks to /dev/null that scripts/dev-cluster/up makes.
  echo "NodeName=gpu-od-st-p4d-1,gpu-spot-st-p4d-1 Name=gpu Type=a100 File=$PC_DEV/gpus/gpu[0-7]" > "$PC_ETC/gres.conf"
  cp "$SCALEGUARD_SOURCE_DIR/configs/slurm/cgroup.conf" "$PC_ETC/cgroup.conf"
  echo "include $PC_ETC/plugstack.conf.d/*" > "$PC_ETC/plugstack.conf"
  chmod -R a+rX "$PC_WORK"
}

# The files ParallelCluster owns, with their checksums (install.sh must leave them alone).
pc_managed_sums() {
  (cd "$PC_ETC" && sha256sum slurm.conf slurm_parallelcluster.conf pcluster/*.conf)
}

# install.sh as the cluster config's CustomActions run it, on this test's layout.
pc_install() {  # ROLE [more install.sh options]
  local role=$1; shift
  "$PC_INSTALL" --role "$role" --no-build --build-dir "$PC_BUILD" --prefix "$PC_PREFIX" \
    --slurm-conf-dir "$PC_ETC" --plugin-dir "$PC_PLUGINS" --profile "$PC_ROOT/etc/profile.d/scaleguard.sh" \
    --no-restart "$@"
}

# The environment of scripts/dev-cluster for this layout.
pc_cluster_env() {
  export SCALEGUARD_DEV_DIR=$PC_DEV SCALEGUARD_SLURM_CONF_DIR=$PC_ETC SCALEGUARD_DEV_NODES=$PC_NODES
  export SCALEGUARD_SLURM_PREFIX=$(pc_slurm_prefix) SCALEGUARD_ACCOUNTING=0 SCALEGUARD_JOB_SUBMIT=none
  export SCALEGUARD_BUILD_DIR=$PC_BUILD
}
