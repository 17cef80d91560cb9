# Checkpoint interval rules (steps, minutes, auto = Daly) and the collective agreement on a
# time-based decision, on 2 real ranks.
. "$(dirname "$0")/lib.sh"
expect_rc 0 ranks 2 interval
expect_log "INTERVAL OK"
echo PASS
