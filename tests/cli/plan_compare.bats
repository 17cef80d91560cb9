#!/usr/bin/env bats
# `scaleguard plan` and `scaleguard compare`: plans in text and JSON, and every kind of bad
# input a user can type: usage errors exit 2, a model that cannot fit exits 1.

load helpers

@test "plan: the seed's 350M on one A100 is a single-GPU plan (text and JSON)" {
  run sg plan --model 350M --single-gpu-hours 11 --instance p4d.24xlarge --gpus 1
  assert_exit 0
  assert_output --partial "strategy single: 1 GPU(s) on 1 node(s)"
  run sg plan --model 350M --single-gpu-hours 11 --instance p4d.24xlarge --gpus 8 --json
  assert_exit 0
  [ "$(jq -r .strategy <<<"$output")" = ddp ]
  [ "$(jq -r .gpus <<<"$output")" = 8 ]
  jq -e '.wall_hours > 1 and .wall_hours < 2 and .fits' <<<"$output"
}

@test "plan: a pinned non-power-of-two micro-batch is used" {
  run sg plan --model 350M --tokens 3B --instance p4d.24xlarge --gpus 8 --micro-batch 3 --json
  assert_exit 0
  [ "$(jq -r .micro_batch <<<"$output")" = 3 ]
}

@test "plan: an interleaved pipeline is an option that must be asked for" {
  run --separate-stderr sg plan --model gpt3-175b --tokens 300B --instance p4de.24xlarge --gpus 512 --tp 8 --pp 8 --json
  assert_exit 0
  jq -e '.interleave == 1' <<<"$output"
  plain=$(jq .bubble_fraction <<<"$output")
  run --separate-stderr sg plan --model gpt3-175b --tokens 300B --instance p4de.24xlarge --gpus 512 --tp 8 --pp 8 --interleave 2 --json
  assert_exit 0
  jq -e --argjson plain "$plain" '.interleave == 2 and .bubble_fraction < $plain' <<<"$output"
  run sg plan --model gpt3-175b --tokens 300B --instance p4de.24xlarge --gpus 512 --tp 8 --pp 8 --interleave 5
  assert_runtime_error "an interleaved schedule needs pp > 1"
  run sg plan --model gpt3-175b --tokens 300B --instance p4de.24xlarge --gpus 512 --interleave 0
  assert_usage_error "--interleave"
}

@test "plan: attention=flash drops the score matrices, so 13B on 4 H100s needs no recomputation" {
  run --separate-stderr sg plan --model 13B --tokens 100B --instance p5.48xlarge --gpus 4 --json
  assert_exit 0
  jq -e '.recompute != "none"' <<<"$output"
  run --separate-stderr sg plan --model 13B,attention=flash --tokens 100B --instance p5.48xlarge --gpus 4 --json
  assert_exit 0
  jq -e '.recompute == "none"' <<<"$output"
  run sg plan --model 13B,attention=fast --tokens 100B --instance p5.48xlarge --gpus 4
  assert_usage_error "unknown attention 'fast'"
}

@test "plan: a model that cannot fit exits 1 and says how much memory it needs (JSON too)" {
  run sg plan --model 70B --tokens 1B --instance p4d.24xlarge --gpus 1
  assert_runtime_error "does not fit 1 GPU(s) of A100-40GB"
  run --separate-stderr sg plan --model 70B --tokens 1B --instance p4d.24xlarge --gpus 1 --json
  assert_exit 1
  jq -e '.fits == false and (.error | contains("does not fit"))' <<<"$output"
}

@test "plan: failures outpacing progress are said as such" {
  run sg plan --model 350M --tokens 3B --instance p4d.24xlarge --gpus 8 --mtbf-hours 0.05
  assert_runtime_error "failures outpace progress"
  refute_output --partial "does not fit"
}

