#!/usr/bin/env bats
# `scaleguard probe` outside Slurm (mpirun on this host) and `scaleguard decide` reading the
# probe store (issue 16): the seed's "run a 2-GPU micro-benchmark; if the speedup is below 1.5x,
# stop", with the shipped policy's thresholds. The live 2-node version is tests/slurm/probe.bats.
# Issue 37: a record keeps the hardware it ran on. The shipped policy's partitions are GPU
# instances (p4d.24xlarge: A100-40GB), so a CPU probe is refused there and a CPU-labelled
# record filed under p4d.24xlarge is never used; the probe-to-decision flow on this host runs
# under a policy whose partition IS this host: a [host devhost] of a catalog override (what
# `scaleguard calibrate --write` makes for a measured CPU host), so the CPU measurement is
# stored and used as what it is, a CPU host's.
load helpers

MODEL='layers=2,hidden=128,heads=4,seq=64,vocab=256,precision=fp32'

setup() {
  : "${SCALEGUARD_BIN:?}" "${SCALEGUARD_SOURCE_DIR:?}"
  unset SCALEGUARD_POLICY SCALEGUARD_CATALOG
  cd "$SCALEGUARD_SOURCE_DIR"
  STORE=$(mktemp -d /tmp/scaleguard-cli-probe.XXXXXX)
  chmod 1777 "$STORE"
  mkdir -m 0755 "$STORE/u0"   # records live in their owner's directory (probe/README.md)
  # A cluster whose partition is this CPU host (its numbers only need to be plausible: the
  # rules below judge the measurement, not the model's estimate).
  HOST_DIR=$(mktemp -d /tmp/scaleguard-cli-host.XXXXXX)
  cat > "$HOST_DIR/devhost.ini" <<EOF
[host devhost]
peak_gflops = 20
link_gb_s = 5
ranks_per_node = 8
memory_gib = 8
efficiency = 1
EOF
  cat > "$HOST_DIR/policy.ini" <<EOF
catalog = $SCALEGUARD_SOURCE_DIR/configs/catalog.ini
calibration = $HOST_DIR/devhost.ini
checkpoint_roots = /tmp
trusted_users = root
probe_store = $STORE
probe_max_age = 1d
probe_max_gpu_hours = 1
[rules]
distributed_min_gpu_hours = off
single_gpu_max_hours = off
consider_distributed_hours = off
checkpoint_required_gpu_hours = off
time_limit_fits = off
max_comm_ratio = 0.2 rewrite
min_doubling_speedup = 1.5 rewrite
[partition cpu]
instance = devhost
default = yes
EOF
}
teardown() { rm -rf "$STORE" "$HOST_DIR"; }

# The documented fingerprint (probe/README.md): FNV-1a 64 of the model's shape and precision.
fingerprint() {
  python3 -c '
h = 1469598103934665603
for c in b"gpt;L=2;h=128;a=4;s=64;v=256;p=fp32": h = ((h ^ c) * 1099511628211) % 2**64
print("%016x" % h)'
}
# An admin's record of a GPU probe on p4d.24xlarge (what `scaleguard probe` writes there:
# device=cuda, gpu=A100-40GB); DEVICE and GPU override the hardware it claims.
record() {  # record SPEEDUP COMM NODES TIME [DEVICE GPU]
  printf 'format=2\nfingerprint=%s\ninstance=p4d.24xlarge\ndevice=%s\ngpu=%s\nranks=2\nnodes=%s\nspeedup=%s\ncomm_ratio=%s\ntime=%s\ndate=2026-12-04\njob_id=12\nuser=admin\n' \
    "$(fingerprint)" "${5:-cuda}" "${6:-A100-40GB}" "$3" "$1" "$2" "$4"
}

@test "decide fires min_doubling_speedup on a measured 2-GPU speedup and says so" {
  [ "$(id -u)" = 0 ] || skip "the store's trusted owner is root here (run as root)"
  record 1.31 0.05 1 "$(date +%s)" > "$STORE/u0/$(fingerprint).p4d.24xlarge.r2n1.u0.rec"
  run sg decide --store "$STORE" --gpus 8 --time 3-00:00:00 --train-model "$MODEL" --train-tokens 3T
  assert_exit 3
  assert_output --partial "measured 1.31x on 2 GPUs in one node on 2026-12-04 (probe job 12) < 1.5x"
  assert_output --partial "--gpus=1"
  # The same request without the measurement: the model alone does not fire the rule.
  run sg decide --store "$STORE" --no-probes --gpus 8 --time 3-00:00:00 --train-model "$MODEL" --train-tokens 3T
  refute_output --partial "min_doubling_speedup"
}

