#!/usr/bin/env bash
# Bad input is refused with a one-line error and a non-zero exit.
source "$(dirname "$0")/sim_lib.sh"
# expect RC PATTERN CMD...: exit status RC and one stderr line matching PATTERN
expect() {
  local rc=$1 pat=$2; shift 2
  "$@" >"$T/out" 2>"$T/err"
  local got=$?
  if [ $got != "$rc" ]; then fail "$* -> exit $got, want $rc ($(head -c 300 "$T/err"))"; return; fi
  if ! grep -q -- "$pat" "$T/err"; then fail "$* -> stderr lacks '$pat': $(cat "$T/err")"; return; fi
  ok "$(head -1 "$T/err")"
}
printf '{"name": "x",\n "cores": 4,\n "core": {"freq_ghz": 2,}\n}\n' > "$T/syntax.json"
expect 1 "syntax.json:3:" "$H" sim -m "$T/syntax.json" -- "$K/chase.sim" 4096 10
jq '.devices[0].read_bandwith_gbs = 5' "$M" > "$T/typo.json"
expect 1 'devices\[0\]: unknown key "read_bandwith_gbs"' "$H" sim -m "$T/typo.json" -- "$K/chase.sim" 4096 10
jq '.caches[1].assoc = "eight"' "$M" > "$T/type.json"
expect 1 'caches\[1\]: "assoc" must be a number' "$H" sim -m "$T/type.json" -- "$K/chase.sim" 4096 10
jq 'del(.devices)' "$M" > "$T/nodev.json"
expect 1 '"devices" must be an array' "$H" sim -m "$T/nodev.json" -- "$K/chase.sim" 4096 10
jq '.devices[0].loaded_latency = [[0.7, 150], [0.5, 160]]' "$M" > "$T/ll1.json"
expect 1 'devices\[0\]: "loaded_latency"\[1\] must be' "$H" sim -m "$T/ll1.json" -- "$K/chase.sim" 4096 10
jq '.devices[0].loaded_latency = [[0.5, 50]]' "$M" > "$T/ll2.json"
expect 1 'devices\[0\]: "loaded_latency"\[0\] must be' "$H" sim -m "$T/ll2.json" -- "$K/chase.sim" 4096 10
jq '.devices[0].loaded_latency = "steep"' "$M" > "$T/ll3.json"
expect 1 '"loaded_latency" must be an array' "$H" sim -m "$T/ll3.json" -- "$K/chase.sim" 4096 10
expect 1 'no preset "nosuch"' "$H" sim -m nosuch -- "$K/chase.sim" 4096 10
expect 1 "unknown device \"hbm\"" "$H" sim -m "$M" --device hbm -- "$K/chase.sim" 4096 10
echo '{"default": "slow", "rules": [{"name": "chain", "device": "hbm"}]}' > "$T/p1.json"
expect 1 'p1.json: rules\[0\]: unknown device "hbm"' "$H" sim -m "$M" --placement "$T/p1.json" -- "$K/chase.sim" 4096 10
printf '{"default": "slow",\n "rules": [{"name": "chain" "device": "fast"}]}' > "$T/p2.json"
expect 1 "p2.json:2:" "$H" sim -m "$M" --placement "$T/p2.json" -- "$K/chase.sim" 4096 10
echo '{"default": "slow", "rules": [{"pages_percent": 150, "device": "fast"}]}' > "$T/p3.json"
expect 1 'pages_percent' "$H" sim -m "$M" --placement "$T/p3.json" -- "$K/chase.sim" 4096 10
expect 1 "not built with hetmem-cc" "$H" sim -m "$M" -- "$K/plain"
expect 1 "not built with hetmem-cc" "$H" sim -m "$M" -- /bin/true
expect 1 "multi-threaded program not supported.*run it with one thread (OMP_NUM_THREADS=1, or the program's own thread option), or build it without -fopenmp" "$H" sim -m "$M" -- "$K/threads.sim"
expect 1 "multi-threaded program not supported: a second thread ran instrumented code" "$H" sim -m "$M" -- "$K/pthreads.sim" inst 100000
expect 1 "cannot run" "$H" sim -m "$M" -- "$T/does-not-exist"
expect 1 "exited with status 2" "$H" sim -m "$M" -- "$K/chase.sim" # usage error inside the program
expect 2 "-m MACHINE is required" "$H" sim -- "$K/chase.sim" 4096 10
expect 2 "exclude each other" "$H" sim -m "$M" --device slow --placement "$T/p3.json" -- "$K/chase.sim" 4096 10
expect 2 "no program given" "$H" sim -m "$M"
expect 2 "sample-period" "$H" sim -m "$M" --sample-period 0 -- "$K/chase.sim" 4096 10