@test "plan: bad values are usage errors that name the option" {
  run sg plan --model 350M --tokens 1B --policy /nonexistent.ini
  assert_usage_error "cannot open"
  run sg plan --model 350M --tokens 1B --partition nowhere
  assert_usage_error "partition 'nowhere' is not in the policy"
  run sg plan --model 350M --tokens 1B --instance p4d.24xlarge --partition gpu-od
  assert_usage_error "--partition needs a policy"
  run sg plan --instance p4d.24xlarge --tokens 1B
  assert_usage_error "'--model' is required"
  run sg plan --model 350M --instance p4d.24xlarge
  assert_usage_error "give --tokens or --single-gpu-hours"
  run sg plan --model 350M --tokens 1B --single-gpu-hours 3 --instance p4d.24xlarge
  assert_usage_error "not both"
  run sg plan --model 350M --tokens lots --instance p4d.24xlarge
  assert_usage_error "--tokens"
  run sg plan --model 1e30 --tokens 1B --instance p4d.24xlarge
  assert_usage_error "absurdly large"
  run sg plan --model layers=0,hidden=64,heads=1 --tokens 1B --instance p4d.24xlarge
  assert_usage_error "model"
  run sg plan --model 350M --tokens 1B --instance p4d.24xlarg
  assert_usage_error "did you mean 'p4d.24xlarge'"
  run sg plan --model 350M --tokens 1B --gpu-type A100-80GB --instance p5.48xlarge
  assert_usage_error "not A100-80GB"
  for bad in 0 -1 1.5 1e9 abc ""; do
    run sg plan --model 350M --tokens 1B --instance p4d.24xlarge --gpus "$bad"
    assert_usage_error "--gpus"
  done
  run sg plan --model 350M --tokens 1B --instance p4d.24xlarge --zero 4
  assert_usage_error "not a ZeRO stage"
  run sg plan --model 350M --tokens 1B --instance p4d.24xlarge --max-zero-stage 1 --zero 3
  assert_usage_error "--zero=3 is above --max-zero-stage 1"
  run sg plan --model 350M --tokens 1B --instance p4d.24xlarge --max-zero-stage 4
  assert_usage_error "--max-zero-stage=4"
  run sg plan --model 350M --tokens 1B --instance p4d.24xlarge --recompute sometimes
  assert_usage_error "sometimes"
  run sg plan --model 350M --tokens 1B --instance p4d.24xlarge --strategy magic
  assert_usage_error "magic"
  run sg plan --model 350M --tokens 1B --instance p4d.24xlarge --tp 2 --pp 2 --dp 2 --gpus 4
  assert_usage_error "--tp x --pp x --dp != --gpus"
  run sg plan --model 350M --tokens 1B --instance p4d.24xlarge --catalog /nonexistent.ini
  assert_usage_error "cannot open"
}

@test "plan: evaluations add their forward passes to the run's hours, not to its step" {
  run sg plan --model 1B --tokens 20B --instance p4d.24xlarge --gpus 8 --json
  assert_exit 0
  local base=$output
  run sg plan --model 1B --tokens 20B --instance p4d.24xlarge --gpus 8 --eval-every 100 --eval-tokens 50M --json
  assert_exit 0
  jq -e --argjson b "$base" '.evaluations > 0 and .eval_hours > 0 and .step_seconds == $b.step_seconds
    and (.train_hours - $b.train_hours - .eval_hours | fabs) < 1e-3 and .gpu_hours > $b.gpu_hours' <<<"$output"
  run sg plan --model 1B --tokens 20B --instance p4d.24xlarge --gpus 8 --eval-every 100 --eval-tokens 50M
  assert_output --regexp "evaluation: [0-9]+ forward passes, [0-9.]+ h of the [0-9.]+ h before failures"
  run sg plan --model 1B --tokens 20B --instance p4d.24xlarge --eval-every 100
  assert_usage_error "--eval-every and --eval-tokens go together"
  run sg plan --model 1B --tokens 20B --instance p4d.24xlarge --eval-every 0 --eval-tokens 1M
  assert_usage_error "--eval-every"
  run sg plan --model 1B --tokens 20B --instance p4d.24xlarge --eval-every 10 --eval-tokens -5
  assert_usage_error "--eval-tokens"
}

@test "plan: ZeRO stages up to what scaleguard-run implements (3), fewer with --max-zero-stage" {
  # 13B on 4 H100s: ZeRO-1 does not fit, ZeRO-3 does, and the plan says why it beats pipelining.
  run sg plan --model 13B --tokens 10B --gpu-type H100 --gpus 4
  assert_exit 0
  assert_output --partial "strategy zero"
  assert_output --partial "zero=3"
  assert_output --partial "why ZeRO-3: weights, gradients and optimizer state at 1/4"
  assert_output --partial "vs pipeline"
  run sg plan --model 13B --tokens 10B --gpu-type H100 --gpus 4 --zero 3
  assert_exit 0
  assert_output --partial "zero=3"
  run sg plan --model 13B --tokens 10B --gpu-type H100 --gpus 4 --max-zero-stage 1
  assert_exit 0
  assert_output --partial "strategy pipeline"
  assert_output --partial "ZeRO-1 at most, max_zero_stage"
  refute_output --partial "zero=3"
}

