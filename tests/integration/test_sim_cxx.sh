#!/usr/bin/env bash
# C++ through hetmem-c++ and hetmem sim: tests/sim-kernels/cxx.cc allocates
# two std::vector members (lines 19 and 20), a new[] (39), a make_unique
# array (40), an over-aligned new[] (41) and a nothrow new[] (42), each of
# its own size. Each must be an object of its own, named by the line of
# the program that allocated it (not by std::vector's or operator new's),
# read whole, placeable by "file:line", and named the same by
# `hetmem record -b soft`. Also: objects compiled apart and linked by
# hetmem-cc, and -flto dropped with a warning.
. "$HETMEM_SRC/tests/integration/sim_lib.sh"
[ -x "$K/cxx.sim" ] || { echo "cxx.sim not built"; exit 77; }
n=32768
declare -A want=([$((8 * n))]=cxx.cc:19 [$((16 * n))]=cxx.cc:20 [$((24 * n))]=cxx.cc:39
                 [$((32 * n))]=cxx.cc:40 [$((40 * n))]=cxx.cc:41 [$((10 * n))]=cxx.cc:42)

"$H" sim -m "$M" --json "$T/c.json" -- "$K/cxx.sim" > "$T/out" 2> "$T/err" || fail "cxx.sim failed: $(cat "$T/err")"
# sum of touch(): each array holds i & 7 over whole multiples of 8; the
# aligned new[] is 64-byte aligned.
[ "$(head -1 "$T/out" | awk '{print $2}')" = 1 ] && ok "aligned new[] is 64-byte aligned" || fail "aligned new[] misaligned: $(cat "$T/out")"
nobj=$(j "$T/c.json" '[.objects[] | select(.bytes_allocated > 0)] | length')
nsites=$(j "$T/c.json" '[.objects[].site] | unique | length')
[ "$nobj" = 6 ] && [ "$nsites" = 6 ] && ok "6 objects, 6 sites" || fail "$nobj objects, $nsites sites, want 6 and 6"
for size in "${!want[@]}"; do
  src=$(j "$T/c.json" ".objects[] | select(.bytes_allocated == $size) | .source | split(\" \")[0]")
  rd=$(j "$T/c.json" ".objects[] | select(.bytes_allocated == $size) | .bytes_read")
  [ "$src" = "${want[$size]}" ] && ok "$size bytes: $src" || fail "$size bytes: source '$src', want ${want[$size]}"
  [ "${rd:-0}" -ge "$size" ] && ok "$size bytes: read $rd" || fail "$size bytes: read ${rd:-none} < $size"
done

# A placement naming a site by file:line places it (and only it).
echo '{"default": "slow", "rules": [{"site": "cxx.cc:39", "device": "fast"}]}' > "$T/p.json"
"$H" sim -m "$M" --placement "$T/p.json" --json "$T/p.out.json" -- "$K/cxx.sim" > /dev/null 2> "$T/err" \
  || fail "sim --placement failed: $(cat "$T/err")"
dev=$(j "$T/p.out.json" ".objects[] | select(.source | startswith(\"cxx.cc:39 \")) | .device")
others=$(j "$T/p.out.json" '[.objects[] | select(.source | startswith("cxx.cc:39 ") | not) | .device] | unique | join(",")')
[ "$dev" = fast ] && [ "$others" = slow ] && ok "site cxx.cc:39 placed on fast, the rest on slow" \
  || fail "file:line placement: cxx.cc:39 on '$dev', others on '$others'"
grep -q "matched nothing" "$T/err" && fail "file:line rule reported as matching nothing: $(cat "$T/err")"
# A caller's line names what it allocates through inlined code: main's
# line 38 constructs the Mesh, whose two vectors go to fast.
echo '{"default": "slow", "rules": [{"site": "cxx.cc:38", "device": "fast"}]}' > "$T/p38.json"
"$H" sim -m "$M" --placement "$T/p38.json" --json "$T/p38.out.json" -- "$K/cxx.sim" > /dev/null 2>&1 || fail "sim p38"
on_fast=$(j "$T/p38.out.json" '[.objects[] | select(.device == "fast") | .bytes_allocated] | sort | join(",")')
[ "$on_fast" = "$((8 * n)),$((16 * n))" ] && ok "cxx.cc:38 places the Mesh's two vectors" || fail "cxx.cc:38 placed: $on_fast"

