#!/usr/bin/env bash
# README command one: the cost articles' story on a live local Slurm cluster (as root).
# Installs what is missing, builds, starts scripts/dev-cluster (two fake p4d.24xlarge nodes,
# partitions gpu-od and gpu-spot, accounting), then every decision is a real submission that
# job_submit/scaleguard judges inside slurmctld:
#   1. a 350M model asking for 8 GPUs is refused with the single-vs-distributed comparison;
#   2. the same training on 1 GPU is accepted;
#   3. a 7B model on 2 nodes x 8 GPUs is accepted with a multi-node plan (scontrol shows it)
#      and the job trains a small GPT on the fortunes corpus, one CPU rank per node, with
#      checkpoints (scripts/sbatch/train.sbatch, srun --mpi=pmix scaleguard-run);
#   4. it is preempted (USR1, as --signal=B:USR1 sends before the time limit): it saves,
#      requeues itself and resumes from the checkpoint;
#   5. the report of the window (text here, HTML in the output folder): those jobs' GPU-hours,
#      cost and waste, the refusal and the GPU-hours and dollars it avoided (from the decision
#      log: the demo runs the cluster's policy with an audit_file in the output folder).
# Stops the cluster it started, also on failure; reuses one that is already up (ctest), its
# policy switched to the demo's copy and back (a slurmctld restart each way).
#
# Environment: BUILD_DIR (default build), SCALEGUARD_DEV_DIR (default BUILD_DIR/dev-cluster),
# DEMO_OUT (folder for logs, checkpoints and the report; default a new /tmp/scaleguard-demo.*),
# DEMO_SHORT=1 (fewer training steps, for CI), DEMO_SKIP_INSTALL=1, DEMO_SKIP_BUILD=1.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
build=$(realpath -m "${BUILD_DIR:-build}")
export SCALEGUARD_BUILD_DIR=$build
export SCALEGUARD_DEV_DIR=$(realpath -m "${SCALEGUARD_DEV_DIR:-$build/dev-cluster}")
[ "$(id -u)" = 0 ] || { echo "demo: run as root (the dev cluster's slurmd runs jobs as their users)" >&2; exit 1; }

if [ "${DEMO_SHORT:-0}" = 1 ]; then steps=60 every=10; else steps=200 every=25; fi

step() { printf '\n=== %s\n' "$*"; }
say() { printf '%s\n' "$*"; }
die() { echo "demo: $*" >&2; exit 1; }

[ "${DEMO_SKIP_INSTALL:-0}" = 1 ] || bash scripts/install-deps.sh
if [ "${DEMO_SKIP_BUILD:-0}" != 1 ]; then
  gen=(); command -v ninja >/dev/null && [ ! -f "$build/CMakeCache.txt" ] && gen=(-G Ninja)
  cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$build" -j "$(nproc)" --target scaleguard scaleguard-run job_submit_scaleguard scaleguard_spank
fi

out=${DEMO_OUT:-$(mktemp -d /tmp/scaleguard-demo.XXXXXX)}
mkdir -p "$out"
out=$(realpath "$out")

