#!/usr/bin/env bats
# `scaleguard decide`: the same decide() as job_submit/scaleguard, with its exit codes
# 0 accept/warn, 3 rewrite, 4 reject (1 config error, 2 usage error), on the shipped policy
# and the sample jobs in configs/examples/.

load helpers

decide_example() { sg decide --policy configs/policy.ini $(cat "configs/examples/$1.args") "${@:2}"; }

@test "decide: 350M on 8 GPUs is refused (4) with the single-vs-distributed comparison" {
  run decide_example 350m-8gpu
  assert_exit 4
  assert_line --regexp '^scaleguard: reject \[distributed_min_gpu_hours,single_gpu_max_hours\]: use single gpus=1 nodes=1 .* comm=0 ckpt=[0-9]+s$'
  assert_output --regexp 'single GPU [0-9.]+ h for ~\$[0-9,]+ on spot .* vs 8 GPUs [0-9.]+ h .*: use 1 GPU'
  assert_output --partial "Ask for instead: --gpus=1"
}

@test "decide: the same job on one GPU is accepted (0) with the plan in the environment" {
  run decide_example 350m-1gpu
  assert_exit 0
  assert_line --regexp '^scaleguard: accept: single gpus=1 nodes=1 .* comm=0 ckpt=[0-9]+s$'
  assert_output --partial "SCALEGUARD_STRATEGY=single"
}

@test "decide: a job whose time limit is too short is rewritten (3) with the new limit" {
  run decide_example 13b-4-h100
  assert_exit 3
  assert_output --partial "[time_limit_fits]"
  assert_output --regexp 'time_limit_min|--time=|time limit'
}

@test "decide: --json carries action, rules, summary with comm= and ckpt=, and the plan" {
  run --separate-stderr decide_example 350m-8gpu --json
  assert_exit 4
  jq -e '.action == "reject" and (.rules | length) == 2 and .plan.gpus == 8' <<<"$output"
  jq -e '.summary | test("comm=[0-9.]+ ckpt=[0-9]+s$")' <<<"$output"
  # An accepted job: the summary's ckpt= is the interval its environment carries.
  run --separate-stderr decide_example 350m-1gpu --json
  assert_exit 0
  ckpt=$(jq -r '.summary | capture("ckpt=(?<s>[0-9]+)s").s' <<<"$output")
  assert_equal "$ckpt" "$(jq -r '.env.SCALEGUARD_CKPT_INTERVAL_S' <<<"$output")"
}

@test "decide: every sample job gets a decision with a documented exit code" {
  for f in configs/examples/*.args; do
    run sg decide --policy configs/policy.ini $(cat "$f")
    assert_no_crash
    [[ " 0 3 4 " == *" $status "* ]] || fail "$f: exit $status: $output"
    assert_line --regexp '^scaleguard: (accept|warn|rewrite|reject)'
  done
}

@test "decide: bad input is a usage error (2) naming the option, never a crash" {
  run sg decide --gpus abc
  assert_usage_error "--gpus=abc: expected N or TYPE:N"
  run sg decide --gpus 8 --time soon
  assert_usage_error "--time: 'soon' is not a time"
  run sg decide --gpus 8 --nodes 4-2
  assert_usage_error "--nodes"
  run sg decide --gpus 8 --train-model 350M --train-tokens many
  assert_usage_error "--train-tokens"
  run sg decide --gpus 8 --train-model 350M --train-strategy fastest
  assert_usage_error "--train-strategy"
  run sg decide --gpus 8 --train-model 350M --train-ckpt-interval 0
  assert_usage_error "--train-ckpt-interval"
  run sg decide --gpus 8 --train-model 350M --train-eval-every 0 --train-eval-tokens 20M
  assert_usage_error "--train-eval-every"
  run sg decide --gpus 8 --train-model 350M --train-eval-every 100 --train-eval-tokens 0
  assert_usage_error "--train-eval-tokens"
  run sg decide --gpus 100000000
  assert_usage_error "out of range"
  for bad in "" "-1" "1e400" "nan" "inf" "$(head -c 3000 /dev/zero | tr '\0' 9)" $'8\n9'; do
    run sg decide --gpus "$bad" --time "$bad" --train-model "$bad"
    assert_no_crash
    (( status == 2 || status == 4 )) || fail "exit $status for '$bad': $output"
  done
}

@test "decide: an unusable model is a reject (4) that says why" {
  run sg decide --gpus 8 --train-model 999Q
  assert_exit 4
  assert_output --partial "'999Q' is not a count"
}

@test "decide: a missing or broken policy is a runtime error (1)" {
  run sg decide --policy /nonexistent/policy.ini --gpus 1
  assert_runtime_error "cannot open file"
  printf 'catalog = %s\n[rules]\nno_such_rule = 3\n' "$SCALEGUARD_SOURCE_DIR/configs/catalog.ini" > "$BATS_TEST_TMPDIR/p.ini"
  run sg decide --policy "$BATS_TEST_TMPDIR/p.ini" --gpus 1
  assert_runtime_error "p.ini:3"
}

@test "decide: --train-eval-every/--train-eval-tokens put the evaluations in the job's hours" {
  args=(--policy configs/policy.ini --gpus 1 --time 12:00:00 --train-model 350M --train-tokens 1.2B)
  run sg decide "${args[@]}"
  assert_exit 0
  run sg decide "${args[@]}" --train-eval-every 100 --train-eval-tokens 20M
  assert_exit 0  # a warning: the time limit no longer covers the plan
  assert_output --regexp '\([0-9]+ evaluations of 2e\+07 tokens: [0-9.]+ h of it\)'
  assert_output --partial "[time_limit_fits]"
  run sg decide "${args[@]}" --train-eval-every 100
  assert_exit 4
  assert_output --partial "--train-eval-every and --train-eval-tokens go together"
}
