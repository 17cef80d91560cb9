#!/usr/bin/env bats
# Issue 16: `scaleguard probe` as a real Slurm job across the two namespaced nodes measures how a
# small GPT really scales from 1 to 2 ranks; the policy then acts on the measurement. On a
# throttled link (tc tbf, 10 Mbit/s, both ends of each node's veth) the 2-node job is rewritten
# citing the measured numbers; on the fast link the same sequence is accepted. Its own cluster
# (SCALEGUARD_NETNS=1) with its own policy: thresholds far from both links' numbers (the
# throttled link is ~10x slower than compute, the fast one well within), no timing thresholds.
# Issue 37: a record keeps the hardware it ran on, and this cluster's "GPUs" are CPU slots of
# one VM (the probe trains with --device cpu). The policy says so: its partitions are the host
# `devhost`, a [host NAME] of a catalog override (what `scaleguard calibrate --write` makes for
# a measured CPU host; one rank = one "GPU"), not p4d.24xlarge. The probe stores its record as
# device=cpu, gpu=devhost and decide uses it for these partitions; under a GPU instance the
# same probe would be refused (tests/cli/probe.bats).
load helpers

MODEL='layers=2,hidden=128,heads=4,seq=64,vocab=256,precision=fp32'

setup_file() {
  export SCALEGUARD_DEV_DIR=$SCALEGUARD_BUILD_DIR/dev-cluster-probe
  local probe=sgprb$$
  if ! ip link add "$probe" type bridge 2>/dev/null; then
    export PROBE_UNAVAILABLE="SKIPPED LOUDLY: this machine cannot create network interfaces (no CAP_NET_ADMIN?), the probe test needs namespaced nodes"
    return 0
  fi
  # tbf is what throttles the link (netem is not needed); without it nothing here may pass.
  if ! tc qdisc replace dev "$probe" root tbf rate 10mbit burst 32kbit latency 400ms 2>/dev/null; then
    ip link del "$probe"
    export PROBE_UNAVAILABLE="SKIPPED LOUDLY: tc qdisc tbf is not available on this kernel (sch_tbf): the link cannot be throttled"
    return 0
  fi
  ip link del "$probe"
  if [ ! -x "$SCALEGUARD_BUILD_DIR/runner/scaleguard-run" ]; then
    export PROBE_UNAVAILABLE="SKIPPED LOUDLY: scaleguard-run is not built in $SCALEGUARD_BUILD_DIR (the probe runs it)"
    return 0
  fi
  mkdir -p "$SCALEGUARD_DEV_DIR"
  export STORE=$SCALEGUARD_DEV_DIR/probes
  rm -rf "$STORE"
  mkdir -p "$STORE"
  chmod 1777 "$STORE"   # like /tmp: everyone may add records, nobody may replace another's
  export PROBE_POLICY=$SCALEGUARD_DEV_DIR/probe-policy.ini
  cat > "$SCALEGUARD_DEV_DIR/devhost.ini" <<EOF
[host devhost]
peak_gflops = 20
link_gb_s = 5
ranks_per_node = 8
memory_gib = 8
efficiency = 1
EOF
  cat > "$PROBE_POLICY" <<EOF
catalog = $SCALEGUARD_SOURCE_DIR/configs/catalog.ini
calibration = $SCALEGUARD_DEV_DIR/devhost.ini
checkpoint_roots = /tmp
trusted_users = root
probe_store = $STORE
probe_max_age = 1d
probe_max_gpu_hours = 1
probe_max_fraction = 0.02
[rules]
# Only the scaling rules judge here (the others would fire on a toy model).
distributed_min_gpu_hours = off
single_gpu_max_hours = off
consider_distributed_hours = off
checkpoint_required_gpu_hours = off
time_limit_fits = off
max_comm_ratio = 4 rewrite
min_doubling_speedup = 0.3 rewrite
[partition gpu-od]
instance = devhost
default = yes
max_time = 1-00:00:00
[partition gpu-spot]
instance = devhost
capacity = spot
EOF
  SCALEGUARD_NETNS=1 SCALEGUARD_ACCOUNTING=0 SCALEGUARD_POLICY=$PROBE_POLICY \
    "$SCALEGUARD_SOURCE_DIR/scripts/dev-cluster/up" >&3
  export RUN_TMP=$(user_dir)
  chmod 755 "$RUN_TMP"
}
teardown_file() {
  [ -n "${PROBE_UNAVAILABLE:-}" ] && return 0
  "$SCALEGUARD_SOURCE_DIR/scripts/dev-cluster/down" >&3
  rm -rf "$RUN_TMP"
}
setup() {
  [ -z "${PROBE_UNAVAILABLE:-}" ] || skip "$PROBE_UNAVAILABLE"
  cluster_env
  SG=$SCALEGUARD_BUILD_DIR/cli/scaleguard
  RUNNER=$SCALEGUARD_BUILD_DIR/runner/scaleguard-run
}

