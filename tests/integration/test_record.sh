#!/usr/bin/env bash
# hetmem record -b soft end to end: attribution on an 80/20 streaming
# program, site ids (right function, stable across runs), exit status
# pass-through, crash handling, %r, and bad input.
# The test programs run uninstrumented under LD_PRELOAD; in a sanitizer
# build the preload has UBSan but not ASan, and the CLI has both.
set -u
. "$HETMEM_SRC/tests/integration/record_lib.sh"
cc_prog ab -fno-ipa-icf -fno-optimize-sibling-calls || { echo "cannot compile"; exit 1; }
cc_prog firsttouch -fno-tree-vectorize || { echo "cannot compile"; exit 1; }
cc_prog crash
build_attr || { echo "cannot build trace helper"; exit 1; }

# Sample counts follow the CPU time the program got, not the wall time: on
# a loaded machine a program runs less, and the soft sampler's timer
# (CLOCK_MONOTONIC) fires about once per period while the thread runs. The
# test programs stream for a given CPU time and print it (getrusage) as
# "cpu SECONDS"; at the default 1 kHz a program should get at least half a
# sample per millisecond of it.
cpu_of() { sed -n 's/^cpu \([0-9.]*\)$/\1/p' "$1" | tail -1; }
want_for() { awk -v c="${1:-0}" -v f="$2" 'BEGIN {printf "%d", c * 1000 * f}'; }

