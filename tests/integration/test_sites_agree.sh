#!/usr/bin/env bash
# One program, one set of allocation sites: progs/sites.c (malloc through a
# helper, an inlined helper, calloc, posix_memalign, realloc, two mallocs on
# one line) and progs/sites_cxx.cc (a std::vector built in a function, one
# grown by push_back, new[] and nothrow new[]) are each built natively
# (-O2 -g, the compiler hetmem-cc uses) and with hetmem-cc/hetmem-c++ (-O2).
# hetmem record -b soft of both builds and hetmem sim of the hetmem-cc build
# must give the same site ids with the same source chains (the sim's
# objects of 64 KiB or more, record's --min-size); a placement naming a site
# by the id hetmem sim gave it binds that object under hetmem run in either
# build (the report, and get_mempolicy in the program), and one naming a
# site by the id a native recording gave it places it under hetmem sim.
set -u
. "$HETMEM_SRC/tests/integration/record_lib.sh"
command -v jq > /dev/null || { echo "jq not installed"; exit 77; }
[ -x "$HETMEM_BIN/hetmem-cc" ] || { echo "skip: hetmem-cc not built here"; exit 77; }
CC=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$HETMEM_BUILD/CMakeCache.txt")
CXX=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$HETMEM_BUILD/CMakeCache.txt")
M="$HETMEM_SRC/tests/sim-kernels/machines/two.json"
"${CC:-cc}" -O2 -g -o "$WORK/c.native" "$PROGS/sites.c" -lnuma &&
  HETMEM_CC="${CC:-cc}" "$HETMEM_BIN/hetmem-cc" -O2 -o "$WORK/c.sim" "$PROGS/sites.c" -lnuma &&
  "${CXX:-c++}" -O2 -g -o "$WORK/x.native" "$PROGS/sites_cxx.cc" &&
  HETMEM_CXX="${CXX:-c++}" "$HETMEM_BIN/hetmem-c++" -O2 -o "$WORK/x.sim" "$PROGS/sites_cxx.cc" ||
  { echo "FAIL: cannot compile"; exit 1; }

line_of() { grep -n -F -- "$2" "$PROGS/$1" | head -1 | cut -d: -f1; }
# "site@source" of each object of a trace, sorted.
sites_of() { "$H" trace objects --json "$1" | jq -r '[.objects[] | select(.max_bytes >= 65536) | "\(.site)@\(.source)"] | sort | .[]'; }

for p in c x; do
  "$H" record -b soft -o "$WORK/$p.rn.hmt" -- "$WORK/$p.native" > "$WORK/$p.rn.out" 2> "$WORK/err" ||
    bad "record $p.native: $(cat "$WORK/err")"
  "$H" record -b soft -o "$WORK/$p.rs.hmt" -- "$WORK/$p.sim" > /dev/null 2> "$WORK/err" ||
    bad "record $p.sim: $(cat "$WORK/err")"
  "$H" sim -m "$M" --device slow -o "$WORK/$p.s.hmt" --json "$WORK/$p.s.json" -- "$WORK/$p.sim" > /dev/null 2> "$WORK/err" ||
    bad "sim $p.sim: $(cat "$WORK/err")"
  for t in rn rs s; do sites_of "$WORK/$p.$t.hmt" > "$WORK/$p.$t.sites" 2> "$WORK/err" || bad "trace objects $p.$t: $(cat "$WORK/err")"; done
  if cmp -s "$WORK/$p.rn.sites" "$WORK/$p.s.sites" && cmp -s "$WORK/$p.rs.sites" "$WORK/$p.s.sites"; then
    ok "$p: record (native build), record (hetmem-cc build) and sim give the same $(wc -l < "$WORK/$p.s.sites") sites"
  else
    bad "$p: sites differ: $(diff "$WORK/$p.rn.sites" "$WORK/$p.s.sites" | tr '\n' ' ') | $(diff "$WORK/$p.rs.sites" "$WORK/$p.s.sites" | tr '\n' ' ')"
  fi
done

# The sites are the program's own lines, one per allocating call.
m=$(line_of sites.c 'double *p = malloc(n * sizeof(double));')
la=$(line_of sites.c 'double *a = make(n);') lb=$(line_of sites.c 'double *b = calloc(')
lz=$(line_of sites.c 'double *p = make(n);') lc=$(line_of sites.c 'double *c = make_zeroed(n);')
ld=$(line_of sites.c 'posix_memalign((void **)&d') le=$(line_of sites.c 'double *e = malloc(')
lr=$(line_of sites.c 'a = realloc(a,')
want="sites.c:$m make < sites.c:$la main
sites.c:$lb main
sites.c:$m make < sites.c:$lz make_zeroed < sites.c:$lc main
sites.c:$ld main
sites.c:$le main
sites.c:$le main
sites.c:$lr main"
got=$(cut -d@ -f2 "$WORK/c.s.sites" | sort)
[ "$got" = "$(sort <<< "$want")" ] && ok "C sources: helper, inlined helper, calloc, posix_memalign, two on one line, realloc" ||
  bad "C sources: '$(tr '\n' ';' <<< "$got")', want '$(sort <<< "$want" | tr '\n' ';')'"