# The estimator names objects by source too, and a file:line rule moves the estimate.
for d in slow fast; do
  "$H" sim -m "$M" --device $d -o "$T/$d.hmt" --sample-period 200 -- "$K/cxx.sim" > /dev/null 2>&1 || fail "sim --device $d"
done
# The 1.25 MiB array (line 41) is the one with memory time in these runs.
echo '{"default": "slow", "rules": [{"site": "cxx.cc:41", "device": "fast"}]}' > "$T/p41.json"
"$H" estimate "$T/slow.hmt" "$T/fast.hmt" --placement "$T/p41.json" --json > "$T/e.json" 2> "$T/err" \
  || fail "estimate with a file:line rule: $(cat "$T/err")"
esrc=$(jq -r '[.models.default.objects[]?.source // empty | split(" ")[0]] | sort | join(",")' "$T/e.json" 2>/dev/null)
[ "$esrc" = "cxx.cc:19,cxx.cc:20,cxx.cc:39,cxx.cc:40,cxx.cc:41,cxx.cc:42" ] && ok "estimate lists sources" \
  || fail "estimate sources '$esrc'"
est=$(jq -r '.models.default.runtime_s' "$T/e.json") slow=$(jq -r '.devices[0].measured_s' "$T/e.json")
lt "$est" "$slow" "cxx.cc:41 on fast estimated faster than all on slow"

# optimize --by-source writes the placement with file:line rules (each line
# unique to its object), which estimates exactly as the site-id placement.
"$H" optimize "$T/slow.hmt" "$T/fast.hmt" --capacity fast=2M --algo greedy -o "$T/oid.json" > /dev/null 2> "$T/err" \
  || fail "optimize: $(cat "$T/err")"
"$H" optimize "$T/slow.hmt" "$T/fast.hmt" --capacity fast=2M --algo greedy --by-source -o "$T/osrc.json" > /dev/null \
  2> "$T/err" || fail "optimize --by-source: $(cat "$T/err")"
nid=$(jq '[.rules[] | select(.site | startswith("0x"))] | length' "$T/oid.json")
srcs=$(jq -r '[.rules[].site] | join(",")' "$T/osrc.json")
[ "$nid" -ge 1 ] && [ "$(jq '.rules | length' "$T/osrc.json")" = "$nid" ] && ! grep -q '"0x' "$T/osrc.json" \
  && [[ "$srcs" == cxx.cc:* ]] && ok "optimize --by-source names $nid objects by line ($srcs)" \
  || fail "optimize --by-source: '$srcs' for $nid site-id rules"
e1=$("$H" estimate "$T/slow.hmt" "$T/fast.hmt" --placement "$T/oid.json" --json 2>/dev/null | jq -r '.models.default.runtime_s')
e2=$("$H" estimate "$T/slow.hmt" "$T/fast.hmt" --placement "$T/osrc.json" --json 2>/dev/null | jq -r '.models.default.runtime_s')
[ -n "$e1" ] && [ "$e1" = "$e2" ] && ok "by-source placement estimates as the site-id one ($e1 s)" \
  || fail "by-source estimate '$e2', site-id '$e1'"

# hetmem record (software sampler) on the same binary names the same lines.
if "$H" record -b soft -o "$T/r.hmt" -- "$K/cxx.sim" > /dev/null 2> "$T/err"; then
  rsrc=$("$H" trace objects --json "$T/r.hmt" 2>/dev/null | jq -r '[.objects[].source // empty | split(" ")[0]] | sort | join(",")')
  ssrc=$(j "$T/c.json" '[.objects[].source // empty | split(" ")[0]] | sort | join(",")')
  [ -n "$rsrc" ] && [ "$rsrc" = "$ssrc" ] && ok "record names the same sites ($rsrc)" || fail "record sources '$rsrc', sim '$ssrc'"
else
  echo "skip: record -b soft unavailable: $(head -1 "$T/err")"
