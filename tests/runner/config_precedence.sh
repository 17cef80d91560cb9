#!/usr/bin/env bash
# Precedence: command line > SCALEGUARD_* environment > config file > defaults; the
# effective value shows up in rank 0's configuration dump and in what actually trains.
source "$(dirname "$0")/lib.sh"
printf 'model = mlp\nn-embd = 8\nhidden = 16\nseq-len = 16\nglobal-batch = 4\nsteps = 3\nlr = 0.01\n' > run.ini
train() { "$run" train --verbose --config run.ini --synthetic 5000 --threads 1 --log-every 1 --metrics m.jsonl "$@" 2> log; }
steps_done() { final_field m.jsonl step; }

train;                                         [ "$(steps_done)" = 3 ] || fail "file: steps $(steps_done), expected 3"
SCALEGUARD_STEPS=4 train;                      [ "$(steps_done)" = 4 ] || fail "env: steps $(steps_done), expected 4"
SCALEGUARD_STEPS=4 train --steps 5;            [ "$(steps_done)" = 5 ] || fail "cli: steps $(steps_done), expected 5"
grep -qx 'lr=0.01' log || fail "file value lr=0.01 not in the effective configuration"
grep -qx 'warmup=10' log || fail "default warmup=10 not in the effective configuration"
# The plan's variables map onto keys: SCALEGUARD_MICRO_BATCH -> micro-batch.
SCALEGUARD_MICRO_BATCH=2 train
grep -qx 'micro-batch=2' log || fail "SCALEGUARD_MICRO_BATCH not applied"
grep -q '2 micro-batches of 2 per rank' log || fail "micro-batch 2 did not give 2 accumulation steps"
# Variables that name no key (other parts' settings) are not errors.
SCALEGUARD_DEV_DIR=/nowhere SCALEGUARD_GPUS=8 train
echo "precedence ok"
