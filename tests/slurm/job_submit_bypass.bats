#!/usr/bin/env bats
# The controller's judgement cannot be avoided from the client: no SPANK plugin on the
# submitting host, intent forged through a user's own SPANK plugin (data/forge_spank.c),
# through `sbatch --export` or the environment, and hostile values of every --train-* option.
# Each must end in a judged job or a clear refusal, with slurmctld alive afterwards.

load helpers

setup_file() {
  cluster_env
  resume_nodes   # an earlier test file may have provoked a drain
  export BP_TMP=$(user_dir)
  # Against the running Slurm's headers: a SPANK plugin must match the release that loads it.
  cc -shared -fPIC ${SCALEGUARD_SLURM_PREFIX:+-I"$SCALEGUARD_SLURM_PREFIX/include"} \
    -o "$BP_TMP/forge.so" "$BATS_TEST_DIRNAME/data/forge_spank.c"
  export NO_SPANK_CONF=$(client_conf "$BP_TMP/nospank" "")
  export FORGE_CONF=$(client_conf "$BP_TMP/forge" "required $BP_TMP/forge.so")
  # Only what slurmctld logs from here on concerns these tests.
  export LOG_FROM=$(( $(wc -l < "$SCALEGUARD_DEV_DIR/log/slurmctld.log") + 1 ))
}

teardown_file() {
  scancel --quiet --name=sg-bp 2>/dev/null || true
  rm -rf "$BP_TMP"
}

setup() {
  cluster_env
  cd "$BP_TMP"
  export FORGE_SPANK_DIR=$BP_TMP/entries.$BATS_TEST_NUMBER
  rm -rf "$FORGE_SPANK_DIR"; mkdir -p "$FORGE_SPANK_DIR"; chmod a+rx "$FORGE_SPANK_DIR"
}

# forge OPTION VALUE: the next submission through $FORGE_CONF carries
# _SLURM_SPANK_OPTION_scaleguard_OPTION=VALUE in its spank env, byte for byte.
forge() {
  printf '%s' "$2" > "$FORGE_SPANK_DIR/_SLURM_SPANK_OPTION_scaleguard_$1"
}

forged_sbatch() {
  SLURM_CONF=$FORGE_CONF sbatch -J sg-bp "$@"
}

@test "without the SPANK plugin on the client, the raw request is still judged" {
  run env SLURM_CONF="$NO_SPANK_CONF" sbatch -J sg-bp --gpus=8 --wrap true
  assert_failure
  assert_output --partial 'distributed_min_gpu_hours'
  run env SLURM_CONF="$NO_SPANK_CONF" srun -J sg-bp --gpus=8 true
  assert_failure
  assert_output --partial 'distributed_min_gpu_hours'
  run env SLURM_CONF="$NO_SPANK_CONF" sbatch -J sg-bp --gpus=8 --train-model=350M --wrap true
  assert_failure
  assert_output --partial 'unrecognized option'
}

@test "the non-root user with their own plugstack is judged the same way" {
  run as_user "$BP_TMP" env SLURM_CONF="$NO_SPANK_CONF" sbatch -J sg-bp --gpus=8 --wrap true
  assert_failure
  assert_output --partial 'distributed_min_gpu_hours'
}

@test "intent forged by a user's own SPANK plugin is judged like the real options" {
  forge train_model 350M
  forge train_tokens 1.2B
  run forged_sbatch --gpus=8 --wrap true
  assert_failure
  assert_output --regexp 'single GPU .* vs 8 GPUs .*: use 1 GPU'
  # A model that cannot fit is refused whatever the client claims elsewhere.
  forge train_model llama2-70b
  run forged_sbatch --gpus=1 --wrap true
  assert_failure
  assert_output --partial 'must_fit_memory'
}

@test "forged plan variables in the spank env do not replace the controller's plan" {
  forge train_model 350M
  forge train_tokens 1.2B
  printf 'hybrid' > "$FORGE_SPANK_DIR/SCALEGUARD_STRATEGY"
  printf '64' > "$FORGE_SPANK_DIR/SCALEGUARD_GPUS"
  run forged_sbatch --parsable -o "$BP_TMP/plan.out" --gpus=1 --time=12:00:00 \
    --wrap 'echo strategy=$SCALEGUARD_STRATEGY gpus=$SCALEGUARD_GPUS'
  assert_success
  job_id=$(parsed_job_id)
  run job_comment "$job_id"
  assert_output --regexp 'single gpus=1'
  run wait_job "$job_id"
  assert_output COMPLETED
  run cat "$BP_TMP/plan.out"
  assert_output 'strategy=single gpus=1'
}