fi

# hetmem run (the preload, on this machine's memory) names and matches sites
# by source line too: the rule below matches (no unmatched rules) and the
# report gives each object's source.
echo '{"default": "ddr", "rules": [{"site": "cxx.cc:41", "device": "ddr"}]}' > "$T/pr.json"
if "$H" run --placement "$T/pr.json" --report "$T/rr.json" -- "$K/cxx.sim" > /dev/null 2> "$T/err"; then
  um=$(j "$T/rr.json" '.unmatched_rules | length')
  rs=$(j "$T/rr.json" '.objects[] | select(.size == 1310720) | .source | split(" ")[0]')
  [ "$um" = 0 ] && [ "$rs" = cxx.cc:41 ] && ok "run: cxx.cc:41 matched, reported with its source" \
    || fail "run: unmatched $um, source of the 1.25 MiB object '$rs'"
else
  echo "skip: hetmem run unavailable: $(head -1 "$T/err")"
fi

# Objects compiled apart: hetmem-cc links C++ objects with the C++ driver;
# -flto is dropped with a warning and the program is still instrumented.
CC_="$HETMEM_BIN/hetmem-cc" CXX_="$HETMEM_BIN/hetmem-c++"
cat > "$T/a.cc" <<'CC'
#include <vector>
extern "C" double fill(double *p, unsigned long n);
int main() { std::vector<double> v(1 << 17); return fill(v.data(), v.size()) > 0 ? 0 : 1; }
CC
cat > "$T/b.c" <<'C'
double fill(double *p, unsigned long n) { double s = 0; for (unsigned long i = 0; i < n; i++) s += (p[i] = 1); return s; }
C
( cd "$T" && "$CXX_" -O2 -flto -c a.cc -o a.o 2> lto.err && "$CC_" -O2 -c b.c -o b.o && "$CC_" a.o b.o -o ab.sim ) \
  || fail "separate compile and link failed"
grep -q "warning: -flto dropped" "$T/lto.err" && ok "-flto dropped with a warning" || fail "no -flto warning: $(cat "$T/lto.err")"
if [ -x "$T/ab.sim" ]; then
  "$H" sim -m "$M" --json "$T/ab.json" -- "$T/ab.sim" > /dev/null 2> "$T/err" || fail "ab.sim: $(cat "$T/err")"
  st=$(j "$T/ab.json" '.stores // 0')
  big=$(j "$T/ab.json" '[.objects[] | select(.bytes_allocated == 1048576)] | length')
  [ "${st:-0}" -ge $((1 << 17)) ] && [ "$big" = 1 ] && ok "two-file -flto program: $st stores, its vector an object" \
    || fail "two-file program: stores ${st:-?}, vector objects ${big:-?}"
fi
# Fortran: allocate goes through malloc, so each allocatable is an object
# named by its allocate statement.
if command -v gfortran >/dev/null; then
  printf '%s\n' 'program t' '  real(8), allocatable :: a(:), b(:)' '  integer :: i' '  allocate(a(131072))' \
    '  allocate(b(262144))' '  do i = 1, size(a)' '     a(i) = i' '  end do' '  b = 2' '  print *, sum(a) + sum(b)' \
    '  deallocate(a, b)' 'end program t' > "$T/f.f90"
  "$HETMEM_BIN/hetmem-fort" -O2 "$T/f.f90" -o "$T/f.sim" 2> "$T/f.err" || fail "hetmem-fort: $(cat "$T/f.err")"
  [ -s "$T/f.err" ] && fail "hetmem-fort warned: $(cat "$T/f.err")"
  "$H" sim -m "$M" --json "$T/f.json" -- "$T/f.sim" > /dev/null 2>&1 || fail "f.sim"
  fs=$(j "$T/f.json" '[.objects[] | "\(.source | split(" ")[0])=\(.bytes_allocated)"] | sort | join(",")')
  [ "$fs" = "f.f90:4=1048576,f.f90:5=2097152" ] && ok "Fortran allocatables: $fs" || fail "Fortran objects: $fs"
else
  echo "skip: no gfortran"
fi
done_tests
