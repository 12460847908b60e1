#!/usr/bin/env bash
# hetmem estimate and hetmem validate on simulated runs of a two-phase kernel:
# corners equal the device runs, a static and a phased placement are close to
# their simulated runtimes, the JSON shapes, and one-line errors for bad input.
source "$(dirname "$0")/sim_lib.sh"
P="$K/phases.sim"
[ -x "$P" ] || { echo "phases.sim not built"; exit 77; }
jq '.devices |= .[0:2] | .name = "test-pair"' "$HETMEM_SRC/tests/sim-kernels/machines/two.json" > "$T/pair.json"
M="$T/pair.json"
# Arrays written first (WRITE=1): a phase move then copies every page, as the
# estimator charges it (a program that never wrote its data moves nothing).
ARGS=(8388608 4 1)
for d in slow fast; do
  "$H" sim -m "$M" --device $d -o "$T/$d.hmt" --json "$T/$d.json" -- "$P" "${ARGS[@]}" >/dev/null || fail "sim --device $d"
done
tslow=$(j "$T/slow.json" .runtime_s); tfast=$(j "$T/fast.json" .runtime_s)
lt "$tfast" "$(awk -v s="$tslow" 'BEGIN{print s/1.2}')" "the devices differ by more than 1.2x"

est() { "$H" estimate --model all --json "$T/slow.hmt" "$T/fast.hmt" --placement "$1"; }
echo '{"default": "slow", "rules": []}' > "$T/all-slow.json"
echo '{"default": "fast", "rules": []}' > "$T/all-fast.json"
for m in linear default; do
  near "$(est "$T/all-slow.json" | jq -r .models.$m.runtime_s)" "$tslow" 0.005 "$m: all on slow = its run"
  near "$(est "$T/all-fast.json" | jq -r .models.$m.runtime_s)" "$tfast" 0.005 "$m: all on fast = its run"
done

# A static placement and a phased one (objects move at phase boundaries).
echo '{"default": "slow", "rules": [{"name": "A", "device": "fast"}]}' > "$T/a.json"
echo '{"default": "slow", "phases": {"pa": {"rules": [{"name": "A", "device": "fast"}]}, "pb": {"rules": [{"name": "B", "device": "fast"}]}}}' > "$T/ph.json"
for p in a ph; do
  "$H" sim -m "$M" --placement "$T/$p.json" --json "$T/$p.sim.json" -- "$P" "${ARGS[@]}" >/dev/null || fail "sim --placement $p"
  est "$T/$p.json" > "$T/$p.est.json" || fail "estimate $p"
  near "$(j "$T/$p.est.json" .models.default.runtime_s)" "$(j "$T/$p.sim.json" .runtime_s)" 0.2 "default model: placement $p against its simulated run"
  lo=$(j "$T/$p.est.json" '.models.default.ci_s[0]'); hi=$(j "$T/$p.est.json" '.models.default.ci_s[1]'); v=$(j "$T/$p.est.json" .models.default.runtime_s)
  awk -v l="$lo" -v v="$v" -v h="$hi" 'BEGIN{exit !(l <= v && v <= h && l < h)}' && ok "$p: interval [$lo, $hi] holds $v" || fail "$p: interval [$lo, $hi] around $v"
  # Its half-width is the sampling and the model-error terms in quadrature;
  # a has a model-error term (the initialisation, outside any phase, writes
  # both arrays, one on each device); ph has none (in each phase the arrays
  # it touches are all on one device, where the model is exact).
  hs=$(j "$T/$p.est.json" .models.default.interval.sampling_s); hm=$(j "$T/$p.est.json" .models.default.interval.model_s)
  mmin=0; [ "$p" = a ] && mmin=1e-12
  awk -v v="$v" -v h="$hi" -v s="$hs" -v m="$hm" -v mmin="$mmin" 'BEGIN{w = sqrt(s * s + m * m); d = h - v - w; exit !(s > 0 && m >= mmin && d * d <= 1e-12 * w * w)}' \
    && ok "$p: half-width = sampling $hs and model $hm in quadrature" || fail "$p: half-width $hi - $v against sampling $hs, model $hm"
