#!/usr/bin/env bash
# Bad input fails fast on every rank with a clear message from rank 0, never a hang:
# each case runs 2 real ranks under a timeout and checks both ranks' exit codes.
source "$(dirname "$0")/lib.sh"
"$run" prep --input /usr/share/games/fortunes/fortunes --output good.bin
small=(--model mlp --n-embd 8 --hidden 16 --seq-len 16 --global-batch 4 --steps 2 --threads 1 --quiet)

# expect_failure NAME PATTERN ARGS...: 2 ranks exit non-zero and stderr matches PATTERN.
expect_failure() {
  local name=$1 pattern=$2; shift 2
  rm -f rc.*
  local status=0
  mpi_rc 2 rc "$@" > "$name.log" 2>&1 || status=$?
  [ "$status" -ne 124 ] || fail "$name: timed out (hang)"
  [ "$status" -ne 0 ] || fail "$name: mpirun exited 0"
  for r in 0 1; do
    [ -f "rc.$r" ] || fail "$name: rank $r did not exit by itself"
    [ "$(cat "rc.$r")" -ne 0 ] || fail "$name: rank $r exited 0"
  done
  grep -qE "$pattern" "$name.log" || { cat "$name.log"; fail "$name: no message matching '$pattern'"; }
  echo "$name: ranks exited $(cat rc.0) $(cat rc.1): $(grep -m1 -E "$pattern" "$name.log")"
}

expect_failure missing "token file 'nope.bin': No such file" train --data nope.bin "${small[@]}"

head -c 1000 good.bin > truncated.bin
expect_failure truncated "token file 'truncated.bin' is truncated" train --data truncated.bin "${small[@]}"

# A header claiming 3-byte tokens, and a valid 2-byte-token file with a byte vocabulary.
/usr/bin/python3 - <<'PY'
import struct
body = open("good.bin", "rb").read()[32:]
open("width3.bin", "wb").write(b"SGTOKENS" + struct.pack("<IIQQ", 1, 3, len(body) // 3, 0) + body[: len(body) // 3 * 3])
open("width2.bin", "wb").write(b"SGTOKENS" + struct.pack("<IIQQ", 1, 2, len(body) // 2, 0) + body[: len(body) // 2 * 2])
PY
expect_failure width3 "token width 3 bytes; supported widths are 1 and 2" train --data width3.bin "${small[@]}"
expect_failure width2 "has 2-byte tokens but vocab-size is 256" train --data width2.bin "${small[@]}"

printf 'model = mlp\nsteps = 2\nlearning_rate = 0.1\n' > typo.ini
expect_failure unknown_key "typo.ini:3: unknown key 'learning_rate'" train --config typo.ini --data good.bin "${small[@]}"

# A rank-dependent override: rank 1 sees a different learning rate in its environment.
RANK_ENV='export SCALEGUARD_LR=0.00$((OMPI_COMM_WORLD_RANK + 1))' \
  expect_failure mismatch "configuration differs from rank 0: lr=0.002 \(rank 0: 0.001\)" \
  train --data good.bin "${small[@]}"

# The plan (as the SPANK plugin exports it) wants 4 data-parallel ranks; 2 were started.
SCALEGUARD_DP=4 expect_failure plan_world "the plan says dp=4 .* but 2 were launched" \
  train --data good.bin "${small[@]}"
SCALEGUARD_STRATEGY=pipeline SCALEGUARD_PP=2 expect_failure plan_strategy "pipeline parallel \\(pp=2\\) needs the gpt or llama model" \
  train --data good.bin "${small[@]}"
