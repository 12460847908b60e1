#!/usr/bin/env bash
# Allocation events are never dropped while the collector lives, however
# rarely it runs: with the collector asleep for seconds at a time (the
# test build's HETMEM_TEST_COLLECTOR_DELAY_MS), a single-threaded churn and
# eight threads allocating at once still leave a trace where every free
# matches an allocation and no allocation lands on a live one.
set -u
. "$HETMEM_SRC/tests/integration/record_lib.sh"
build_attr || exit 1
cc_prog churn || exit 1
cc_prog threads -pthread -fopenmp || exit 1
HOOKS="$HETMEM_BUILD/tests/lib/libhetmem_preload.so"
[ -f "$HOOKS" ] || { bad "no test-hooks preload at $HOOKS"; exit 1; }
if nm -D --defined-only "$HETMEM_BUILD/lib/libhetmem_preload.so" > /dev/null 2>&1 &&
   grep -q HETMEM_TEST_COLLECTOR_DELAY_MS "$HETMEM_BUILD/lib/libhetmem_preload.so"; then
  bad "the released preload library carries the test hook"
fi

starved() { # starved NAME CMD...: record CMD with the collector asleep 1.5 s per round
  local n=$1; shift
  HETMEM_PRELOAD="$HOOKS" HETMEM_TEST_COLLECTOR_DELAY_MS=1500 timeout 300 \
    "$H" record -b soft -F 200 -o "$WORK/$n.hmt" -- "$@" > /dev/null 2> "$WORK/$n.err" \
    || { bad "$n: record failed: $(tail -3 "$WORK/$n.err")"; return 1; }
  "$WORK/trace_attr" "$WORK/$n.hmt" > "$WORK/$n.attr" || { bad "$n: trace unreadable"; return 1; }
  grep -i "dropped" "$WORK/$n.err" && bad "$n: events dropped"
  local d; d=$(sed -n 's/.*event rings drained by their threads \([0-9]*\) times.*/\1/p' "$WORK/$n.err" | head -1)
  [ "${d:-0}" -gt 0 ] || { bad "$n: the event rings never filled (drained by their threads ${d:-?} times): the test proves nothing"; cat "$WORK/$n.err"; }
  read -r _ allocs _ frees < <(grep '^allocs' "$WORK/$n.attr")
  read -r _ unmatched _ reused < <(grep '^unmatched' "$WORK/$n.attr")
  echo "$n: allocs $allocs frees $frees unmatched $unmatched reused $reused, rings drained by their threads $d times"
  [ "$unmatched" = 0 ] && [ "$reused" = 0 ] || bad "$n: $unmatched frees without their allocation, $reused allocations over a live one"
  ALLOCS=$allocs FREES=$frees
}

N=60000
if starved churn "$WORK/churn" 0 $N; then
  # N cycles of one free and one malloc, and everything freed before exit.
  [ "$ALLOCS" -gt $N ] && [ "$FREES" = "$ALLOCS" ] && ok "churn: $ALLOCS allocations, $FREES frees, all matched" \
    || bad "churn: $ALLOCS allocations and $FREES frees, want equal counts over $N"
fi
if OMP_NUM_THREADS=4 starved threads "$WORK/threads" 3000; then
  [ "$ALLOCS" -gt 0 ] && [ "$ALLOCS" = "$FREES" ] && ok "threads: $ALLOCS allocations, $FREES frees, all matched" \
    || bad "threads: $ALLOCS allocations, $FREES frees"
fi

# A collector slow to finish at exit (its last round takes 3 s of its own
# CPU time, as on a loaded machine) is waited for while it moves: the exit
# once gave up on it after 2 s of wall time and lost the last records.
HETMEM_PRELOAD="$HOOKS" HETMEM_TEST_COLLECTOR_FINAL_CPU_MS=3000 HETMEM_VERBOSE=1 timeout 300 \
  "$H" record -b soft -F 200 -o "$WORK/slow.hmt" -- "$WORK/churn" 0 1000 > /dev/null 2> "$WORK/slow.err" \
  || bad "slow exit: record failed: $(tail -3 "$WORK/slow.err")"
grep -q "collector did not stop" "$WORK/slow.err" && bad "slow exit: $(grep "collector did not stop" "$WORK/slow.err")"
if "$WORK/trace_attr" "$WORK/slow.hmt" > "$WORK/slow.attr"; then
  read -r _ allocs _ frees < <(grep '^allocs' "$WORK/slow.attr")
  [ "${allocs:-0}" -gt 1000 ] && [ "$allocs" = "$frees" ] && grep -q "soft: back" "$WORK/slow.err" &&
    ok "slow exit: waited for the collector: $allocs allocations, $frees frees, its statistics written" ||
    bad "slow exit: $allocs allocations, $frees frees, statistics $(grep -c "soft: back" "$WORK/slow.err")"
else bad "slow exit: trace unreadable"; fi
exit $fail
