#!/usr/bin/env bash
# ZeRO stage 1 shards the optimizer state: the bytes of AdamW state each rank holds
# (exp_avg + exp_avg_sq, as the runner measures its own buffers) shrink as 1/dp for
# dp = 1, 2, 4, up to the padding that makes each bucket divisible by dp; plain data
# parallel keeps the whole state on every rank.
source "$(dirname "$0")/lib.sh"
fortunes_tokens tokens.bin
args=(train --verbose --data tokens.bin --model gpt --n-embd 32 --n-layer 1 --seq-len 32 --steps 2 --global-batch 8
      --seed 7 --threads 1 --quiet)
state_bytes() { sed -nE 's/.*optimizer state ([0-9]+) bytes per rank.*/\1/p' "$1" | head -1; }
"$run" "${args[@]}" --zero 1 2> dp1.log
mpi 2 "${args[@]}" --zero 1 2> dp2.log
mpi 4 "${args[@]}" --zero 1 2> dp4.log
mpi 2 "${args[@]}" 2> ddp2.log
b1=$(state_bytes dp1.log) b2=$(state_bytes dp2.log) b4=$(state_bytes dp4.log) ddp=$(state_bytes ddp2.log)
[ -n "$b1" ] && [ -n "$b2" ] && [ -n "$b4" ] && [ -n "$ddp" ] || { cat dp1.log dp4.log; fail "no 'optimizer state N bytes per rank' line"; }
buckets=$(sed -nE 's/.* in ([0-9]+) buckets.*/\1/p' dp1.log | head -1)
echo "optimizer state bytes per rank: dp=1 $b1, dp=2 $b2, dp=4 $b4 (ZeRO-1); plain DP on 2 ranks $ddp; $buckets bucket(s)"
[ "$ddp" -eq "$b1" ] || fail "plain data parallel should hold the whole state ($b1), holds $ddp"
for dp in 2 4; do
  b=$(eval echo "\$b$dp")
  # dp x a shard = the bucket padded by at most dp-1 elements (4 bytes, exp_avg and exp_avg_sq).
  slack=$(( buckets * (dp - 1) * 8 ))
  [ $(( b * dp )) -ge "$b1" ] && [ $(( b * dp )) -le $(( b1 + slack )) ] ||
    fail "dp=$dp: $b bytes per rank is not 1/$dp of $b1 (+ padding <= $slack bytes in total)"
done