@test "stale, foreign-instance and other-layout records are not used" {
  [ "$(id -u)" = 0 ] || skip "run as root"
  record 1.31 0.05 1 $(( $(date +%s) - 40 * 86400 )) > "$STORE/u0/$(fingerprint).p4d.24xlarge.r2n1.u0.rec"
  record 1.31 0.05 2 "$(date +%s)" > "$STORE/u0/$(fingerprint).p4d.24xlarge.r2n2.u0.rec"
  run sg decide --store "$STORE" --gpus 8 --time 3-00:00:00 --train-model "$MODEL" --train-tokens 3T
  refute_output --partial "measured"
}

@test "issue 37: a CPU-measured record filed under p4d.24xlarge is not used for its A100 jobs; a GPU one is" {
  [ "$(id -u)" = 0 ] || skip "run as root"
  local rec="$STORE/u0/$(fingerprint).p4d.24xlarge.r2n1.u0.rec"
  record 1.31 0.05 1 "$(date +%s)" cpu cpu > "$rec"
  run sg decide --store "$STORE" --gpus 8 --time 3-00:00:00 --train-model "$MODEL" --train-tokens 3T
  refute_output --partial "measured"
  # Not even when it claims the partition's GPU name: the device is the CPU.
  record 1.31 0.05 1 "$(date +%s)" cpu A100-40GB > "$rec"
  run sg decide --store "$STORE" --gpus 8 --time 3-00:00:00 --train-model "$MODEL" --train-tokens 3T
  refute_output --partial "measured"
  # Another GPU's measurement is not this one's either.
  record 1.31 0.05 1 "$(date +%s)" cuda V100-16GB > "$rec"
  run sg decide --store "$STORE" --gpus 8 --time 3-00:00:00 --train-model "$MODEL" --train-tokens 3T
  refute_output --partial "measured"
  # The same numbers measured on the partition's A100-40GB: cited.
  record 1.31 0.05 1 "$(date +%s)" cuda A100-40GB > "$rec"
  run sg decide --store "$STORE" --gpus 8 --time 3-00:00:00 --train-model "$MODEL" --train-tokens 3T
  assert_output --partial "measured 1.31x on 2 GPUs in one node"
  # A record from before issue 37 (format 1: no device, no GPU) is refused, and decide says why.
  printf 'format=1\nfingerprint=%s\ninstance=p4d.24xlarge\nranks=2\nnodes=1\nspeedup=1.31\ncomm_ratio=0.05\ntime=%s\ndate=2026-12-04\njob_id=12\nuser=admin\n' \
    "$(fingerprint)" "$(date +%s)" > "$rec"
  run sg decide --store "$STORE" --gpus 8 --time 3-00:00:00 --train-model "$MODEL" --train-tokens 3T
  refute_output --partial "measured 1.31x"
  assert_output --partial "does not say which device and GPU"
}

@test "issue 37: a CPU probe is refused for a GPU instance before it runs, and stores nothing" {
  # The shipped policy's default partition is p4d.24xlarge (A100-40GB).
  run sg probe --model "$MODEL" --store "$STORE" --device cpu --launcher mpirun --runner /nonexistent
  assert_exit 2
  assert_output --partial "a CPU measurement is not stored as p4d.24xlarge's"
  assert_output --partial "A100-40GB"
  [ -z "$(find "$STORE" -type f)" ]
  # --policy/--partition pick the hardware like plan and compare: a CUDA probe for the CPU host is refused too.
  run sg probe --policy "$HOST_DIR/policy.ini" --partition cpu --model "$MODEL" --device cuda --runner /nonexistent
  assert_exit 2
  assert_output --partial "a GPU measurement is not stored as devhost's"
  run sg probe --policy "$HOST_DIR/policy.ini" --partition nosuch --model "$MODEL" --device cpu
  assert_exit 2
  assert_output --partial "partition 'nosuch' is not in the policy"
}

