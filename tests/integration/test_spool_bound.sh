#!/usr/bin/env bash
# Bounded spools: with HETMEM_SPOOL_MAX=64K, a churn that writes far more
# stops at the bound; what was not written is counted, said on stderr and
# in the exit status (1), and the records written plus those counted are
# exactly the records of the same run without a bound. Values that are not
# a size of at least 64K are refused before the run.
set -u
. "$HETMEM_SRC/tests/integration/record_lib.sh"
cc_prog churn || exit 1
[ -f "$HETMEM_BUILD/lib/libhetmem_preload.so" ] || { echo "skip: libhetmem_preload.so not built"; exit 77; }
N=20000

# -- record: every allocation event of the unbounded run is written or counted
total() { # TRACE: all records in the trace
  "$H" trace info --json "$1" | jq '[.records[]] | add'
}
"$H" record -b none -o "$WORK/free.hmt" -- "$WORK/churn" 0 $N > /dev/null 2> "$WORK/free.err" ||
  bad "record without a bound: $(tail -2 "$WORK/free.err")"
HETMEM_SPOOL_MAX=64K "$H" record -b none -o "$WORK/cap.hmt" -- "$WORK/churn" 0 $N > /dev/null 2> "$WORK/cap.err"; rc=$?
all=$(total "$WORK/free.hmt"); kept=$(total "$WORK/cap.hmt")
lost=$(sed -n 's/.*spool limit of 65536 bytes reached (HETMEM_SPOOL_MAX): \([0-9]*\) records .*/\1/p' "$WORK/cap.err" | head -1)
echo "record: unbounded $all records; bounded $kept written, ${lost:-?} counted; exit $rc"
[ $rc = 1 ] || bad "record at the bound: exit $rc, want 1"
grep -q "^hetmem-preload\[[0-9]*\]: spool limit of 65536 bytes reached (HETMEM_SPOOL_MAX); later records are counted, not written$" \
  "$WORK/cap.err" && ok "record: the runtime said so when the bound was reached" || bad "no notice at the bound: $(cat "$WORK/cap.err")"
grep -q "^hetmem: $WORK/cap.hmt: incomplete: $lost records past the spool limit (HETMEM_SPOOL_MAX) were not written$" "$WORK/cap.err" &&
  ok "record: one line with the count" || bad "record: no final line: $(cat "$WORK/cap.err")"
[ "$all" -gt 20000 ] || bad "the unbounded trace has only $all records: the churn did not run"
# A spool record without payload is 40 bytes; site records carry their frames.
[ "$kept" -le $((65536 / 40)) ] || bad "$kept records written, more than 64 KiB of spool holds"
[ -n "$lost" ] && [ $((kept + lost)) = "$all" ] && ok "record: $kept written + $lost counted = $all, none lost in silence" ||
  bad "record: $kept written + ${lost:-?} counted != $all of the unbounded run"
"$H" trace info "$WORK/cap.hmt" > /dev/null && ok "the bounded trace reads" || bad "the bounded trace does not read"

# -- a process killed after the bound: its spool still says it is incomplete
# (the churn kills itself after its cycles, far past the bound, whatever
# the machine's load)
HETMEM_SPOOL_MAX=64K "$H" record -b none -o "$WORK/kill.hmt" -- "$WORK/churn" 0 $N 0 kill > /dev/null 2> "$WORK/kill.err"; rc=$?
[ $rc != 0 ] && grep -q "^hetmem: $WORK/kill.hmt: incomplete: 1 process reached the spool limit (HETMEM_SPOOL_MAX) and ended before counting the records not written (killed?)$" "$WORK/kill.err" &&
  ok "record: a process killed past the bound is reported (exit $rc)" || bad "killed past the bound: exit $rc: $(cat "$WORK/kill.err")"

# -- run: the report counts the placement records it lacks
echo '{"default": "0", "rules": []}' > "$WORK/p.json"
"$H" run --placement "$WORK/p.json" --report "$WORK/free.json" -- "$WORK/churn" 0 $N > /dev/null 2> "$WORK/rfree.err" ||
  bad "run without a bound: $(tail -2 "$WORK/rfree.err")"
HETMEM_SPOOL_MAX=64K "$H" run --placement "$WORK/p.json" --report "$WORK/cap.json" -- "$WORK/churn" 0 $N > /dev/null 2> "$WORK/rcap.err"; rc=$?
pall=$(jq '[.sites[].placements] | add' "$WORK/free.json")
pkept=$(jq '[.sites[].placements] | add // 0' "$WORK/cap.json")
un=$(jq .unwritten_records "$WORK/cap.json")
echo "run: unbounded $pall placements; bounded $pkept, $un records counted; exit $rc"
[ $rc = 1 ] || bad "run at the bound: exit $rc, want 1"
grep -q "^hetmem: run: report incomplete: $un placement records past the spool limit (HETMEM_SPOOL_MAX) were not written$" "$WORK/rcap.err" &&
  ok "run: one line with the count" || bad "run: no final line: $(cat "$WORK/rcap.err")"
[ "$(jq .unwritten_records "$WORK/free.json")" = 0 ] && [ "$(jq .spool_limit_reached "$WORK/free.json")" = 0 ] ||
  bad "unbounded report: unwritten_records or spool_limit_reached not 0"
[ "$(jq .spool_limit_reached "$WORK/cap.json")" = 1 ] || bad "bounded report: spool_limit_reached $(jq .spool_limit_reached "$WORK/cap.json"), want 1"
[ "$pkept" -lt "$pall" ] && [ $((pkept + un)) -ge "$pall" ] && ok "run: $pkept placements + $un counted >= $pall" ||
  bad "run: $pkept placements + $un counted, unbounded $pall"

# -- values that are not a size of at least 64K
for v in 1e3 0.5M 4K ""; do
  [ -z "$v" ] && continue
  for c in "record -b none -o $WORK/x.hmt" "run --placement $WORK/p.json"; do
    HETMEM_SPOOL_MAX=$v "$H" $c -- /bin/true > /dev/null 2> "$WORK/err"; rc=$?
    [ $rc = 1 ] && [ "$(wc -l < "$WORK/err")" = 1 ] && grep -qF "hetmem: HETMEM_SPOOL_MAX=$v: not a size of at least 64K" "$WORK/err" &&
      ok "refused: $(cat "$WORK/err")" || bad "HETMEM_SPOOL_MAX=$v ${c%% *}: exit $rc: $(cat "$WORK/err")"
  done
done
exit $fail