@test "compare: one GPU vs the distributed plan side by side (seed: 1B at 40 h on V100s)" {
  run sg compare --model 1B,optimizer=sgd --single-gpu-hours 40 --instance p3.8xlarge --gpus 4
  assert_exit 0
  assert_output --partial "1 GPU"
  assert_output --partial "4 GPUs"
  assert_output --partial "GPU-hours"
  run sg compare --model 1B,optimizer=sgd --single-gpu-hours 40 --instance p3.8xlarge --gpus 4 --json
  assert_exit 0
  jq -e . <<<"$output" >/dev/null
}

@test "compare: the plan is the answer; the per-step view of the seed's 100M is a labelled second scenario" {
  run sg compare --model 100M --single-gpu-hours 10h --instance p3.8xlarge --gpus 2 --json
  assert_exit 0
  # The headline is the plan that plan and decide make (issue 37: one answer): the default
  # batch accumulates micro-batches per all-reduce and scales ~2x.
  jq -e '.basis == "plan" and .speedup > 1.9' <<<"$output"
  jq -e '.distributed.micro_batches > 1 and .distributed.batch_source == "law"' <<<"$output"
  # The user's "10 h on one GPU" is the plan's one-GPU run, to the second.
  jq -e '(.single.train_hours - 10 | fabs) < 1e-6' <<<"$output"
  # Per step, as `scaleguard probe` and the seed's micro-benchmark measure it (every step
  # all-reduced): a second scenario, labelled, with its own speedup.
  jq -e '.second_scenario.speedup < 1.95 and .second_scenario.speedup > 1.5' <<<"$output"
  jq -e '.second_scenario.global_batch == .distributed.dp * .second_scenario.micro_batch' <<<"$output"
  jq -e '.second_scenario.what | contains("per step")' <<<"$output"
  run sg compare --model 100M --single-gpu-hours 10h --instance p3.8xlarge --gpus 2
  assert_output --partial "Second scenario, not the plan: per step, as scaleguard probe measures it"
  assert_output --partial "global batch 128 sequences, as plan and decide use it"
  # Two single-GPU instances (10 Gbit/s between them): per step the doubling barely pays.
  run sg compare --model 100M --single-gpu-hours 10h --instance p3.2xlarge --gpus 2 --json
  jq -e '.second_scenario.speedup < 1.5' <<<"$output"
  # A pinned global batch is the user's own: compared as given, no second scenario.
  run sg compare --model 100M --single-gpu-hours 10h --instance p3.8xlarge --gpus 2 --global-batch 4 --json
  jq -e '.basis == "plan" and (has("second_scenario") | not)' <<<"$output"
}

@test "compare: bad input is clear" {
  run sg compare --model 350M --tokens 1B --instance p4d.24xlarge --gpus 1
  assert_usage_error "nothing to compare on one GPU"
  run sg compare --model 70B --tokens 1B --instance p4d.24xlarge --gpus 8
  assert_runtime_error "does not fit"
  run sg compare --model 350M --tokens 1B --gpu-type B300
  assert_usage_error "unknown GPU type 'B300'"
  run sg compare --model nonsense-model --tokens 1B --instance p4d.24xlarge --gpus 2
  assert_usage_error "nonsense-model"
}

# Issue 37: plans a practitioner would run.
@test "plan: the global batch asked is honoured (llama3-8b, 15T tokens, 1024 sequences on p5)" {
  run --separate-stderr sg plan --model llama3-8b --tokens 15T --instance p5.48xlarge --global-batch 1024 --json
  assert_exit 0
  jq -e '.global_batch == 1024 and .dp * .micro_batch * .micro_batches == 1024 and .dp <= 1024' <<<"$output"
  jq -e '.batch_source == "given" and .gpus <= 8192' <<<"$output"
  run sg plan --model llama3-8b --tokens 15T --instance p5.48xlarge --global-batch 1024
  assert_output --partial "as asked (--global-batch)"
  assert_output --partial "more GPUs than the batch can use are not a speed-up"
  refute_output --partial "inf"
  run sg plan --model llama3-8b --tokens 15T --instance p5.48xlarge --global-batch 16 --gpus 8192
  assert_runtime_error "more than the global batch of 16 sequences can use"
}

