#!/usr/bin/env bash
# scripts/gpu-check.sh — the runner's GPU path on a one-GPU machine, as one prepared script
# (issue 15 item 10). Meant for the project's GPU test machine (one H200, PyTorch 2.11 cu130,
# nvcc, CMake, ninja; no MPI, HDF5 or network), under 8 minutes before 5b/5c (five more runs
# of the small model: estimated one to two minutes more, not measured):
#
#   1. facts: GPU, driver, torch/CUDA/NCCL versions
#   2. a sysroot from carried Debian packages (Open MPI, HDF5, Boost.Program_options, json, xxhash)
#   3. scaleguard-run built against that machine's LibTorch and NCCL (-DSCALEGUARD_REQUIRE_NCCL=ON)
#   4. a ~1B-parameter GPT in bf16 for a few steps: step time, MFU against the GPU's bf16 peak,
#      peak memory (nvidia-smi, sampled) against `scaleguard plan` for the same shape
#   5. save and resume bit-exact (two runs' --dump-params compared byte for byte)
#   5b. step timings from CUDA events (runner/src/timing/step_timer_cuda.cpp) against host clocks
#       (SCALEGUARD_STEP_TIMER=host) on the same run; comm_ms 0 at world size 1
#   5c. async snapshots through pinned mirrors on a side stream (device_staging_cuda.cpp): the
#       training thread's hand-over time against the old per-tensor copy, and resume
#       bit-exact from an async save
#   6. the NCCL backend at world size 1, and its failure path: two ranks on one GPU are refused
#      by NCCL; every rank must exit non-zero within the start-up timeout (no hang)
#
# Here (a Debian 12 machine with network):  scripts/gpu-check.sh --fetch   (debs into build/gpu-debs)
# There:  device run, carry build/gpu-debs:  bash scripts/gpu-check.sh
# Results: $OUT/gpu-check.log and $OUT/gpu-check.json (OUT defaults to build/gpu-check).
# Status: written without a GPU; it has NOT run on one yet (runner/README.md says what is
# verified on a GPU and what only by construction). Exit 0 only when every check passed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
debs=${SCALEGUARD_GPU_DEBS:-build/gpu-debs}
out=${OUT:-build/gpu-check}
peak_tflops=${SCALEGUARD_GPU_PEAK_TFLOPS:-989}   # H100/H200 SXM dense bf16
mkdir -p "$out"
log=$out/gpu-check.log
: >"$log"
say() { echo "gpu-check [$(date +%T)] $*" | tee -a "$log" >&2; }
fail=0
check() { if "$@"; then say "PASS: $*"; else say "FAIL: $*"; fail=1; fi; }

# The packages (and what they pull in that a CUDA image lacks). Debian 12 binaries need
# glibc >= 2.36: the image's Ubuntu 24.04 has 2.39.
packages=(openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev libpmix2 libhwloc15 libevent-core-2.1-7
  libevent-pthreads-2.1-7 libfabric1 libucx0 libibverbs1 librdmacm1 libnl-3-200 libnl-route-3-200
  libpsm2-2 libpsm-infinipath1 libnuma1 libhdf5-103-1 libhdf5-dev libhdf5-cpp-103-1 libsz2 libaec0
  libcurl3-gnutls libboost-program-options1.74.0 libboost-program-options1.74-dev
  libboost1.74-dev nlohmann-json3-dev libxxhash0 libxxhash-dev libhowardhinnant-date-dev libdate-tz3)

if [ "${1:-}" = --fetch ]; then
  mkdir -p "$debs" && cd "$debs" && apt-get download "${packages[@]}"
  du -sh . >&2   # under build/ (ignored): name it in the device run's carry
  exit
fi

# --- 1. facts --------------------------------------------------------------------------------
py=$(command -v python3)
say "$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -n1)"
torch_facts=$("$py" - <<'EOF' 2>&1
import torch, torch.utils
print(torch.__version__, torch.version.cuda, torch.cuda.is_available(),
      ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else "-",
      torch.utils.cmake_prefix_path)
EOF
)
say "torch cuda available nccl cmake_prefix: $torch_facts"
read -r torch_version _ cuda_ok _ torch_cmake <<<"$torch_facts"
[ "$cuda_ok" = True ] || { say "FAIL: torch sees no GPU"; exit 1; }

