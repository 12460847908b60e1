#!/usr/bin/env bash
# hetmem record --per-cpu: option checks, the clear error when CPU-wide
# events are not permitted (captured trees with paranoid 1..3 and no
# capabilities), and, where perf_event_open works, a real per-CPU run with
# the task-clock software event (-b perf-sw) compared side by side with the
# per-thread path, while a busy process outside the run must not leak in.
set -u
: "${HETMEM_BIN:?}" "${HETMEM_BUILD:?}" "${HETMEM_SRC:?}"
H="$HETMEM_BIN/hetmem"
F="${HETMEM_FIXTURES:-$HETMEM_SRC/tests/fixtures}/sysfs"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/hetmem-test.XXXXXX")
bgpid=
trap '[ -n "$bgpid" ] && kill "$bgpid" 2>/dev/null; rm -rf "$WORK"' EXIT
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
expect() { # expect CODE WHAT PATTERN -- CMD...
  local code=$1 what=$2 pat=$3; shift 4
  "$@" > "$WORK/out" 2> "$WORK/err"; local rc=$?
  if [ "$rc" != "$code" ]; then bad "$what: exit $rc, wanted $code ($(cat "$WORK/err"))"; return; fi
  if ! grep -q -- "$pat" "$WORK/err"; then bad "$what: stderr lacks '$pat': $(cat "$WORK/err")"; return; fi
  if [ "$(grep -c . "$WORK/err")" != 1 ]; then bad "$what: error is not one line"; return; fi
  ok "$what"
}

# --- option checks (before anything runs)
expect 2 "--per-cpu with soft" "not to -b soft" -- "$H" record -b soft --per-cpu -o "$WORK/x.hmt" -- /bin/true
expect 2 "--per-cpu with none" "not to -b none" -- "$H" record -b none --per-cpu -o "$WORK/x.hmt" -- /bin/true
expect 2 "--per-cpu with spe" "not supported with -b spe" -- "$H" record -b spe --per-cpu -o "$WORK/x.hmt" -- /bin/true
expect 2 "--per-cpu takes no value" "option '--per-cpu' takes no value" -- "$H" record --per-cpu=1 -b perf-sw -o "$WORK/x.hmt" -- /bin/true

# --- not permitted: captured trees have paranoid 1, 2, 3 and no capabilities
for t in skx-2s-ddr:1 xeonmax-flat-hbm:2 graviton3-spe:3; do
  HETMEM_SYSFS_ROOT="$F/${t%:*}" expect 1 "not permitted on ${t%:*}" \
    "perf_event_paranoid <= 0 (it is ${t#*:}) or CAP_PERFMON; remedy: sudo sysctl kernel.perf_event_paranoid=0" \
    -- "$H" record -b perf-sw --per-cpu -o "$WORK/x.hmt" -- /bin/true
  [ -e "$WORK/x.hmt" ] && bad "a trace was left behind on ${t%:*}"
done

# --- live run
cat > "$WORK/spin.c" <<'C'
#include <stdlib.h>
#include <time.h>
int main(int argc, char **argv)
{
    double sec = argc > 1 ? atof(argv[1]) : 0.3, s = 0;
    struct timespec a, b;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
    do {
        for (int i = 0; i < 100000; i++) s += i;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
    } while ((double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec) < sec);
    return s < 0;
}
C
cc -O1 -o "$WORK/spin" "$WORK/spin.c" || { echo "cannot compile"; exit 1; }
if ! "$H" record -b perf-sw -o "$WORK/t.hmt" -- "$WORK/spin" 0.3 2> "$WORK/t.err"; then
  if grep -q "not usable here" "$WORK/t.err"; then echo "skip: live part: $(cat "$WORK/t.err")"; exit $fail; fi
  bad "per-thread perf-sw: $(cat "$WORK/t.err")"; exit 1
fi
if ! "$H" record -b perf-sw --per-cpu -o "$WORK/c.hmt" -- /bin/true 2> "$WORK/c.err"; then
  if grep -q "not permitted here" "$WORK/c.err"; then
    ok "not permitted on this machine, said so: $(cat "$WORK/c.err")"; echo "skip: live per-CPU part"; exit $fail
  fi
fi
# Another busy process, not a child of hetmem: its samples must be dropped.
"$WORK/spin" 30 & bgpid=$!
samples() { sed -n 's/.*: \([0-9]*\) samples (.*/\1/p' "$1"; }
for run in 1; do
  HETMEM_VERBOSE=1 "$H" record -b perf-sw --per-cpu -p 1000 -o "$WORK/c$run.hmt" -- "$WORK/spin" 0.3 2> "$WORK/c$run.err"
  rc=$?
  [ $rc = 0 ] || { bad "per-cpu run $run: exit $rc: $(cat "$WORK/c$run.err")"; continue; }
  HETMEM_VERBOSE=1 "$H" record -b perf-sw -p 1000 -o "$WORK/t$run.hmt" -- "$WORK/spin" 0.3 2> "$WORK/t$run.err"
  c=$(samples "$WORK/c$run.err"); t=$(samples "$WORK/t$run.err")
  dropped=$(sed -n 's/.*kept, \([0-9]*\) of other processes dropped/\1/p' "$WORK/c$run.err")
  echo "run $run: per-cpu $c samples (dropped $dropped of other processes), per-thread $t samples, 0.3 s CPU at 1 kHz"
  [ -s "$WORK/c$run.hmt" ] || bad "no trace"
  grep -q "exit 0" "$WORK/c$run.err" || bad "summary lacks the exit status"
  [ "${c:-0}" -ge 100 ] || bad "per-cpu: too few samples (${c:-none})"
  # Same CPU time, same event: the counts agree within a factor 1.5 both
  # ways; the background spinner's samples would double the per-CPU count.
  if [ "${c:-0}" -gt 0 ] && [ "${t:-0}" -gt 0 ]; then
    [ $((c * 2)) -le $((t * 3)) ] && [ $((t * 2)) -le $((c * 3)) ] && ok "per-cpu/per-thread $c/$t" \
      || bad "per-cpu $c vs per-thread $t samples differ by more than 1.5x"
  fi
  [ "${dropped:-0}" -gt 0 ] && ok "foreign samples dropped ($dropped)" || bad "no foreign samples seen while another process was busy"
done
exit $fail