# --- the cluster: reuse a live one, else start ours and stop it on any exit -------------
cluster_live() {
  [ -r "$SCALEGUARD_DEV_DIR/env.sh" ] &&
    (source "$SCALEGUARD_DEV_DIR/env.sh" && [[ $(scontrol ping 2>/dev/null) == *'is UP'* ]])
}
# The demo's policy: the cluster's, with job_submit/scaleguard's decision log in $out (the
# report's decisions section reads it). An absolute catalog path keeps the copy's catalog.
demo_policy() {  # demo_policy CLUSTER_POLICY
  local dir; dir=$(dirname "$(realpath "$1")")
  mkdir -p "$out/policy"
  sed -e "/^audit_file *=/d" -e "s|^catalog *= *\([^/].*\)|catalog = $dir/\1|" "$1" > "$out/policy/policy.ini"
  sed -i "1i audit_file = $out/decisions.jsonl" "$out/policy/policy.ini"
  echo "$out/policy/policy.ini"
}
# Restarts slurmctld (it reads job_submit_scaleguard.conf's policy= at start only).
restart_slurmctld() {
  local pid i
  pid=$(cat "$SCALEGUARD_DEV_DIR/run/slurmctld.pid" 2>/dev/null) || pid=
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  slurmctld -f "$SLURM_CONF" || true
  for ((i = 0; i < 300; i++)); do [[ $(scontrol ping 2>/dev/null) == *'is UP'* ]] && break; sleep 0.1; done
  for ((i = 0; i < 600; i++)); do [ -z "$(sinfo -h -N -t unknown -o %N 2>/dev/null)" ] && return 0; sleep 0.1; done
  die "slurmctld did not come back with every node"
}
started=0 settings_saved=
cleanup() {
  local rc=$?
  # Our jobs only (a reused cluster may be someone's test fixture).
  [ -n "${SLURM_CONF:-}" ] && scancel --quiet --name=demo-gpt,demo-350m 2>/dev/null
  if [ -n "$settings_saved" ]; then
    cp "$settings_saved" "$SCALEGUARD_DEV_DIR/etc/job_submit_scaleguard.conf" && restart_slurmctld >/dev/null 2>&1
  fi
  [ "$started" = 1 ] && scripts/dev-cluster/down >/dev/null 2>&1
  [ "$rc" = 0 ] || echo "demo: FAILED (exit $rc); logs in $out" >&2
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if cluster_live; then
  say "demo: using the dev cluster already up in $SCALEGUARD_DEV_DIR"
  source "$SCALEGUARD_DEV_DIR/env.sh"
  settings=$SCALEGUARD_DEV_DIR/etc/job_submit_scaleguard.conf
  policy=$(sed -n 's/^policy=//p' "$settings")
  if ! grep -q '^audit_file *=' "$policy"; then
    say "demo: its policy has no decision log: running a copy with one, $out/decisions.jsonl"
    policy=$(demo_policy "$policy")
    cp "$settings" "$out/job_submit_scaleguard.conf.orig"
    settings_saved=$out/job_submit_scaleguard.conf.orig
    sed -i "s|^policy=.*|policy=$policy|" "$settings"
    restart_slurmctld
  fi
else
  started=1
  policy=$(demo_policy "$(realpath "${SCALEGUARD_POLICY:-configs/policy.ini}")")
  SCALEGUARD_POLICY=$policy scripts/dev-cluster/up
  source "$SCALEGUARD_DEV_DIR/env.sh"
fi
[ -n "$(scontrol show config | sed -n 's/^JobSubmitPlugins *= *//p' | grep scaleguard)" ] ||
  die "the dev cluster runs without job_submit/scaleguard"
grep -q 'scaleguard\.so' "$SCALEGUARD_DEV_DIR/etc/plugstack.conf" ||
  die "the dev cluster has no scaleguard SPANK plugin (--train-* options): build target scaleguard_spank"
start_time=$(date +%Y-%m-%dT%H:%M:%S)

# Waits (bounded: a hang guard) until job $1 reaches one of the states in $2 (a|b|c).
wait_state() {
  local id=$1 want=$2 limit=$((${3:-300} * 5)) i state=
  for ((i = 0; i < limit; i++)); do
    state=$(squeue -h -j "$id" -t all -o %T 2>/dev/null)
    [[ $state =~ ^($want)$ ]] && return 0
    case $state in FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL)
      tail -n 30 "$out/train.log" >&2 2>/dev/null; die "job $id ended $state" ;;
    esac
    sleep 0.2
  done
  die "job $id is $state after ${3:-300} s, expected $want"
}
show_sbatch() { printf '$ sbatch'; printf ' %q' "$@"; printf '\n'; }
# sbatch --parsable's output: the plugin's lines as they are, the bare job id as sbatch says it.
show_submitted() { sed -E 's/^([0-9]+)$/Submitted batch job \1/' <<<"$1"; }

# --- 1 and 2 -------------------------------------------------------------------------------
intent=(--train-model=350M --train-tokens=1.2B)
step "1. A 350M model asking for 8 GPUs: refused, one GPU is cheaper"
show_sbatch --gpus=8 "${intent[@]}" --wrap true
if msg=$(sbatch -J demo-350m --gpus=8 "${intent[@]}" --wrap true 2>&1); then
  say "$msg"; die "the 8-GPU job was accepted"
fi
say "$msg"
say; say "The same comparison from the CLI:"
"$build/cli/scaleguard" compare --model 350M --tokens 1.2B --instance p4d.24xlarge --gpus 8

step "2. The same training on 1 GPU: accepted"
show_sbatch --gpus=1 --time=12:00:00 "${intent[@]}" --wrap '...'
msg=$(sbatch --parsable -J demo-350m -o "$out/single.log" --gpus=1 --time=12:00:00 "${intent[@]}" \
  --wrap 'echo "plan in the job: strategy=$SCALEGUARD_STRATEGY gpus=$SCALEGUARD_GPUS"' 2>&1) ||
  { say "$msg"; die "the 1-GPU job was refused"; }
show_submitted "$msg"
single=$(grep -E '^[0-9]+$' <<<"$msg" | tail -n 1)
wait_state "$single" COMPLETED 60
cat "$out/single.log"

