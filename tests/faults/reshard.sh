# A checkpoint written by N ranks loads on M ranks by global shape and slices.
. "$(dirname "$0")/lib.sh"

expect_rc 0 ranks 2 save --dir "$WORK/from2" --steps 3
expect_rc 0 ranks 1 load --dir "$WORK/from2" --expect-step 3
expect_log "LOADED step 3 on 1 rank(s), written by 2 rank(s)"
expect_rc 0 ranks 3 load --dir "$WORK/from2" --expect-step 3
expect_log "LOADED step 3 on 3 rank(s), written by 2 rank(s)"

expect_rc 0 ranks 1 save --dir "$WORK/from1" --steps 7
expect_rc 0 ranks 2 load --dir "$WORK/from1" --expect-step 7
expect_log "LOADED step 7 on 2 rank(s), written by 1 rank(s)"
echo PASS
