#!/usr/bin/env bats
# `scaleguard probe` outside Slurm (mpirun on this host) and `scaleguard decide` reading the
# probe store (issue 16): the seed's "run a 2-GPU micro-benchmark; if the speedup is below 1.5x,
# stop", with the shipped policy's thresholds. The live 2-node version is tests/slurm/probe.bats.
load helpers

MODEL='layers=2,hidden=128,heads=4,seq=64,vocab=256,precision=fp32'

setup() {
  : "${SCALEGUARD_BIN:?}" "${SCALEGUARD_SOURCE_DIR:?}"
  unset SCALEGUARD_POLICY SCALEGUARD_CATALOG
  cd "$SCALEGUARD_SOURCE_DIR"
  STORE=$(mktemp -d /tmp/scaleguard-cli-probe.XXXXXX)
  chmod 1777 "$STORE"
  mkdir -m 0755 "$STORE/u0"   # records live in their owner's directory (probe/README.md)
}
teardown() { rm -rf "$STORE"; }

# The documented fingerprint (probe/README.md): FNV-1a 64 of the model's shape and precision.
fingerprint() {
  python3 -c '
h = 1469598103934665603
for c in b"gpt;L=2;h=128;a=4;s=64;v=256;p=fp32": h = ((h ^ c) * 1099511628211) % 2**64
print("%016x" % h)'
}
record() {  # record SPEEDUP COMM NODES TIME
  printf 'format=1\nfingerprint=%s\ninstance=p4d.24xlarge\nranks=2\nnodes=%s\nspeedup=%s\ncomm_ratio=%s\ntime=%s\ndate=2026-12-04\njob_id=12\nuser=admin\n' \
    "$(fingerprint)" "$3" "$1" "$2" "$4"
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

@test "probe on this host (mpirun, 1 vs 2 ranks) stores a record that decide then cites" {
  [ -x "${SCALEGUARD_RUN:-}" ] || skip "scaleguard-run not built (SCALEGUARD_RUN unset)"
  command -v mpirun >/dev/null || skip "no mpirun"
  run env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
    "$SCALEGUARD_BIN" probe --model "$MODEL" --store "$STORE" --runner "$SCALEGUARD_RUN" --launcher mpirun \
    --device cpu --micro-batch 8 --steps 6 --json --workdir "$STORE/work"
  assert_exit 0
  json=$(grep '^{' <<<"$output")
  python3 -c 'import json,sys; j=json.loads(sys.argv[1]); assert j["ranks"]==2 and j["nodes"]==1 and j["speedup"]>0 and j["gpu_hours"]>0, j' "$json"
  rec=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["record"])' "$json")
  [ -f "$rec" ]
  grep -q '^fingerprint=' "$rec"
  [ "$(id -u)" = 0 ] || return 0
  # Whatever this host measured, decide now judges the 8-GPU job on it and cites the record:
  # through min_doubling_speedup ("measured 1.31x") or, when the host's comm ratio came out
  # above the policy's cap (a loaded machine), through max_comm_ratio ("measured comm ratio 0.35 > 0.2").
  run sg decide --store "$STORE" --gpus 8 --time 3-00:00:00 --train-model "$MODEL" --train-tokens 3T
  assert_output --regexp "measured ([0-9.]+x(, comm ratio [0-9.]+)?|comm ratio [0-9.]+ > [0-9.]+) on 2 GPUs in one node on [0-9-]+ \(probe job outside Slurm\)"
}
