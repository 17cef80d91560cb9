#!/usr/bin/env bash
# Issue 38 item 1: how often a run checkpoints, counted as a new user runs it. With the
# defaults (`--ckpt-every auto`: Daly's interval from the measured cost of a save and the
# catalog's node MTBF of 6300 h; async saves) a 20-step run of the default small model on two
# ranks commits at most a few checkpoints, not one per step: the first save (at step 1, to
# measure its cost) and the end. Main before this change committed all 20 async (the
# measured time never reached the interval clock on the async path, so the interval stayed 0)
# and 2 sync. Rank 0 says the interval it chose and why. A fixed `--ckpt-every 5` commits
# exactly steps 5, 10, 15 and 20, async and sync. No timing is asserted: a save of this model
# costs milliseconds against an interval of minutes.
source "$(dirname "$0")/lib.sh"
fortunes_tokens tok.bin

# commits LOG: the steps whose checkpoint committed, one line.
commits() { sed -nE 's/.*checkpoint: step-0*([0-9]+) committed:.*/\1/p' "$1" | tr '\n' ' ' | sed 's/ $//'; }

for mode in on off; do
  mpi 2 train --verbose --data tok.bin --steps 20 --ckpt-dir "ck-$mode" --ckpt-async "$mode" 2> "auto-$mode.log" ||
    { cat "auto-$mode.log"; fail "defaults, --ckpt-async $mode: the run failed"; }
  got=$(commits "auto-$mode.log")
  n=$(wc -w <<< "$got")
  echo "defaults, --ckpt-async $mode: $n commits (steps $got)"
  [ "$n" -ge 1 ] && [ "$n" -le 3 ] ||
    { cat "auto-$mode.log"; fail "defaults, --ckpt-async $mode: $n checkpoints in 20 steps (steps $got), expected at most 3"; }
  [ "${got##* }" = 20 ] || fail "defaults, --ckpt-async $mode: the last step (20) was not saved (steps $got)"
  grep -qE "checkpoint: directory ck-$mode, every auto \(Daly from the measured cost of a save" "auto-$mode.log" ||
    { cat "auto-$mode.log"; fail "no start-up line saying how the interval is chosen"; }
  [ "$mode" = on ] && why='cost = stall [0-9.]+ m?s \+ I/O contention [0-9.]+ m?s over [0-9]+ steps? \(async\)' ||
    why='cost = the save \(sync\)'
  line=$(grep -E "checkpoint: interval auto: next save [0-9.e+]+ m?s after this one started.*Daly\(cost [0-9.e+-]+ m?s, job MTBF 6300 h\)" \
           "auto-$mode.log") || { cat "auto-$mode.log"; fail "--ckpt-async $mode: no line stating the interval and why"; }
  grep -qE "$why" <<< "$line" || fail "--ckpt-async $mode: the interval line does not say what the cost is: $line"
  echo "  $line"
done

for mode in on off; do
  mpi 2 train --verbose --data tok.bin --steps 20 --ckpt-dir "five-$mode" --ckpt-async "$mode" --ckpt-every 5 \
    2> "five-$mode.log" || { cat "five-$mode.log"; fail "--ckpt-every 5 --ckpt-async $mode: the run failed"; }
  got=$(commits "five-$mode.log")
  [ "$got" = "5 10 15 20" ] || { cat "five-$mode.log"; fail "--ckpt-every 5 --ckpt-async $mode committed steps '$got'"; }
  grep -qF "every --ckpt-every 5 (fixed: every step divisible by 5)" "five-$mode.log" ||
    fail "--ckpt-every 5: the start-up line does not say the interval is fixed"
  ! grep -q "interval auto:" "five-$mode.log" || fail "--ckpt-every 5 logged an auto interval"
  echo "--ckpt-every 5 --ckpt-async $mode: steps $got"
done
