#!/usr/bin/env bash
# _exit must leave promptly, with the trace written, where the runtime
# cannot finish the normal way: from a SIGALRM handler that interrupted
# malloc while other threads allocate from new call sites (and so take the
# runtime's spool lock), and from fork children of a process whose other
# threads hold that lock. Each run has a timeout: a deadlock fails it.
set -u
. "$HETMEM_SRC/tests/integration/record_lib.sh"
build_attr || exit 1
cc_prog exitsig -pthread || exit 1

slow=0
for i in 1 2 3 4 5; do
  t0=$(date +%s%N)
  timeout 30 "$H" record -b soft -F 4000 -o "$WORK/sig$i.hmt" -- "$WORK/exitsig" signal > /dev/null 2> "$WORK/sig$i.err"
  rc=$?
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  if [ $rc = 124 ]; then bad "signal run $i: timed out (deadlock)"; continue; fi
  [ $rc = 7 ] || { bad "signal run $i: exit $rc, want 7: $(tail -2 "$WORK/sig$i.err")"; continue; }
  "$WORK/trace_attr" "$WORK/sig$i.hmt" > "$WORK/sig$i.attr" || { bad "signal run $i: trace unreadable"; continue; }
  [ "$ms" -gt 10000 ] && slow=$((slow + 1))
done
[ $fail = 0 ] && ok "_exit from a signal handler: 5 runs exit 7 with a readable trace ($slow over 10 s)"
allocs=$(awk '/^allocs/ {print $2}' "$WORK/sig1.attr" 2> /dev/null)
[ "${allocs:-0}" -gt 0 ] && ok "signal run: $allocs allocations recorded before _exit" \
  || bad "signal run: no allocation recorded"

out=$(timeout 60 "$H" record -b soft -F 4000 -o "$WORK/fork.hmt" -- "$WORK/exitsig" fork 40 2> "$WORK/fork.err")
rc=$?
if [ $rc = 124 ]; then bad "fork: timed out (deadlock)"
elif [ $rc != 0 ] || [ "$out" != "children 40" ]; then bad "fork: exit $rc, '$out': $(tail -2 "$WORK/fork.err")"
else ok "fork: 40 children _exit(3) while threads allocate"; fi
"$WORK/trace_attr" "$WORK/fork.hmt" > /dev/null || bad "fork: trace unreadable"

# The same under hetmem run (bind mode's own lock and report).
echo '{"default": "0", "rules": [{"pages_percent": 50, "device": "0"}]}' > "$WORK/p.json"
timeout 30 "$H" run --placement "$WORK/p.json" -- "$WORK/exitsig" signal > /dev/null 2> "$WORK/run.err"
rc=$?
[ $rc = 7 ] && ok "run: _exit from a signal handler exits 7" || bad "run: exit $rc, want 7: $(tail -2 "$WORK/run.err")"
out=$(timeout 60 "$H" run --placement "$WORK/p.json" -- "$WORK/exitsig" fork 40 2> "$WORK/runf.err")
[ "$out" = "children 40" ] && ok "run: 40 fork children _exit(3)" || bad "run fork: '$out': $(tail -2 "$WORK/runf.err")"
exit $fail