# --- 2. sysroot from the carried packages --------------------------------------------------------
ls "$debs"/*.deb >/dev/null 2>&1 || { say "FAIL: no .deb files in $debs (run --fetch where apt works, carry it)"; exit 1; }
# A fresh private folder (mktemp -d, 0700): root runs programs and loads libraries from it,
# so never a fixed /tmp name another user could make first.
root=$(mktemp -d /tmp/sg-sysroot.XXXXXX)
trap 'rm -rf "$root"' EXIT
for d in "$debs"/*.deb; do dpkg -x "$d" "$root"; done
multi=$root/usr/lib/x86_64-linux-gnu
export PATH=$root/usr/bin:$PATH
export LD_LIBRARY_PATH=$multi:$multi/openmpi/lib:$multi/hdf5/serial/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OPAL_PREFIX=$root/usr                     # Open MPI found away from /usr
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Debian's wrapper data names /usr; a relocated Open MPI reads OPAL_PREFIX.
mpirun --version 2>&1 | head -n1 | tee -a "$log" >&2
nccl_dir=$("$py" -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null || true)
say "NCCL from $nccl_dir"

# --- 3. build ------------------------------------------------------------------------------------
build="build-gpu-check"
t0=$SECONDS
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$torch_cmake;$root/usr" -DSCALEGUARD_SLURM=OFF -DSCALEGUARD_TESTS=OFF \
  -DSCALEGUARD_BENCH=OFF -DSCALEGUARD_FUZZ=OFF -DSCALEGUARD_REQUIRE_NCCL=ON \
  -DNCCL_ROOT="$nccl_dir" -DMPI_HOME="$root/usr/lib/x86_64-linux-gnu/openmpi" \
  -DHDF5_ROOT="$multi/hdf5/serial" -DBoost_ROOT="$root/usr" \
  -DCMAKE_CXX_FLAGS="-I$root/usr/include -I$multi/openmpi/include -I$multi/hdf5/serial/include" \
  >>"$log" 2>&1 || { say "FAIL: cmake (see $log)"; exit 1; }
cmake --build "$build" -j"$(nproc)" --target scaleguard scaleguard-run >>"$log" 2>&1 ||
  { say "FAIL: build (see $log)"; exit 1; }
say "built in $((SECONDS - t0)) s"
run=$build/runner/scaleguard-run
cli=$build/cli/scaleguard

# --- 4. a ~1B GPT in bf16 ------------------------------------------------------------------------
# 20 layers x 12 x 2048^2 = 1.01e9 in the blocks, + 50304 x 2048 tied embedding = 1.11e9.
layers=20 embd=2048 heads=16 seq=1024 vocab=50304 mb=8 steps=8
gpt=(--model gpt --n-layer "$layers" --n-embd "$embd" --n-head "$heads" --seq-len "$seq" --vocab-size "$vocab"
     --global-batch "$mb" --micro-batch "$mb" --synthetic 20000000 --device cuda --log-every 1 --quiet)
precision=()
"$run" train --help 2>&1 | grep -q -- '--precision' && precision=(--precision bf16)
[ ${#precision[@]} -gt 0 ] || say "WARN: this scaleguard-run has no --precision: fp32"
recompute=()
"$run" train --help 2>&1 | grep -q -- '--recompute' && recompute=(--recompute selective)
nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$out/mem.txt" 2>/dev/null &
smi=$!
mpirun -np 1 "$run" train "${gpt[@]}" "${precision[@]}" "${recompute[@]}" --steps $steps \
  --metrics "$out/metrics.jsonl" >>"$log" 2>&1
rc=$?
kill $smi 2>/dev/null
check test $rc = 0
peak_mib=$(sort -n "$out/mem.txt" | tail -n1)
params=$(( layers * 12 * embd * embd + vocab * embd ))
read -r step_ms mfu <<<"$("$py" - "$out/metrics.jsonl" $params $((mb * seq)) "$peak_tflops" <<'EOF'
import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
steady = [r["step_ms"] for r in rows[2:]] or [r["step_ms"] for r in rows]
ms = statistics.median(steady)
flops = 6 * int(sys.argv[2]) * int(sys.argv[3])
print(f"{ms:.1f} {flops / (ms / 1e3) / (float(sys.argv[4]) * 1e12):.3f}")
EOF
)"
say "GPT ${params} params, ${mb}x${seq} tokens/step: step ${step_ms} ms, MFU ${mfu} of ${peak_tflops} TFLOP/s; peak memory ${peak_mib} MiB (nvidia-smi, whole process incl. CUDA context)"
plan_json=$("$cli" plan --model "layers=$layers,hidden=$embd,heads=$heads" --gpu-type H200-141GB --gpus 1 \
  --tokens 1B --seq $seq --micro-batch $mb --precision bf16 --recompute selective --json 2>>"$log")
say "plan: $(echo "$plan_json" | head -c 600)"

# --- 5. save and resume bit-exact --------------------------------------------------------------------
small=(--model gpt --n-layer 4 --n-embd 512 --n-head 8 --seq-len 256 --vocab-size "$vocab" --global-batch 8
       --synthetic 2000000 --device cuda --quiet "${precision[@]}")
rm -rf "$out/ckpt"
mpirun -np 1 "$run" train "${small[@]}" --steps 12 --dump-params "$out/straight.bin" >>"$log" 2>&1
mpirun -np 1 "$run" train "${small[@]}" --steps 6 --ckpt-dir "$out/ckpt" --ckpt-every 6 >>"$log" 2>&1
mpirun -np 1 "$run" train "${small[@]}" --steps 12 --ckpt-dir "$out/ckpt" --ckpt-every 100 \
  --dump-params "$out/resumed.bin" >>"$log" 2>&1
check cmp -s "$out/straight.bin" "$out/resumed.bin"

# --- 5b. step timings: CUDA events vs host clocks ------------------------------------------------
# The same 10 steps twice. Each step ends with host read-backs (loss, gradient norm) and the
# timer's one synchronisation, so host clocks around a whole step are close to the GPU's time
# there too: the two medians should agree (within 15 %); a wide gap means the events are
# misplaced. comm_ms must be 0 at world size 1 (no collectives; the only GPU on this machine
# cannot test NCCL comm_ms).
mpirun -np 1 "$run" train --verbose "${small[@]}" --steps 10 --log-every 1 --metrics "$out/timer-events.jsonl" \
  >"$out/timer-events.log" 2>&1
check grep -q "timings.*CUDA events on the training stream" "$out/timer-events.log"
mpirun -np 1 -x SCALEGUARD_STEP_TIMER=host "$run" train "${small[@]}" --steps 10 --log-every 1 \
  --metrics "$out/timer-host.jsonl" >"$out/timer-host.log" 2>&1
read -r ev_ms host_ms ev_comm <<<"$("$py" - "$out/timer-events.jsonl" "$out/timer-host.jsonl" <<'EOF'
import json, sys, statistics
def steps(p):
    return [r for r in map(json.loads, filter(str.strip, open(p))) if "step" in r and not r.get("final")][3:]
ev, host = steps(sys.argv[1]), steps(sys.argv[2])
print(f"{statistics.median(r['step_ms'] for r in ev):.2f} {statistics.median(r['step_ms'] for r in host):.2f} "
      f"{max(r['comm_ms'] for r in ev):.3f}")
EOF
)"
say "step_ms median: CUDA events ${ev_ms:-?} ms, host clocks ${host_ms:-?} ms; comm_ms (world 1, events) max ${ev_comm:-?}"
check "$py" -c "import sys; e, h = ${ev_ms:-0}, ${host_ms:-0}; sys.exit(0 if e > 0 and abs(e - h) <= 0.15 * h else 1)"
check "$py" -c "import sys; sys.exit(0 if ${ev_comm:-1} == 0 else 1)"

# --- 5c. async snapshot: pinned mirrors on a side stream vs the per-tensor copy -------------------
# Async saves every 2 steps with the staging and without it (SCALEGUARD_TEST_STAGING=off: a
# pageable .to(kCPU) per tensor on the training thread, as before). Reported: the training
# thread's hand-over time per save and every step_ms (the steps after a save carry the
# optimizer's stream fences). Then resuming from the staged async save at step 6 must equal
# the straight run of section 5 bit for bit.
for mode in staged off; do
  rm -rf "$out/ck-$mode"
  mpirun -np 1 -x SCALEGUARD_TEST_STAGING="$([ $mode = off ] && echo off)" "$run" train "${small[@]}" --steps 8 \
    --log-every 1 --ckpt-dir "$out/ck-$mode" --ckpt-every 2 --ckpt-async on --metrics "$out/ck-$mode.jsonl" \
    >"$out/ck-$mode.log" 2>&1
  check test $? = 0
  say "$mode: $(grep -o 'reserved [0-9]* bytes of host[^;]*' "$out/ck-$mode.log" | head -n1)"
  say "$mode: hand-over ms per save: $(grep -o 'handed to the writer in [0-9.]* ms' "$out/ck-$mode.log" |
    awk '{printf "%s ", $6}')"
  say "$mode: step_ms: $("$py" -c 'import json,sys; print(*[r["step_ms"] for r in map(json.loads, filter(str.strip, open(sys.argv[1]))) if "step" in r and not r.get("final")])' "$out/ck-$mode.jsonl")"
done
check grep -q "host mirrors per rank, pinned" "$out/ck-staged.log"
rm -rf "$out/ck-staged/step-00000008"
mpirun -np 1 "$run" train "${small[@]}" --steps 12 --ckpt-dir "$out/ck-staged" --ckpt-every 100 \
  --dump-params "$out/resumed-async.bin" >"$out/resume-async.log" 2>&1
check grep -q "resumed from step-00000006" "$out/resume-async.log"
check cmp -s "$out/straight.bin" "$out/resumed-async.bin"

# --- 6. NCCL: world size 1 above; the failure path: two ranks on one GPU -----------------------------
t0=$SECONDS
timeout 120 mpirun -np 2 "$run" train "${small[@]}" --steps 2 --startup-timeout 20 >>"$log" 2>&1
rc=$?
say "two ranks on one GPU: exit $rc after $((SECONDS - t0)) s (NCCL refuses a duplicate GPU)"
check test $rc != 0 -a $rc != 124

cat >"$out/gpu-check.json" <<EOF
{"torch": "$torch_version", "params": $params, "step_ms": ${step_ms:-null}, "mfu": ${mfu:-null},
 "peak_tflops": $peak_tflops, "peak_memory_mib": ${peak_mib:-null}, "failed": $fail}
EOF
say "done: $([ $fail = 0 ] && echo all checks passed || echo SOME CHECKS FAILED)"
exit $fail