# Runs the probe as a Slurm job (root: its record applies to everyone) over both nodes; sets
# probe_json to its measurement.
run_probe() {
  submit -N2 --ntasks-per-node=1 --gpus-per-node=1 --time=10 --train-probe --train-model="$MODEL" \
    --train-tokens=1T -o "$RUN_TMP/probe-%j.out" \
    --wrap "$SG probe --policy $PROBE_POLICY --model '$MODEL' --runner $RUNNER --device cpu --threads 1 --micro-batch 8 --steps 8 --json"
  probe_job=$job_id
  state=$(wait_job "$probe_job" 200)
  cat "$RUN_TMP/probe-$probe_job.out" >&3
  [ "$state" = COMPLETED ]
  probe_json=$(grep '^{' "$RUN_TMP/probe-$probe_job.out" | tail -n 1)
  [ -n "$probe_json" ]
  echo "# probe job $probe_job: $probe_json" >&3
}
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$probe_json" "$1"; }

# The scale-out job a researcher submits: 16 GPUs over both nodes, as the test user.
submit_scale_out() {
  run as_user "$RUN_TMP" sbatch --parsable -N2 --gpus-per-node=8 --time=60 --hold --train-model="$MODEL" \
    --train-tokens=1T --wrap true
  echo "# sbatch: $output" >&3
  assert_success
  scale_job=$(tail -n 1 <<<"$output" | cut -d';' -f1)
  [[ $scale_job =~ ^[0-9]+$ ]]
}

@test "throttled link (tbf 10mbit): the probe measures poor scaling; the 2-node job is rewritten citing it" {
  "$SCALEGUARD_SOURCE_DIR/scripts/dev-cluster/throttle" 10mbit >&3
  run "$SCALEGUARD_SOURCE_DIR/scripts/dev-cluster/throttle" show
  assert_output --partial 'tbf'
  run_probe
  [ "$(field nodes)" = 2 ]
  python3 -c "import sys; s=float(sys.argv[1]); c=float(sys.argv[2]); sys.exit(0 if s < 0.3 or c > 4 else 1)" \
    "$(field speedup)" "$(field comm_ratio)"
  # The record: in the store, owned by root, named for its writer.
  record=$(field record)
  [ -f "$record" ] && [ "$(stat -c %u "$record")" = 0 ]
  [[ $record == "$STORE/u0/"*.u0.rec ]]
  grep -q "^job_id=$probe_job\$" "$record"
  # Labelled with the hardware it ran on (issue 37): the ranks' CPU, the partition's host.
  grep -qx 'device=cpu' "$record"
  grep -qx 'gpu=devhost' "$record"
  grep -qx 'instance=devhost' "$record"
  submit_scale_out
  [[ $(job_field "$scale_job" NumNodes) =~ ^1(-1)?$ ]]
  run job_comment "$scale_job"
  assert_output --regexp 'rewrite \[[a-z_,]*(max_comm_ratio|min_doubling_speedup)'
  # The user is told what was measured, when, and by which probe job.
  run as_user "$RUN_TMP" sbatch --test-only -N2 --gpus-per-node=8 --time=60 --train-model="$MODEL" --train-tokens=1T --wrap true
  assert_output --partial "measured"
  assert_output --partial "(probe job $probe_job)"
  scancel "$scale_job"
  # Without the measurement the model alone accepts the same job: the probe made the difference.
  run "$SG" decide --policy "$PROBE_POLICY" --no-probes -N2 --gpus-per-node 8 --time 60 --train-model "$MODEL" --train-tokens 1T
  assert_success
}

