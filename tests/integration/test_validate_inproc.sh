#!/usr/bin/env bash
# hetmem validate --real records and runs the program through the recording
# API in its own process: the program's parent is the validate process
# itself (started by this script), never a `hetmem record` or `hetmem run`
# child, whatever path such a child would be started by. The program logs
# its parent's process id, that process's parent and its command line for
# every run, device runs and placement runs alike.
set -u
. "$HETMEM_SRC/tests/integration/record_lib.sh"
command -v jq >/dev/null || { echo "jq not installed"; exit 77; }
cc_prog parentlog || { echo "cannot compile"; exit 1; }
P="$WORK/parentlog"
LOG="$WORK/parents.log"
# Two devices named as --bind names them here (one memory node: both hold
# the data in the same memory; what is checked is who starts the runs).
jq '.name = "inproc-test" | .cores = 1 | .devices = [
      {"name": "ddr", "read_latency_ns": 90, "read_bandwidth_gbs": 20, "capacity": "1T"},
      {"name": "node0", "read_latency_ns": 250, "read_bandwidth_gbs": 4, "capacity": "1T"}]' \
  "$HETMEM_SRC/tests/sim-kernels/machines/two.json" > "$WORK/m.json"

# Started directly from this shell (no subshell): its parent is $$.
PARENTLOG="$LOG" "$H" validate --real --machine "$WORK/m.json" --placements 2 --json "$WORK/v.json" -- "$P" \
  > "$WORK/v.out" 2> "$WORK/v.err" &
vpid=$!
wait $vpid
rc=$?
[ $rc = 0 ] || bad "validate --real: rc $rc: $(tail -5 "$WORK/v.err")"
rows=$(jq -r '.rows | length' "$WORK/v.json" 2> /dev/null)
# 2 device runs + the placement runs (at most 2: fewer when a placement is drawn twice).
runs=$(wc -l < "$LOG" 2> /dev/null || echo 0)
[ -n "$rows" ] && [ "$rows" -ge 1 ] && [ "$runs" = $((2 + rows)) ] && ok "$runs runs logged ($rows placements)" \
  || bad "runs logged: $runs, rows: $rows"
n=0
while read -r pp ppp argv0 verb rest; do
  if [ "$pp" = "$vpid" ] && [ "$ppp" = "$$" ] && [ "$argv0" = "$H" ] && [ "$verb" = validate ]; then
    n=$((n + 1))
  else
    bad "a run was started by process $pp (its parent $ppp): $argv0 $verb $rest; validate is $vpid, this shell $$"
  fi
done < "$LOG"
[ "$n" -ge 3 ] && [ "$n" = "$runs" ] && ok "all $n runs are children of the validate process ($vpid)" \
  || bad "$n of $runs runs started by the validate process"
exit $fail
