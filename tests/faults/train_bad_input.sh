# Bad input to the trainer's checkpointing gives one clear error and exit 1, never a crash
# or a silent fresh start: another model's checkpoint, a checkpoint holding a tensor the
# model lacks (one rank and pipeline stages), another global batch, a directory the user
# cannot write, a bad --ckpt-every.
. "$(dirname "$0")/lib.sh"

# run NP ARGS...: scaleguard-run train on NP ranks, for expect_rc.
run() {
  local np=$1
  shift
  timeout 120 "$MPIEXEC" -np "$np" --oversubscribe --bind-to none "$SCALEGUARD_RUN" train "${MODEL[@]}" "$@"
}
# other KEY VALUE: MODEL with KEY's value replaced (an option may be given only once).
other() {
  local i
  for i in "${!MODEL[@]}"; do
    if [ "${MODEL[$i]}" = "$1" ]; then MODEL[$((i + 1))]=$2; fi
  done
}

expect_rc 0 run 2 --steps 3 --ckpt-dir "$WORK/ck"
expect_log "step-00000003 committed"

# Another model (wider embedding): refused by its config hash, with the model named.
saved=("${MODEL[@]}")
other --n-embd 48
expect_rc 1 run 2 --steps 6 --ckpt-dir "$WORK/ck"
MODEL=("${saved[@]}")
expect_log "checkpoint of model 'model=gpt vocab-size=256 seq-len=32 n-layer=1 n-head=2 n-embd=32 hidden=512 untied-head=false'"
expect_log "but this run's model has config hash"
expect_log "point --ckpt-dir at this model's checkpoints or start fresh"
[ -d "$WORK/ck/step-00000003" ] || fail "the refused checkpoint was touched"

# A checkpoint with the right config hash that holds a tensor the model lacks (a forged or
# mixed-up manifest): refused by name, on one rank and with pipeline stages, where each rank
# holds only its stage's parameters and the ranks must agree that no stage has it.
other --n-layer 2
expect_rc 0 run 1 --steps 3 --ckpt-dir "$WORK/two"
mkdir "$WORK/grafted"
expect_rc 0 ranks 1 graft --dir "$WORK/two" --out "$WORK/grafted" \
  --from params/blocks.1.ln1.weight --to params/blocks.7.ln1.weight
expect_rc 1 run 1 --steps 6 --ckpt-dir "$WORK/grafted"
expect_log "step-00000003: holds params/blocks.7.ln1.weight, which this model does not have"
expect_rc 1 run 2 --pp 2 --steps 6 --ckpt-dir "$WORK/grafted"
expect_log "step-00000003: holds params/blocks.7.ln1.weight, which this model does not have"
# Without the graft the same checkpoint resumes with pipeline stages.
expect_rc 0 run 2 --pp 2 --steps 4 --ckpt-dir "$WORK/two"
expect_log "resumed from step-00000003"
MODEL=("${saved[@]}")

# Another global batch would train on other samples: refused.
other --global-batch 16
expect_rc 1 run 1 --steps 6 --ckpt-dir "$WORK/ck"
MODEL=("${saved[@]}")
expect_log "which needs global-batch 8, not 16 (resume with the same global batch)"

# Directories the user cannot write (as user nobody): a missing one under a root-owned
# directory, and an existing root-owned one.
mkdir -p "$WORK/locked/existing"
chmod 755 "$WORK/locked" "$WORK/locked/existing"
expect_rc 1 setpriv --reuid=nobody --regid=nogroup --clear-groups \
  "$MPIEXEC" -np 1 "$SCALEGUARD_RUN" train "${MODEL[@]}" --steps 2 --ckpt-dir "$WORK/locked/new"
expect_log "cannot create checkpoint directory '$WORK/locked/new': Permission denied"
expect_rc 1 setpriv --reuid=nobody --regid=nogroup --clear-groups \
  "$MPIEXEC" -np 1 "$SCALEGUARD_RUN" train "${MODEL[@]}" --steps 2 --ckpt-dir "$WORK/locked/existing"
expect_log "checkpoint directory '$WORK/locked/existing' is not writable: Permission denied"

# Option values.
expect_rc 1 run 1 --steps 2 --ckpt-dir "$WORK/ck2" --ckpt-every 2.5
expect_log "ckpt-every: checkpoint interval '2.5' must be a whole number of steps (use N (steps), Nmin (minutes) or auto)"
expect_rc 1 run 1 --steps 2 --ckpt-dir "$WORK/ck2" --ckpt-on-error ignore
expect_log "ckpt-on-error must be stop or continue, not 'ignore'"
echo PASS