# --- 3 -------------------------------------------------------------------------------------
step "3. A 7B model on 2 nodes x 8 GPUs: accepted with a multi-node plan, trains with checkpoints"
mapfile -t corpus < <(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.*')
[ "${#corpus[@]}" -gt 0 ] || die "no fortunes corpus in /usr/share/games/fortunes (package fortunes)"
"$build/runner/scaleguard-run" prep --input "${corpus[@]}" --output "$out/fortunes.bin"
ckpt=$out/ckpt
wide=(-N2 --ntasks-per-node=1 --gpus-per-node=8 --time=7-00:00:00
      --train-model=llama2-7b --train-tokens=300B --train-ckpt-dir="$ckpt")
# The plan is for 16 GPUs (scontrol shows it); this CPU-only machine trains a small GPT in
# its place on one rank per node, data parallel, so the command line sets the layout.
train=(--data "$out/fortunes.bin" --steps "$steps"
       --ckpt-every "$every" --metrics "$out/metrics.jsonl" --threads 1
       --strategy ddp --dp 0 --tp 1 --pp 1 --zero 0 --micro-batch 0)
say "The plan is for 16 A100s; this machine has CPUs only, so the job trains a small GPT in its"
say "place: one rank per node, data parallel (its command line sets that layout)."
show_sbatch "${wide[@]}" scripts/sbatch/train.sbatch configs/examples/gpt-small.ini "$ckpt" ...
msg=$(sbatch --parsable -J demo-gpt -o "$out/train.log" "${wide[@]}" \
  scripts/sbatch/train.sbatch configs/examples/gpt-small.ini "$ckpt" "${train[@]}" 2>&1) || { say "$msg"; die "the 7B job was refused"; }
show_submitted "$msg"
job=$(grep -E '^[0-9]+$' <<<"$msg" | tail -n 1)
say; say "\$ scontrol show job $job   (the plan and what the plugin changed)"
scontrol show job "$job" | grep -E 'JobId=|Requeue=|NumNodes=|TRES=|Comment=' | sed 's/^ */  /'
wait_state "$job" RUNNING 120

# --- 4 -------------------------------------------------------------------------------------
step "4. Preempted: USR1 to the batch shell -> checkpoint, requeue, resume"
for ((i = 0; i < 1500; i++)); do
  [ -s "$ckpt/latest" ] && break
  [ "$(squeue -h -j "$job" -o %T)" = RUNNING ] ||
    { tail -n 30 "$out/train.log" >&2; die "job $job stopped before its first checkpoint"; }
  sleep 0.2
done
[ -s "$ckpt/latest" ] || { tail -n 30 "$out/train.log" >&2; die "no checkpoint in $ckpt after 300 s"; }
say "checkpoint on disk: $ckpt/$(cat "$ckpt/latest")"
say "\$ scancel --signal=USR1 --batch $job"
scancel --signal=USR1 --batch "$job"
# The batch script requeues the job; Slurm holds a requeued job back for its requeue delay
# (cred_expire, 120 s by default). Start it 2 s on instead: a slurmd refuses a job relaunched
# within the second it killed the job ("already killed": its credential counts as revoked).
for ((i = 0; i < 600; i++)); do
  state=$(squeue -h -j "$job" -t all -o %T)
  [ "$state" = PENDING ] && scontrol update jobid="$job" StartTime=now+2 2>/dev/null && break
  [ "$state" = RUNNING ] || [ "$state" = COMPLETING ] || [ "$state" = REQUEUED ] ||
    { tail -n 30 "$out/train.log" >&2; die "job $job is $state instead of requeued"; }
  sleep 0.2
done
[ "$i" -lt 600 ] || { tail -n 30 "$out/train.log" >&2; die "job $job was not requeued"; }
say "job $job requeued (restarts: $(scontrol show job "$job" | grep -o 'Restarts=[0-9]*' | cut -d= -f2))"
wait_state "$job" COMPLETED 600
grep -E 'train.sbatch:|resum|stop requested|done:' "$out/train.log" | sed 's/^/  /'
say "final metrics: $(tail -n 1 "$out/metrics.jsonl")"

# --- 5 -------------------------------------------------------------------------------------
step "5. The report: GPU-hours, cost and waste of these jobs (sacct), the refusal and what it saved"
config=$(scontrol show config)   # captured: grep -q would cut the pipe (pipefail)
grep -Eq '^AccountingStorageType += accounting_storage/slurmdbd' <<<"$config" ||
  die "the dev cluster has no accounting (slurmdbd): no report"
# Job records reach slurmdbd asynchronously: wait until the training job's last run is there.
for ((i = 0; i < 300; i++)); do
  [ "$(sacct -n -X -P -j "$job" -o State 2>/dev/null | tail -n 1)" = COMPLETED ] && break
  sleep 0.2
done
say "Waste: failed runs whole, interrupted runs back to their last checkpoint. The preempted run"
say "saved at the signal (its step exited 85, which sacct records), so none of it is waste."
say "Decisions: from job_submit/scaleguard's log (the policy's audit_file): step 1's refusal and"
say "the GPU-hours and dollars it avoided."
say
report=("$build/cli/scaleguard" report --policy "$policy" --since "$start_time"
        --until "$(date -d '+1 sec' +%Y-%m-%dT%H:%M:%S)")
"${report[@]}"
"${report[@]}" --format html --output "$out/report.html"
say; say "HTML report: $out/report.html"
say "logs and checkpoints: $out"
echo; echo "demo: done"