# Capacity overflow: 8 MiB on a device with 64M/64 = 1 MiB per core spills
# the rest to the default device, and says so.
jq '.devices[1].capacity = "64M"' "$M" > "$T/small.json"
echo '{"default": "slow", "rules": [{"name": "chain", "device": "fast"}]}' > "$T/pf.json"
"$H" sim -m "$T/small.json" --placement "$T/pf.json" --json "$T/sp.json" -- "$K/chase.sim" 8388608 1000 >/dev/null 2>"$T/err"
rc=$?
[ $rc = 0 ] && ok "spill run exits 0" || fail "spill run exit $rc: $(cat "$T/err")"
grep -q "device fast full (1.0 MiB per thread): 7.0 MiB spilled to slow" "$T/err" && ok "$(grep spilled "$T/err")" ||
  fail "no spill warning: $(cat "$T/err")"
# 8 MiB at a 64-byte alignment spans 2049 pages, 256 of which fit.
[ "$(jq -r '.devices[1].spilled_bytes' "$T/sp.json")" = $(((2049 - 256) * 4096)) ] && ok "spilled_bytes in JSON" ||
  fail "spilled_bytes $(jq -r '.devices[1].spilled_bytes' "$T/sp.json")"
[ "$(jq -r '.devices[1].peak_bytes' "$T/sp.json")" = 1048576 ] && ok "fast holds its capacity" || fail "fast peak"

# A placement rule that matched nothing is reported.
echo '{"default": "slow", "rules": [{"name": "chian", "device": "fast"}]}' > "$T/pu.json"
"$H" sim -m "$M" --placement "$T/pu.json" -- "$K/chase.sim" 4096 10 >/dev/null 2>"$T/err"
grep -q 'rules\[0\] {"name": "chian", "device": "fast"} matched nothing' "$T/err" && ok "unmatched rule reported" ||
  fail "unmatched rule not reported: $(cat "$T/err")"

# The TSan runtime is not linked into hetmem-cc programs: the hooks are ours.
if ldd "$K/chase.sim" | grep -q tsan; then fail "libtsan linked: $(ldd "$K/chase.sim" | grep tsan)"; else ok "no libtsan in ldd"; fi
nm "$K/chase.sim" | grep -q ' T __tsan_read8$' && ok "__tsan_read8 defined in the program" || fail "__tsan_read8 not defined"
nm "$K/chase.sim" | grep -q '__tsan_on_report\|__tsan_default_options' && fail "TSan runtime symbols present" || ok "no TSan runtime symbols"
# A hetmem-cc program outside hetmem sim runs as a plain program.
out=$("$K/chase.sim" 65536 100) && ok "runs natively ($out)" || fail "native run failed"
# A second thread that runs no instrumented code (an MPI progress thread's
# case: here a function of a library built without hetmem-cc) is allowed;
# the main thread's 10^6 loads are all simulated.
if "$H" sim -m "$M" --json "$T/pt.json" -- "$K/pthreads.sim" plain 1000000 > "$T/out" 2> "$T/err"; then
  loads=$(jq .loads "$T/pt.json")
  if [ "$loads" -ge 1000000 ] && [ "$loads" -lt 1100000 ]; then ok "thread running uninstrumented code: run, $loads loads"
  else fail "thread running uninstrumented code: $loads loads, want 1000000 to 1100000"; fi
else
  fail "thread running uninstrumented code refused: $(cat "$T/err")"
fi
done_tests