# --- attribution: A gets ~80% of the samples taken while streaming.
sites=()
for run in 1 2; do
  "$H" record -b soft -o "$WORK/ab$run.hmt" -- "$WORK/ab" 1.0 > "$WORK/ab$run.out" 2> "$WORK/ab$run.err" \
    || { bad "record ab run $run: $(cat "$WORK/ab$run.err")"; continue; }
  "$WORK/trace_attr" "$WORK/ab$run.hmt" > "$WORK/ab$run.attr" || { bad "trace_attr"; continue; }
  read -r _ siteA _ _ _ inA frameA < <(grep ' A ' "$WORK/ab$run.attr")
  read -r _ siteB _ _ _ inB frameB < <(grep ' B ' "$WORK/ab$run.attr")
  share=$(( 100 * inA / (inA + inB > 0 ? inA + inB : 1) ))
  echo "run $run: A=$inA B=$inB samples in the streaming phase: A share $share% (site A $siteA $frameA, site B $siteB $frameB)"
  # The stream takes most of the CPU time (the rest fills the 128 MiB).
  cpu=$(cpu_of "$WORK/ab$run.err"); want=$(want_for "$cpu" 0.25)
  if [ -z "$cpu" ] || [ $((inA + inB)) -lt "$want" ] || [ $((inA + inB)) -lt 100 ]; then
    bad "too few samples in the stream ($((inA + inB)), want $want and at least 100 for ${cpu:-?} s of CPU time)"
  else ok "$((inA + inB)) samples in the stream for $cpu s of CPU time (want $want)"; fi
  if [ "$share" -lt 70 ] || [ "$share" -gt 90 ]; then bad "A share $share% not within 80 +-10"; else ok "A share $share%"; fi
  [ "$siteA" != "$siteB" ] || bad "A and B share a site id"
  sites+=("$siteA $siteB")
  # The innermost frame of each site lies in the function that allocated it.
  for pair in "A $frameA alloc_a" "B $frameB alloc_b"; do
    set -- $pair
    # ab+0xOFF, and the symbol after an underscore when the frame has one
    off=${2#ab+}
    off=$(( ${off%%_*} ))
    read -r start size < <(nm -S "$WORK/ab" | awk -v f="$3" '$4==f {print "0x"$1, "0x"$2}')
    if [ -n "${start:-}" ] && [ "$off" -ge $((start)) ] && [ "$off" -lt $((start + size)) ]; then
      ok "site of $1 is in $3"
    else bad "site frame $2 of $1 is not in $3 ($start+$size)"; fi
  done
  grep -q "with an address" "$WORK/ab$run.err" || bad "no summary line"
done
[ "${#sites[@]}" = 2 ] && { [ "${sites[0]}" = "${sites[1]}" ] && ok "site ids stable across runs" || bad "site ids differ across runs: ${sites[*]}"; }
diff -q <("$WORK/ab" 0.2 2> /dev/null) "$WORK/ab1.out" >/dev/null || bad "program output changed under record"

# --- page faults: first-touch stores to fresh pages of B, each value read
# from A, which stays in cache. The time goes to the kernel zeroing B's
# pages, and a timer that fires during a fault is delivered with the PC on
# the faulting store, not after it: B must get nearly all the samples.
"$H" record -b soft -o "$WORK/ft.hmt" -- "$WORK/firsttouch" > "$WORK/ft.out" 2> "$WORK/ft.err" \
  || bad "record firsttouch: $(cat "$WORK/ft.err")"
"$WORK/trace_attr" "$WORK/ft.hmt" > "$WORK/ft.attr" || bad "trace_attr firsttouch"
read -r inA inB < <(awk '$1 == "obj" && $4 == "A" {a += $5} $1 == "obj" && $4 == "B" {b += $5} END {print a + 0, b + 0}' "$WORK/ft.attr")
cpu=$(cpu_of "$WORK/ft.out"); want=$(want_for "$cpu" 0.25)
echo "firsttouch: A=$inA B=$inB samples for ${cpu:-?} s of CPU time (want $want)"
if [ -z "$cpu" ] || [ $((inA + inB)) -lt "$want" ] || [ $((inA + inB)) -lt 100 ]; then
  bad "firsttouch: too few samples ($((inA + inB)), want $want and at least 100)"
elif [ $((100 * inB / (inA + inB))) -lt 80 ]; then bad "firsttouch: B share $((100 * inB / (inA + inB)))% < 80% (page-fault time charged to the load before the store)"
else ok "firsttouch: B share $((100 * inB / (inA + inB)))%"; fi

# --- the fault flag marks only the program's own page faults: steady
# touches 4 MiB (about 1,000 faults, a few ms) and then only reads it. The
# handler's own first writes to each page of its sample ring (42 pages)
# once flagged the next sample each, so that 8% of the first 512 samples
# took the PC's access as a faulting one.
if cc_prog steady; then
  HETMEM_VERBOSE=1 "$H" record -b soft -F 1000 -o "$WORK/steady.hmt" -- "$WORK/steady" 0.8 > "$WORK/steady.out" 2> "$WORK/steady.err" \
    || bad "record steady: $(cat "$WORK/steady.err")"
  read -r n f < <(awk '/soft: back/ {for (i = 1; i < NF; i++) {if ($i ~ /^(back|at|fwd|none|nofunc)$/) n += $(i + 1); if ($i == "faulted") f = $(i + 1)}} END {print n + 0, f + 0}' "$WORK/steady.err")
  cpu=$(cpu_of "$WORK/steady.out"); want=$(want_for "$cpu" 0.5)
  # Samples that may carry the flag: those the sampler's 1 kHz wall clock
  # delivers before main (start-up, timed in CPU time) and during the first
  # pass (timed on the wall, which a loaded machine lengthens), both printed
  # by the program, plus one for the period in progress and 10 for the
  # faults of its exit path. The handler's own faults would add about 42.
  touch=$(awk '$1 == "start" {s = $2} $1 == "touch" {t = $2} END {if (t != "") printf "%.4f", s + t}' "$WORK/steady.out")
  fmax=$(($(want_for "$touch" 1) + 11))
  echo "steady: $n samples for ${cpu:-?} s of CPU time (want $want), $f flagged as faults (at most $fmax: ${touch:-?} s to start and touch)"
  if [ -z "$cpu" ] || [ -z "$touch" ] || [ "$n" -lt "$want" ] || [ "$n" -lt 100 ]; then bad "steady: too few samples ($n, want $want and at least 100)"
  elif [ "$f" -gt "$fmax" ]; then bad "steady: $f of $n samples flagged as page faults, more than $fmax (the program takes about 1,000 in its first ${touch:-?} s)"
  else ok "steady: $f of $n samples flagged as page faults (at most $fmax)"; fi
else bad "cannot compile steady"; fi

# --- the perf ring path for real: perf-sw samples the kernel's task-clock
# software event through the same per-thread mmap rings, collector and
# decoder as PEBS/IBS (no PMU needed, so it runs in this VM).
# task-clock counts CPU time: expect at least half a sample per
# millisecond of the CPU time the program reports it got (hetmem's own CPU
# time, which grows under contention, does not count).
if "$H" record -b perf-sw -o "$WORK/ps.hmt" -- "$WORK/ab" 0.5 > /dev/null 2> "$WORK/ps.err"; then
  "$WORK/trace_attr" "$WORK/ps.hmt" > "$WORK/ps.attr"
  read -r _ n _ < <(grep '^samples' "$WORK/ps.attr")
  cpu=$(cpu_of "$WORK/ps.err"); want=$(want_for "$cpu" 0.5)
  [ -n "$cpu" ] && [ "${n:-0}" -ge "$want" ] && [ "${n:-0}" -ge 100 ] && ok "perf-sw: $n samples through the perf ring ($cpu s of CPU time, want $want)" \
    || bad "perf-sw: only ${n:-0} samples, want $want and at least 100 for ${cpu:-?} s of CPU time: $(cat "$WORK/ps.err")"
elif grep -q "not usable here" "$WORK/ps.err"; then
  echo "note: perf-sw part skipped: $(cat "$WORK/ps.err")"
else
  bad "perf-sw: $(cat "$WORK/ps.err")"
fi

# --- exit status passes through; the trace still closes with the status.
"$H" record -b soft -o "$WORK/x.hmt" -- sh -c 'exit 3' 2>/dev/null; rc=$?
[ $rc = 3 ] && ok "exit 3 passed through" || bad "exit status $rc, want 3"
"$H" record -b soft -o "$WORK/crash.hmt" -- "$WORK/crash" > "$WORK/crash.out" 2>/dev/null; rc=$?
[ $rc = 139 ] && ok "SIGSEGV passed through as 139" || bad "crash status $rc, want 139"
"$WORK/trace_attr" "$WORK/crash.hmt" > "$WORK/crash.attr" || bad "crash trace unreadable"
grep -q "^end 1 11 " "$WORK/crash.attr" && ok "crash trace closed with wait status 11 (SIGSEGV)" || bad "crash trace end: $(grep ^end "$WORK/crash.attr")"
grep -q "about to crash" "$WORK/crash.out" || bad "crash program output lost"
# The header says from which size allocations were tracked (--min-size:
# what hetmem optimize --refine simulates with).
[ "$("$H" trace info --json "$WORK/x.hmt" | jq .header.min_size)" = 65536 ] && ok "header min_size 65536 by default" \
  || bad "header min_size: $("$H" trace info --json "$WORK/x.hmt" | jq .header.min_size)"
"$H" record -b soft --min-size 4K -o "$WORK/m.hmt" -- true 2>/dev/null
[ "$("$H" trace info --json "$WORK/m.hmt" | jq .header.min_size)" = 4096 ] && ok "header min_size 4096 with --min-size 4K" \
  || bad "header min_size with --min-size 4K: $("$H" trace info --json "$WORK/m.hmt" | jq .header.min_size)"
# trace info decodes the stored wait status (it printed "exit status 768").
"$H" trace info "$WORK/x.hmt" | grep -q "(exit 3)$" && ok "trace info: exit 3" \
  || bad "trace info: $("$H" trace info "$WORK/x.hmt" | grep duration)"
"$H" trace info "$WORK/crash.hmt" | grep -q "(killed by signal 11, " && ok "trace info: killed by signal 11" \
  || bad "trace info: $("$H" trace info "$WORK/crash.hmt" | grep duration)"
[ "$("$H" trace info --json "$WORK/x.hmt" | jq .exit_code)" = 3 ] && ok "trace info --json exit_code 3" || bad "exit_code"

# --- %r takes the rank from the launcher's environment.
OMPI_COMM_WORLD_RANK=5 "$H" record -b soft -o "$WORK/r.%r.hmt" -- true 2>/dev/null
[ -f "$WORK/r.5.hmt" ] && ok "%r from OMPI_COMM_WORLD_RANK" || bad "no r.5.hmt"
SLURM_PROCID=2 "$H" record -b soft -o "$WORK/s.%r.hmt" -- true 2>/dev/null
[ -f "$WORK/s.2.hmt" ] && ok "%r from SLURM_PROCID" || bad "no s.2.hmt"

# --- --bind to node 0 and to this machine's tier/kind names.
"$H" record -b soft --bind 0 -o "$WORK/b.hmt" -- true 2>/dev/null && ok "--bind 0" || bad "--bind 0 failed"
"$H" record -b soft --bind ddr -o "$WORK/b.hmt" -- true 2>/dev/null && ok "--bind ddr" || bad "--bind ddr failed"

# --- bad input: one line, the right exit code, no trace left behind.
# --- sleeps and waits run their full time under the sampler (its signal
# used to cut them short with EINTR after a millisecond).
cc_prog waits
"$H" record -b soft -F 1000 -o "$WORK/w.hmt" -- "$WORK/waits" > "$WORK/w.out" 2> "$WORK/w.err" \
  || bad "record waits: $(cat "$WORK/w.err")"
short=$(awk '$2 != "0" || $3 < 149 {print}' "$WORK/w.out")
if [ "$(wc -l < "$WORK/w.out")" = 6 ] && [ -z "$short" ]; then ok "sleeps and waits unaffected by sampling"
else bad "waits under sampling: $(tr '\n' ';' < "$WORK/w.out")"; fi
"$H" trace objects --json "$WORK/w.hmt" > "$WORK/w.json" 2>/dev/null
r=$(jq '.no_address_samples + .unattributed_samples == .samples and has("no_address_samples")' "$WORK/w.json")
[ "$r" = true ] && ok "trace objects: no-address samples counted apart" || bad "trace objects json: $(head -c 300 "$WORK/w.json")"

# --- spool folders a killed hetmem left behind are removed on the next run
# (owner process gone); a live owner's folder and foreign folders stay.
mkdir -p "$WORK/tmp/hetmem-spool.dead01" "$WORK/tmp/hetmem-spool.live01" "$WORK/tmp/hetmem-spool.noown1"
echo "999999999 12345" > "$WORK/tmp/hetmem-spool.dead01/owner"
: > "$WORK/tmp/hetmem-spool.dead01/1-1.spool"
echo "$$ $(sed 's/.*) //' /proc/$$/stat | cut -d' ' -f20)" > "$WORK/tmp/hetmem-spool.live01/owner"
TMPDIR="$WORK/tmp" "$H" record -b soft -o "$WORK/reap.hmt" -- true 2> /dev/null || bad "record with stale spools failed"
left=$(cd "$WORK/tmp" && ls -d hetmem-spool.* | tr '\n' ' ')
[ "$left" = "hetmem-spool.live01 hetmem-spool.noown1 " ] && ok "stale spool folder removed, others kept" \
  || bad "spool folders left: '$left'"

expect() { # expect CODE PATTERN -- ARGS...
  local code=$1 pat=$2; shift 3
  local err; err=$("$H" record "$@" 2>&1 >/dev/null); local rc=$?
  if [ $rc = "$code" ] && grep -q -- "$pat" <<<"$err" && [ "$(wc -l <<<"$err")" = 1 ]; then ok "rejects: $*"
  else bad "'record $*': rc $rc (want $code), message '$err' (want /$pat/)"; fi
}
# A static program cannot load the runtime: said, not recorded as empty.
if printf 'int main(void) { return 0; }\n' | cc -static -x c -o "$WORK/static" - 2> /dev/null; then
  expect 1 "statically linked.*cannot load" -- -b soft -o "$WORK/st.hmt" -- "$WORK/static"
  [ -e "$WORK/st.hmt" ] && bad "a trace was written for a static program"
  echo '{"default": "0"}' > "$WORK/d.json"
  err=$("$H" run --placement "$WORK/d.json" -- "$WORK/static" 2>&1 >/dev/null); rc=$?
  [ $rc = 1 ] && grep -q "statically linked" <<<"$err" && ok "run refuses a static program" \
    || bad "run on a static program: rc $rc, '$err'"
fi
expect 2 "missing command" -- -b soft
expect 2 "missing command" -- -b soft --
expect 2 "PERIOD must be at least 1" -- -b soft -p 0 -- true
expect 2 "unknown backend 'foo'" -- -b foo -- true
# Rates the sampler cannot sustain are refused with the reason, not run
# (100 kHz used to starve the program); -F is for the soft backend only.
expect 2 "'100000' is not an integer from 1 to 20000.*stall the program" -- -b soft -F 100000 -- true
expect 2 "faster than every 50 us" -- -b soft -p 20 -- true
expect 2 "-F applies to the soft backend only; use -p for perf-sw" -- -b perf-sw -F 1000 -- true
expect 1 "unknown memory device" -- -b soft --bind hbm7 -o "$WORK/no.hmt" -- true
[ ! -e "$WORK/no.hmt" ] || bad "a trace was left after a bad --bind"
expect 1 "No such file or directory" -- -b soft -o "$WORK/nodir/t.hmt" -- true
if [ ! -e /sys/bus/event_source/devices/cpu/events/mem-loads ]; then
  expect 1 "backend pebs is not usable here.*remedy" -- -b pebs -- true
fi
if [ ! -e /sys/bus/event_source/devices/ibs_op ]; then
  expect 1 "backend ibs is not usable here.*remedy" -- -b ibs -- true
fi
"$H" record -b soft -o "$WORK/nx.hmt" -- /nonexistent/prog 2>/dev/null; rc=$?
[ $rc = 127 ] && ok "missing program gives 127" || bad "missing program rc $rc"
exit $fail