[ "$(grep -c "@sites.c:$le main\$" "$WORK/c.s.sites")" = 2 ] && ok "two mallocs on one line: two site ids" ||
  bad "two mallocs on line $le: $(grep -c "@sites.c:$le main\$" "$WORK/c.s.sites") site ids"
lv=$(line_of sites_cxx.cc 'return std::vector<double>(n, v);') lf=$(line_of sites_cxx.cc '= filled(n, 1.0);')
lp=$(line_of sites_cxx.cc 'w.push_back(') lx=$(line_of sites_cxx.cc 'new double[n]()') ly=$(line_of sites_cxx.cc 'new (std::nothrow)')
want="sites_cxx.cc:$lv filled < sites_cxx.cc:$lf main
sites_cxx.cc:$lp main
sites_cxx.cc:$lx main
sites_cxx.cc:$ly main"
got=$(cut -d@ -f2 "$WORK/x.s.sites" | sort)
[ "$got" = "$(sort <<< "$want")" ] && ok "C++ sources: vector in a function, push_back, new[], nothrow new[]" ||
  bad "C++ sources: '$(tr '\n' ';' <<< "$got")', want '$(sort <<< "$want" | tr '\n' ';')'"

# hetmem run binds an object by the site id hetmem sim gave it.
cs=$(grep "@sites.c:$lb main\$" "$WORK/c.s.sites" | cut -d@ -f1)
xs=$(grep "@sites_cxx.cc:$lx main\$" "$WORK/x.s.sites" | cut -d@ -f1)
for p in c x; do
  s=$cs
  [ $p = x ] && s=$xs
  printf '{"default": "0", "rules": [{"site": "%s", "device": "node0"}]}\n' "$s" > "$WORK/$p.p.json"
  for k in native sim; do
    "$H" run --placement "$WORK/$p.p.json" --report "$WORK/$p.$k.r.json" -- "$WORK/$p.$k" > "$WORK/$p.$k.run" 2> "$WORK/err" ||
      { bad "run $p.$k: $(cat "$WORK/err")"; continue; }
    r=$(jq -r --arg s "$s" '[.objects[] | select(.site == $s) | .device] | join(",")' "$WORK/$p.$k.r.json")
    u=$(jq -r '.unmatched_rules | length' "$WORK/$p.$k.r.json")
    [ "$r" = node0 ] && [ "$u" = 0 ] && ok "run $p.$k: the object of sim's site $s placed by the rule" ||
      bad "run $p.$k: sim's site $s placed on '$r', $u unmatched rules"
  done
done
grep -q '^calloc policy 2 0x1$' "$WORK/c.native.run" && grep -q '^calloc policy 2 0x1$' "$WORK/c.sim.run" &&
  ok "the calloc'd block is bound to node 0 in both builds (get_mempolicy)" ||
  bad "calloc policy: native '$(grep calloc "$WORK/c.native.run")', hetmem-cc '$(grep calloc "$WORK/c.sim.run")'"
grep -q '^calloc policy 0 ' "$WORK/c.rn.out" && ok "not bound under record" || bad "record: $(grep calloc "$WORK/c.rn.out")"

# hetmem sim places an object by the site id a native recording gave it.
s=$(grep "@sites.c:$ld main\$" "$WORK/c.rn.sites" | cut -d@ -f1)
printf '{"default": "slow", "rules": [{"site": "%s", "device": "fast"}]}\n' "$s" > "$WORK/q.json"
"$H" sim -m "$M" --placement "$WORK/q.json" --json "$WORK/q.out.json" -- "$WORK/c.sim" > /dev/null 2> "$WORK/err" ||
  bad "sim --placement: $(cat "$WORK/err")"
r=$(jq -r '[.objects[] | select(.device == "fast") | .source] | join(",")' "$WORK/q.out.json")
[ "$r" = "sites.c:$ld main" ] && ! grep -q "matched nothing" "$WORK/err" &&
  ok "sim places the native recording's site $s (posix_memalign) on fast" || bad "sim with native site $s: on fast '$r'; $(cat "$WORK/err")"

[ $fail = 0 ] && echo "all passed"
exit $fail