@test "fast link: the probe measures good scaling; the same 2-node job is accepted" {
  "$SCALEGUARD_SOURCE_DIR/scripts/dev-cluster/throttle" off >&3
  run_probe
  python3 -c "import sys; s=float(sys.argv[1]); c=float(sys.argv[2]); sys.exit(0 if s >= 0.3 and c <= 4 else 1)" \
    "$(field speedup)" "$(field comm_ratio)"
  submit_scale_out
  [[ $(job_field "$scale_job" NumNodes) =~ ^2(-2)?$ ]]
  run job_comment "$scale_job"
  assert_output --partial 'accept'
  refute_output --partial 'rewrite'
  run as_user "$RUN_TMP" sbatch --test-only -N2 --gpus-per-node=8 --time=60 --train-model="$MODEL" --train-tokens=1T --wrap true
  assert_success
  scancel "$scale_job"
}

@test "a user's own probe record tightens only that user's jobs and cannot loosen" {
  # The user forges a great record for the model under his own name: ignored for loosening.
  local fp
  fp=$(grep -h '^fingerprint=' "$STORE"/u0/*.u0.rec | head -n 1 | cut -d= -f2)
  [ -n "$fp" ]
  sed -e 's/^speedup=.*/speedup=0.05/' -e 's/^comm_ratio=.*/comm_ratio=50/' "$STORE/u0/$fp".*.u0.rec > "$RUN_TMP/rec"
  local uid
  uid=$(id -u "$SCALEGUARD_TEST_USER")
  as_user "$RUN_TMP" mkdir -p "$STORE/u$uid"
  as_user "$RUN_TMP" cp rec "$STORE/u$uid/$fp.devhost.r2n2.u$uid.rec"
  # His own bad measurement tightens his own jobs...
  run as_user "$RUN_TMP" sbatch --test-only -N2 --gpus-per-node=8 --time=60 --train-model="$MODEL" --train-tokens=1T --wrap true
  assert_output --partial "your own probe"
  # ...but not root's (others' records are ignored).
  run sbatch --test-only -N2 --gpus-per-node=8 --time=60 --train-model="$MODEL" --train-tokens=1T --wrap true
  refute_output --partial "your own probe"
  rm -f "$STORE/u$uid/$fp.devhost.r2n2.u$uid.rec"
}

@test "a --train-probe job larger than the probe budget is refused (no way around GPU-hour caps)" {
  run as_user "$RUN_TMP" sbatch --test-only -N2 --gpus-per-node=8 --time=60 --train-probe --train-model="$MODEL" --train-tokens=1T --wrap true
  assert_failure
  assert_output --partial 'probe_budget'
  assert_output --partial 'GPU-hours allowed for a probe'
}

@test "the probe stops within its budget and says so (a budget too small for 3 steps fails, stores nothing)" {
  local before
  before=$(find "$STORE" -type f | wc -l)
  run env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$SG" probe --policy "$PROBE_POLICY" \
    --model "$MODEL" --runner "$RUNNER" --launcher mpirun --device cpu --max-gpu-hours 0.0002 --workdir "$RUN_TMP/tiny"
  assert_failure
  assert_output --partial 'budget'
  [ "$(find "$STORE" -type f | wc -l)" = "$before" ]
}
