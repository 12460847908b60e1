#!/usr/bin/env bash
# hetmem validate on programs as they are: one that returns a status on
# success (refused with the status named, accepted with --allow-exit),
# placements drawn distinct (two objects on two devices have only a few),
# an OpenMP build refused before any run unless OMP_NUM_THREADS=1, and the
# runs of optimize --refine held to the same rule.
. "$HETMEM_SRC/tests/integration/sim_lib.sh"
CC_="$HETMEM_BIN/hetmem-cc"
cat > "$T/st.c" <<'C'
#include <stdlib.h>
int main(void)
{
    size_t n = 1 << 17;
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), s = 0;
    for (size_t i = 0; i < n; i++) a[i] = (double)i, b[i] = 1;
    for (size_t r = 0; r < 3; r++)
        for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s > 0 ? 3 : 0;
}
C
"$CC_" -O2 "$T/st.c" -o "$T/st.sim" || { fail "hetmem-cc st.c"; done_tests; }
"$H" validate --machine "$M" --placements 2 -j 2 -- "$T/st.sim" > "$T/v1.out" 2> "$T/v1.err"
rc=$?
[ $rc = 1 ] && grep -q "program exited with status 3" "$T/v1.err" && grep -q -- "--allow-exit" "$T/v1.err" \
  && ok "exit status 3 refused and named" || fail "rc $rc: $(cat "$T/v1.err")"
head -1 "$T/v1.err" | grep -q "^hetmem: device runs: the program exited with status 3" && ok "the first line says it" \
  || fail "first line: $(head -1 "$T/v1.err")"
"$H" validate --machine "$M" --placements 12 -j 2 --allow-exit 3 --json "$T/v.json" -- "$T/st.sim" > "$T/v2.out" 2> "$T/v2.err" \
  || fail "--allow-exit 3: $(cat "$T/v2.err")"
rows=$(j "$T/v.json" '.rows | length')
distinct=$(j "$T/v.json" '[.rows[].placement] | unique | length')
[ -n "$rows" ] && [ "$rows" -ge 2 ] && [ "$rows" = "$distinct" ] && ok "$rows rows, all distinct placements" \
  || fail "rows $rows, distinct $distinct"
"$H" validate --machine "$M" --allow-exit 0 -- "$T/st.sim" > /dev/null 2> "$T/v3.err"
[ $? = 2 ] && grep -q "'0' is not an integer from 1 to 255" "$T/v3.err" && ok "--allow-exit 0 is a usage error" || fail "--allow-exit 0: $(cat "$T/v3.err")"

# optimize --refine runs the program too: the same status refused with
# the option named, and accepted with --allow-exit.
for d in fast slow; do
  "$H" sim -m "$M" --device $d -o "$T/$d.hmt" -- "$T/st.sim" > /dev/null 2>&1
  [ -s "$T/$d.hmt" ] || fail "device run on $d wrote no trace"
done
(cd "$T" && TMPDIR="$T" "$H" optimize fast.hmt slow.hmt --capacity fast=512K --refine 1 > r1.out 2> r1.err)
rc=$?
[ $rc = 1 ] && grep -q "program exited with status 3" "$T/r1.err" && grep -q -- "--allow-exit 3" "$T/r1.err" \
  && ok "optimize --refine: exit status 3 refused and named" || fail "optimize --refine: rc $rc: $(cat "$T/r1.err")"
(cd "$T" && TMPDIR="$T" "$H" optimize fast.hmt slow.hmt --capacity fast=512K --refine 1 --allow-exit 3 --json \
  > r2.json 2> r2.err) || fail "optimize --refine --allow-exit 3: $(cat "$T/r2.err")"
m=$(jq -r '.refine.rounds[0].measured_s' "$T/r2.json" 2> /dev/null)
awk -v m="$m" 'BEGIN { exit !(m > 0) }' && ok "optimize --refine --allow-exit 3: round measured ($m s)" ||
  fail "optimize --refine --allow-exit 3: no measured round: $(head -c 300 "$T/r2.json")"
"$H" optimize "$T/fast.hmt" "$T/slow.hmt" --capacity fast=512K --allow-exit 3 > /dev/null 2> "$T/r3.err"
[ $? = 2 ] && grep -q "applies to the runs of --refine" "$T/r3.err" && ok "--allow-exit without --refine is a usage error" ||
  fail "--allow-exit without --refine: $(cat "$T/r3.err")"

cat > "$T/omp.c" <<'C'
#include <stdio.h>
int main(void)
{
    static double a[1 << 17];
    double s = 0;
    for (int r = 0; r < 3; r++) {
#pragma omp parallel for reduction(+ : s)
        for (int i = 0; i < (1 << 17); i++) s += (a[i] += i);
    }
    printf("%.0f\n", s);
    return 0;
}
C
if "$CC_" -O2 -fopenmp "$T/omp.c" -o "$T/omp.sim" 2> "$T/omp.cc.err"; then
  env -u OMP_NUM_THREADS "$H" validate --machine "$M" --keep "$T/k" -- "$T/omp.sim" > /dev/null 2> "$T/o.err"
  rc=$?
  [ $rc = 1 ] && grep -q "OMP_NUM_THREADS=1" "$T/o.err" && [ ! -e "$T/k/dev-slow.log" ] \
    && ok "OpenMP build refused before any run, with the way out" || fail "omp: rc $rc: $(cat "$T/o.err")"
  OMP_NUM_THREADS=1 "$H" validate --machine "$M" --placements 2 -j 2 -- "$T/omp.sim" > /dev/null 2> "$T/o1.err" \
    && ok "OpenMP build validated with OMP_NUM_THREADS=1" || fail "omp with one thread: $(cat "$T/o1.err")"
else
  echo "skip: no OpenMP compiler: $(head -1 "$T/omp.cc.err")"
fi
done_tests