@test "intent forged through sbatch --export or the environment is judged" {
  run sbatch -J sg-bp --gpus=8 \
    --export=ALL,_SLURM_SPANK_OPTION_scaleguard_train_model=350M,_SLURM_SPANK_OPTION_scaleguard_train_tokens=1.2B \
    --wrap true
  assert_failure
  assert_output --regexp '350M .*use 1 GPU'
  run env _SLURM_SPANK_OPTION_scaleguard_train_model=llama2-70b sbatch -J sg-bp --gpus=1 --wrap true
  assert_failure
  assert_output --partial 'must_fit_memory'
}

@test "the same option forged twice with different values is refused" {
  forge train_model 350M
  run env _SLURM_SPANK_OPTION_scaleguard_train_model=7B SLURM_CONF="$FORGE_CONF" \
    sbatch -J sg-bp --gpus=1 --wrap true
  assert_failure
  assert_output --partial 'given twice with different values'
}

# Submits, four at a time, one job per "OPTION VALUE-FILE" case with that forged value; each
# submission's output goes to VALUE-FILE.out.
submit_cases() {
  local option file n=0
  while read -r option file; do
    mkdir -p "$file.d"
    cp "$file" "$file.d/_SLURM_SPANK_OPTION_scaleguard_$option"
    FORGE_SPANK_DIR=$file.d forged_sbatch -H --gpus=1 --wrap true > "$file.out" 2>&1 &
    if (( ++n % 4 == 0 )); then wait; fi
  done
  wait
}

@test "hostile values of every option are refused naming the option; slurmctld stays up" {
  local dir=$BP_TMP/hostile cases=() i=0 option value
  mkdir -p "$dir"
  local values=("$(head -c 1048576 /dev/zero | tr '\0' 7)" '' $'7B\nSCALEGUARD_STRATEGY=hybrid'
                '7B=1;rm -rf /')
  for option in train_model train_tokens train_single_gpu_hours train_strategy train_deadline \
                train_ckpt_dir train_ckpt_interval train_eval_every train_eval_tokens; do
    for value in "${values[@]}"; do
      printf '%s' "$value" > "$dir/$i"; cases+=("$option $dir/$i"); i=$((i + 1))
    done
  done
  for value in $'\x1b[2J350M' '../../etc/passwd'; do
    printf '%s' "$value" > "$dir/$i"; cases+=("train_model $dir/$i"); i=$((i + 1))
  done
  for value in '/tmp/../etc' '../../etc/passwd' '/tmp/a;b'; do
    printf '%s' "$value" > "$dir/$i"; cases+=("train_ckpt_dir $dir/$i"); i=$((i + 1))
  done
  printf '%s' '-5' > "$dir/$i"; cases+=("train_ckpt_interval $dir/$i")
  printf '%s\n' "${cases[@]}" | submit_cases
  local case_ file
  for case_ in "${cases[@]}"; do
    read -r option file <<<"$case_"
    output=$(cat "$file.out")
    [[ $output == *"Submitted batch job"* ]] &&
      fail "--${option//_/-}=$(head -c 40 "$file" | od -c | head -n 2) was accepted: $output"
    assert_output --regexp "scaleguard: --${option//_/-}=.*\(accepted: "
    refute_output --partial $'\x1b'
  done
  assert_equal "${#cases[@]}" 42
  assert_slurmctld_alive
  run bash -c "tail -n +$LOG_FROM '$SCALEGUARD_DEV_DIR/log/slurmctld.log' | grep -cE 'fatal|Segmentation|double free|malloc\(\)'"
  assert_output 0
}

@test "checkpoint directories outside the policy's roots are refused" {
  forge train_ckpt_dir /etc/cron.d
  run forged_sbatch -H --gpus=1 --wrap true
  assert_failure
  assert_output --partial 'outside the allowed checkpoint roots'
  rm -f "$FORGE_SPANK_DIR"/*
  forge train_ckpt_dir /tmpfoo/ckpt
  run forged_sbatch -H --gpus=1 --wrap true
  assert_failure
  assert_output --partial 'outside the allowed checkpoint roots'
}