@test "plan: llama2-7b on 2T tokens gets a batch near 4M tokens and a GPU count a practitioner would pick" {
  run --separate-stderr sg plan --model llama2-7b --tokens 2T --instance p4de.24xlarge --json
  assert_exit 0
  # Meta: 4M-token batches, 184,320 A100-80GB GPU-hours for Llama 2 7B.
  jq -e '.global_batch * 4096 >= 3.5e6 and .global_batch * 4096 <= 4.5e6 and .batch_source == "law"' <<<"$output"
  jq -e '.gpus >= 128 and .gpus <= 2048 and .gpu_hours > 150000 and .gpu_hours < 250000' <<<"$output"
  run sg plan --model llama2-7b --tokens 2T --instance p4de.24xlarge
  assert_output --partial "DeepSeek LLM's batch law"
  assert_output --partial "the GPU count stops here because"
}

@test "plan: with a policy the plan stays inside the partition (max_nodes) and says why it stopped" {
  for args in "--policy configs/policy.ini" "--policy configs/policy.ini --instance p4d.24xlarge" ""; do
    # shellcheck disable=SC2086
    run --separate-stderr sg plan --model 7B --tokens 40B $args --json
    assert_exit 0
    jq -e '.nodes <= 2 and .partition == "gpu-od"' <<<"$output"
  done
  run sg plan --model 7B --tokens 40B --policy configs/policy.ini
  assert_output --partial "partition gpu-od"
  assert_output --partial "max_nodes"
  assert_output --partial "requeued segments"
  SCALEGUARD_POLICY=configs/policy.ini run --separate-stderr sg plan --model 7B --tokens 40B --instance p4d.24xlarge --json
  jq -e '.nodes <= 2' <<<"$output"
  run sg plan --model 7B --tokens 40B --policy configs/policy.ini --gpus 64
  assert_usage_error "more than partition gpu-od allows: 2 node(s) x 8 GPUs"
  run sg plan --model 7B --tokens 40B --policy configs/policy.ini --instance p5.48xlarge
  assert_usage_error "partition gpu-od has p4d.24xlarge"
  run --separate-stderr sg plan --model 7B --tokens 40B --policy configs/policy.ini --partition gpu-h100 --json
  assert_exit 0
  jq -e '.partition == "gpu-h100"' <<<"$output"
  # 70B cannot fit 2 nodes of A100-40GB: the error says what the cluster allows.
  run sg plan --model 70B --tokens 40B --policy configs/policy.ini
  assert_runtime_error "max_nodes"
}

@test "decide, plan and compare give one answer for the same job and batch" {
  run --separate-stderr sg decide --gpus 16 --nodes 2 --time 7-00:00:00 --train-model 7B --train-tokens 40B --json
  local decided=$output
  run --separate-stderr sg plan --model 7B --tokens 40B --gpus 16 --json
  assert_exit 0
  jq -e --argjson d "$decided" '.gpu_hours == $d.plan.gpu_hours and .wall_hours == $d.plan.wall_hours
    and .cost_usd.on_demand == $d.plan.cost_usd.on_demand and .global_batch == $d.plan.global_batch' <<<"$output"
  run --separate-stderr sg compare --model 7B --tokens 40B --gpus 16 --json
  assert_exit 0
  jq -e --argjson d "$decided" '.distributed.gpu_hours == $d.plan.gpu_hours and .basis == "plan"' <<<"$output"
}

@test "plan: a catalog without a spot price says so (text and JSON), never inf or a silent null" {
  sed 's/^spot = 9.83 .*$//' configs/catalog.ini >"$BATS_TEST_TMPDIR/catalog.ini"
  run sg plan --model 350M --tokens 3B --instance p4d.24xlarge --gpus 8 --catalog "$BATS_TEST_TMPDIR/catalog.ini"
  assert_exit 0
  assert_output --partial "no spot price"
  refute_output --partial "inf"
  run --separate-stderr sg plan --model 350M --tokens 3B --instance p4d.24xlarge --gpus 8 --catalog "$BATS_TEST_TMPDIR/catalog.ini" --json
  jq -e '.spot_note == "no spot price"' <<<"$output"
  run sg compare --model 350M --tokens 3B --instance p4d.24xlarge --gpus 8 --catalog "$BATS_TEST_TMPDIR/catalog.ini"
  assert_output --partial "no spot price"
  refute_output --partial "inf"
}