done
mig=$(j "$T/ph.est.json" .models.default.migration_s)
lt 0 "$mig" "the phased placement pays for migration"
[ "$(j "$T/a.est.json" '.models.default.phases | keys | length')" = 3 ] && ok "phase breakdown" || fail "phase breakdown: $(j "$T/a.est.json" .models.default.phases)"
[ "$(j "$T/a.est.json" '[.models.default.objects[] | select(.name == "A")] | length')" = 1 ] && ok "object breakdown names A" || fail "object breakdown"
# With --explain, the traffic the default model gives each object: on this
# kernel, which streams both arrays, within 10% of what the simulator moved
# for it in the fast run (A and B: 41.9 MB read, 8.4 MB written back).
"$H" estimate --json --explain "$T/slow.hmt" "$T/fast.hmt" --placement "$T/a.json" > "$T/a.ex.json" || fail "estimate --explain --json"
for o in A B; do
  for k in read:bytes_read written:bytes_written; do
    near "$(j "$T/a.ex.json" "[.models.default.objects[] | select(.name == \"$o\")][0].${k%%:*}_bytes")" \
      "$(j "$T/fast.json" "[.objects[] | select(.name == \"$o\")][0].${k#*:}")" 0.1 "$o: the model's ${k%%:*} traffic against the simulator's"
  done
done
[ "$(j "$T/a.est.json" '[.models.default.objects[] | select(has("read_bytes"))] | length')" = 0 ] && ok "traffic only with --explain" || fail "traffic without --explain"

# A saved summary gives the same estimate without the traces.
"$H" estimate "$T/slow.hmt" "$T/fast.hmt" --placement "$T/a.json" --save-summary "$T/sum.json" >/dev/null || fail "save summary"
near "$("$H" estimate --json --summary "$T/sum.json" --placement "$T/a.json" | jq -r .models.default.runtime_s)" "$(j "$T/a.est.json" .models.default.runtime_s)" 1e-6 "saved summary"

# Human output is a table.
"$H" estimate "$T/slow.hmt" "$T/fast.hmt" --placement "$T/a.json" | grep -q "^  default " && ok "table" || fail "table"

# Bad input: one line, exit 1 (runtime) or 2 (usage).
bad() { # EXPECTED_RC PATTERN ARGS...
  local want=$1 pat=$2; shift 2
  local out rc
  out=$("$H" "$@" 2>&1 >/dev/null); rc=$?
  if [ "$rc" = "$want" ] && [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && [[ "$out" == *"$pat"* ]]; then ok "refused: $pat"
  else fail "expected exit $want and one line with '$pat', got $rc: $out"; fi
}
echo '{"default": "slow", "rules": [{"name": "nosuch", "device": "fast"}]}' > "$T/unmatched.json"
echo '{"default": "slow", "rules": [{"name": "A", "device": "hbm"}]}' > "$T/unknown.json"
echo '{"default": "slow", "rules": [' > "$T/malformed.json"
head -c 3000 "$T/fast.hmt" > "$T/cut.hmt"
echo "not a trace" > "$T/junk.hmt"
bad 1 "matched nothing (--strict)" estimate --strict "$T/slow.hmt" "$T/fast.hmt" --placement "$T/unmatched.json"
# Without --strict a rule that matches nothing is a warning, as in sim and run.
out=$("$H" estimate --json "$T/slow.hmt" "$T/fast.hmt" --placement "$T/unmatched.json" 2> "$T/warn")
if [ $? = 0 ] && grep -q '^hetmem: warning: .*unmatched.json: rules\[0\] .*matched nothing$' "$T/warn" &&
  [ "$(echo "$out" | jq -r .models.default.runtime_s)" = "$(est "$T/all-slow.json" | jq -r .models.default.runtime_s)" ]; then
  ok "unmatched rule: a warning, and the estimate of the rest"
else
  fail "unmatched rule without --strict: $(cat "$T/warn")"
fi
bad 1 'unknown device "hbm"' estimate "$T/slow.hmt" "$T/fast.hmt" --placement "$T/unknown.json"
bad 1 "malformed.json:" estimate "$T/slow.hmt" "$T/fast.hmt" --placement "$T/malformed.json"
bad 1 "both runs on device 'slow'" estimate "$T/slow.hmt" "$T/slow.hmt" --placement "$T/a.json"
bad 1 "cut.hmt" estimate "$T/slow.hmt" "$T/cut.hmt" --placement "$T/a.json"
bad 1 "junk.hmt" estimate "$T/slow.hmt" "$T/junk.hmt" --placement "$T/a.json"
bad 1 "nosuch.hmt" estimate "$T/slow.hmt" "$T/nosuch.hmt" --placement "$T/a.json"
bad 2 "at least two" estimate "$T/slow.hmt" --placement "$T/a.json"
bad 2 "--placement FILE is required" estimate "$T/slow.hmt" "$T/fast.hmt"
bad 2 "unknown model" estimate --model cubic "$T/slow.hmt" "$T/fast.hmt" --placement "$T/a.json"
"$H" sim -m "$M" --device fast -o "$T/other.hmt" -- "$P" 4194304 4 >/dev/null
bad 1 "different command lines" estimate "$T/slow.hmt" "$T/other.hmt" --placement "$T/a.json"
"$H" sim -m "$M" --device fast --min-size 4K -o "$T/fast4k.hmt" -- "$P" "${ARGS[@]}" >/dev/null || fail "sim --min-size 4K"
bad 1 "track objects from different sizes (65536 and 4096 bytes)" estimate "$T/slow.hmt" "$T/fast4k.hmt" --placement "$T/a.json"
bad 1 "validation needs at least two" validate --machine ddr4 -- "$P" "${ARGS[@]}"
bad 2 "no program given" validate --machine "$M"

# An MPI job (traces named with %r): per phase the slowest rank. Rank 1
# works on half the data, so the job takes rank 0's time.
for d in slow fast; do
  cp "$T/$d.hmt" "$T/job.0.$d.hmt"
  "$H" sim -m "$M" --device $d -o "$T/job.1.$d.hmt" -- "$P" 4194304 4 >/dev/null || fail "sim rank 1 on $d"
done
job=$("$H" estimate --json "$T/job.%r.slow.hmt" "$T/job.%r.fast.hmt" --placement "$T/a.json" | jq -r .models.default.runtime_s)
r1=$("$H" estimate --json "$T/job.1.slow.hmt" "$T/job.1.fast.hmt" --placement "$T/a.json" | jq -r .models.default.runtime_s)
near "$job" "$(j "$T/a.est.json" .models.default.runtime_s)" 1e-6 "job of 2 ranks = its slowest rank"
lt "$r1" "$job" "the smaller rank is faster than the job"
[ "$("$H" estimate --json "$T/job.%r.slow.hmt" "$T/job.%r.fast.hmt" --placement "$T/a.json" | jq -r .ranks)" = 2 ] && ok "2 ranks found" || fail "ranks"
bad 2 "names its rank" estimate "$T/job.%r.slow.hmt" "$T/fast.hmt" --placement "$T/a.json"
bad 1 "traces of rank 0" estimate "$T/nojob.%r.slow.hmt" "$T/nojob.%r.fast.hmt" --placement "$T/a.json"

# The Python binding (ctypes over libhetmem.so) gives the same figures.
lib="$HETMEM_BUILD/lib/libhetmem.so"
if [ -x /usr/bin/python3 ] && [ -e "$lib" ] && ! grep -q '^HETMEM_SANITIZE:STRING=.' "$HETMEM_BUILD/CMakeCache.txt" 2>/dev/null; then
  out=$(cd "$T" && PYTHONPATH="$HETMEM_SRC/python" HETMEM_LIB="$lib" /usr/bin/python3 - <<'PY'
from hetmem.estimate import Estimator, HetmemError
e = Estimator(["slow.hmt", "fast.hmt"])
a = e.object_index(name="A")
full = e.estimate("a.json")["runtime_s"]
s = e.state()
inc = s.move(a, "fast")
try:
    s.move(a, "nosuch")
    bad = "accepted"
except ValueError:
    bad = "refused"
print("%.9f %.9f %s %s" % (full, inc, e.devices, bad))
PY
)
  read -r full inc _ <<<"$out"
  near "$full" "$(j "$T/a.est.json" .models.default.runtime_s)" 1e-6 "python: estimate of a placement file"
  near "$inc" "$full" 1e-9 "python: an incremental move equals the full estimate"
  [[ "$out" == *refused* ]] && ok "python: unknown device refused" || fail "python: $out"
else
  echo "skip: python binding (no /usr/bin/python3, no $lib, or a sanitized build)"
fi

# validate: rows, estimates per model, summary.
"$H" validate --machine "$M" --placements 3 -j 2 --json "$T/val.json" -- "$P" "${ARGS[@]}" > "$T/val.txt" || fail "validate"
[ "$(j "$T/val.json" '.rows | length')" = 3 ] && ok "validate: 3 rows" || fail "validate rows: $(cat "$T/val.txt")"
for m in linear default; do
  v=$(j "$T/val.json" ".summary.$m.mean_abs_err_pct")
  [[ "$v" =~ ^[0-9.e+-]+$ ]] && ok "validate: $m mean error $v%" || fail "validate summary $m: $v"
done
grep -q "device gap" "$T/val.txt" && ok "validate prints the device gap" || fail "validate output"

# --reuse takes kept device runs of the same program, device and period as
# they are (no device run is made: no log), and redoes one that is not.
mkdir -p "$T/keep"
cp "$T/slow.hmt" "$T/keep/dev-slow.hmt"; cp "$T/fast.hmt" "$T/keep/dev-fast.hmt"
"$H" validate --machine "$M" --placements 3 -j 2 --json "$T/val2.json" --keep "$T/keep" --reuse -- "$P" "${ARGS[@]}" > /dev/null || fail "validate --reuse"
[ ! -e "$T/keep/dev-slow.log" ] && [ ! -e "$T/keep/dev-fast.log" ] && ok "validate --reuse: no device run made" || fail "validate --reuse ran the devices"
cmp -s "$T/slow.hmt" "$T/keep/dev-slow.hmt" && cmp -s "$T/fast.hmt" "$T/keep/dev-fast.hmt" && ok "validate --reuse: kept runs left as they are" || fail "validate --reuse rewrote a kept run"
# The kept runs come from other processes than validate's own device runs:
# the simulated heap and stack can sit at other addresses (environment size,
# a sanitizer's allocator), which moves runtimes by about 1e-5.
for r in 0 1 2; do
  near "$(j "$T/val2.json" ".rows[$r].estimates.default.runtime_s")" "$(j "$T/val.json" ".rows[$r].estimates.default.runtime_s")" 1e-3 "validate --reuse: row $r estimated as from fresh device runs"
done
cp "$T/fast.hmt" "$T/keep/dev-slow.hmt"
"$H" validate --machine "$M" --placements 1 -j 2 --keep "$T/keep" --reuse -- "$P" "${ARGS[@]}" > /dev/null || fail "validate --reuse (wrong device)"
[ -e "$T/keep/dev-slow.log" ] && [ ! -e "$T/keep/dev-fast.log" ] && ok "validate --reuse: a run of another device is redone" || fail "validate --reuse kept a run of another device"
bad 2 "--reuse needs --keep" validate --machine "$M" --reuse -- "$P" "${ARGS[@]}"

# A placement drawn twice is simulated once, and both rows carry its runtime.
mkdir -p "$T/keep8"
cp "$T/slow.hmt" "$T/keep8/dev-slow.hmt"; cp "$T/fast.hmt" "$T/keep8/dev-fast.hmt"
"$H" validate --machine "$M" --placements 8 -j 2 --json "$T/val8.json" --keep "$T/keep8" --reuse -- "$P" "${ARGS[@]}" > /dev/null || fail "validate 8"
runs=$(ls "$T/keep8"/placement-*.report.json | wc -l)
distinct=$(j "$T/val8.json" '[.rows[].placement] | unique | length')
[ "$runs" = "$distinct" ] && ok "validate: $distinct distinct placements of 8 simulated once each" || fail "validate: $runs runs for $distinct distinct placements"
[ "$(j "$T/val8.json" '[.rows | group_by(.placement)[] | map(.measured_s) | unique | length] | max')" = 1 ] \
  && ok "validate: equal placements, equal measured runtimes" || fail "validate: equal placements measured differently"
done_tests