@test "a store others could tamper with (world-writable, no sticky bit) is not used, and says why" {
  [ "$(id -u)" = 0 ] || skip "run as root"
  record 1.31 0.05 1 "$(date +%s)" > "$STORE/u0/$(fingerprint).p4d.24xlarge.r2n1.u0.rec"
  chmod 0777 "$STORE"
  run sg decide --store "$STORE" --gpus 8 --time 3-00:00:00 --train-model "$MODEL" --train-tokens 3T
  assert_output --partial "sticky bit"
  refute_output --partial "measured 1.31x"
}

@test "probe: usage errors exit 2 with the reason" {
  run sg probe
  assert_exit 2
  assert_output --partial "--model is required"
  run sg probe --model "$MODEL"   # the shipped policy names no probe_store
  assert_exit 2
  assert_output --partial "no probe store"
  run sg probe --model "$MODEL" --no-store --launcher ssh
  assert_exit 2
}

@test "probe on this host (mpirun, 1 vs 2 ranks): refused under p4d.24xlarge; under a CPU-host partition stored as cpu and cited by decide" {
  [ -x "${SCALEGUARD_RUN:-}" ] || skip "scaleguard-run not built (SCALEGUARD_RUN unset)"
  command -v mpirun >/dev/null || skip "no mpirun"
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then skip "this host has a GPU"; fi
  local ompi="OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1"
  # --device auto on this GPU-less host trains on the CPU: measured, then refused for p4d.24xlarge.
  run env $ompi "$SCALEGUARD_BIN" probe --model "$MODEL" --store "$STORE" --runner "$SCALEGUARD_RUN" --launcher mpirun \
    --micro-batch 8 --steps 4 --json --workdir "$STORE/work0" --instance p4d.24xlarge
  assert_exit 1
  assert_output --partial "measured on cpu (cpu), not on p4d.24xlarge's A100-40GB: not stored"
  [ -z "$(find "$STORE" -name '*.rec')" ]
  # Under the CPU host's policy the same probe is stored, labelled with its hardware.
  run env $ompi "$SCALEGUARD_BIN" probe --policy "$HOST_DIR/policy.ini" --model "$MODEL" --runner "$SCALEGUARD_RUN" \
    --launcher mpirun --device cpu --micro-batch 8 --steps 6 --json --workdir "$STORE/work"
  assert_exit 0
  json=$(grep '^{' <<<"$output")
  python3 -c 'import json,sys; j=json.loads(sys.argv[1]); assert j["ranks"]==2 and j["nodes"]==1 and j["speedup"]>0 and j["gpu_hours"]>0 and j["instance"]=="devhost" and j["device"]=="cpu" and j["gpu"]=="devhost", j' "$json"
  rec=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["record"])' "$json")
  [ -f "$rec" ]
  grep -q '^fingerprint=' "$rec"
  grep -qx 'device=cpu' "$rec"
  grep -qx 'gpu=devhost' "$rec"
  [ "$(id -u)" = 0 ] || return 0
  # Whatever this host measured, decide now judges the 8-rank job on the CPU host on it and cites
  # the record: through min_doubling_speedup ("measured 1.31x"), max_comm_ratio ("measured comm
  # ratio 0.35 > 0.2", a loaded machine), or as the measurement that vouches for the job.
  run sg decide --policy "$HOST_DIR/policy.ini" --gpus 8 --time 3-00:00:00 --train-model "$MODEL" --train-tokens 3T
  assert_output --regexp "measured ([0-9.]+x(, comm ratio [0-9.]+)?|comm ratio [0-9.]+ > [0-9.]+) on 2 GPUs in one node on [0-9-]+ \(probe job outside Slurm\)"
  # The CPU host's record filed by hand under the GPU instance (today's bug, issue 37) judges no A100 job.
  sed 's/^instance=devhost$/instance=p4d.24xlarge/' "$rec" > "$STORE/u0/$(fingerprint).p4d.24xlarge.r2n1.u0.rec"
  run sg decide --store "$STORE" --gpus 8 --time 3-00:00:00 --train-model "$MODEL" --train-tokens 3T
  refute_output --partial "measured"
}
