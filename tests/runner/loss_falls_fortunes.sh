#!/usr/bin/env bash
# The example GPT learns the fortunes corpus on 2 ranks: the loss falls from ~ln(256) =
# 5.5 to well below it.
source "$(dirname "$0")/lib.sh"
fortunes_tokens fortunes.bin
mpi 2 train --config "$SCALEGUARD_SOURCE_DIR/configs/examples/gpt-small.ini" --data fortunes.bin \
  --steps 120 --log-every 1 --metrics m.jsonl
first=$(grep -m1 '"step":1,' m.jsonl | sed -E 's/.*"loss":([^,]*).*/\1/')
last=$(final_field m.jsonl loss)
echo "loss: step 1 $first, step 120 $last"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(a > 5.0 && b < 0.65 * a) }' ||
  fail "loss did not fall well below its start ($first -> $last)"
grep -q '"comm_fraction"' m.jsonl || fail "metrics lack comm_fraction"
