#!/usr/bin/env bats
# Issue 25, class 8: the probe store flooded by a user. The store is world-writable (1777, like
# /tmp); the test user fills it with 65,600 names, some named like records of the model. root's
# record (written by hand here, as `scaleguard probe` would: no runner needed) still applies:
# the 2-node job is rewritten citing the measurement. Before: more than 65,536 names dropped every
# record, admin ones included, and each rescan read every file named like the model's records.
# Its own policy (probe.bats' toy model and thresholds) on the dev cluster; restored afterwards.

load helpers

MODEL='layers=2,hidden=128,heads=4,seq=64,vocab=256,precision=fp32'

setup_file() {
  cluster_env
  resume_nodes
  export PS_TMP=$(user_dir)
  chmod 755 "$PS_TMP"
  export STORE=$PS_TMP/probes
  mkdir -p "$STORE"
  chmod 1777 "$STORE"
  cat > "$PS_TMP/policy.ini" <<EOF
catalog = $SCALEGUARD_SOURCE_DIR/configs/catalog.ini
checkpoint_roots = /tmp
trusted_users = root
probe_store = $STORE
probe_max_age = 1d
[rules]
distributed_min_gpu_hours = off
single_gpu_max_hours = off
consider_distributed_hours = off
checkpoint_required_gpu_hours = off
time_limit_fits = off
max_comm_ratio = 4 rewrite
min_doubling_speedup = 0.3 rewrite
[partition gpu-od]
instance = p4d.24xlarge
default = yes
max_time = 1-00:00:00
[partition gpu-spot]
instance = p4d.24xlarge
capacity = spot
EOF
  export SETTINGS=$SCALEGUARD_DEV_DIR/etc/job_submit_scaleguard.conf
  cp "$SETTINGS" "$PS_TMP/settings.orig"
  sed -i "s|^policy=.*|policy=$PS_TMP/policy.ini|" "$SETTINGS"
  restart_slurmctld
}

teardown_file() {
  scancel --quiet --name=sg-ps 2>/dev/null || true
  cp "$PS_TMP/settings.orig" "$SETTINGS"
  restart_slurmctld
  rm -rf "$PS_TMP"
}

setup() {
  cluster_env
}

# The model's fingerprint, as planner/src/measurement.cpp computes it (FNV-1a 64).
fingerprint() {
  python3 -c '
h = 1469598103934665603
for c in b"gpt;L=2;h=128;a=4;s=64;v=256;p=fp32":
    h = ((h ^ c) * 1099511628211) % (1 << 64)
print("%016x" % h)'
}

# A record of very poor 2-node scaling, in the form `scaleguard probe` writes (probe/README.md):
# an admin's record of a GPU probe on the partition's p4d.24xlarge (A100-40GB), written by
# hand. This cluster has no GPU to measure; the test is about the flood, not the numbers, and
# the record says the hardware it claims (issue 37), which is the partition's.
record() {
  cat <<EOF
format=2
fingerprint=$1
instance=p4d.24xlarge
device=cuda
gpu=A100-40GB
ranks=2
nodes=2
micro_batch=8
step_s_1=0.1
step_s_n=2
speedup=0.05
comm_ratio=50
peak_bytes=1e+09
gpu_hours=0.01
time=$(date +%s)
date=$(date -u +%F)
scaleguard=test
job_id=1
user=root
EOF
}

@test "class 8: 65,600 junk names in the store; root's record still applies" {
  local fp name
  fp=$(fingerprint)
  name=$fp.p4d.24xlarge.r2n2.u0.rec
  # root's record: in root's own directory u0 (where `scaleguard probe` writes it), and a copy
  # where releases before issue 25 read it (the store itself), so the test fails there as it did.
  install -d -m 0755 "$STORE/u0"
  record "$fp" > "$STORE/u0/$name"
  record "$fp" > "$STORE/$name"
  # Without the flood the record applies (sanity: the test can tell).
  run as_user "$PS_TMP" sbatch --test-only -N2 --gpus-per-node=8 --time=60 --train-model="$MODEL" --train-tokens=1T --wrap true
  assert_output --partial 'measured'
  # The user floods the store: 65,600 names, some of them named like the model's records.
  as_user "$PS_TMP" python3 -c '
import os, sys
d, fp = sys.argv[1], sys.argv[2]
for i in range(65600):
    name = "%s.junk%d.u0.rec" % (fp, i) if i % 2 else "junk%d" % i
    os.close(os.open(os.path.join(d, name), os.O_CREAT | os.O_WRONLY, 0o644))
' "$STORE" "$fp"
  [ "$(ls -f "$STORE" | wc -l)" -gt 65536 ]
  # A change in root's directory makes slurmctld rescan now (before: the store itself changed).
  touch "$STORE/u0"
  run as_user "$PS_TMP" sbatch --test-only -N2 --gpus-per-node=8 --time=60 --train-model="$MODEL" --train-tokens=1T --wrap true
  echo "# $output" >&3
  assert_output --partial 'measured'
  run as_user "$PS_TMP" sbatch --parsable -J sg-ps -H -N2 --gpus-per-node=8 --time=60 --train-model="$MODEL" --train-tokens=1T --wrap true
  assert_success
  job_id=$(parsed_job_id)
  [[ $(job_field "$job_id" NumNodes) =~ ^1(-1)?$ ]]
  run job_comment "$job_id"
  assert_output --regexp 'rewrite \[[a-z_,]*(max_comm_ratio|min_doubling_speedup)'
  # The flood is not read: slurmctld logs no "more than ... entries" and no junk file.
  run grep -c "junk[0-9]\|entries: not used" "$SCALEGUARD_DEV_DIR/log/slurmctld.log"
  assert_output 0
  assert_slurmctld_alive
}
