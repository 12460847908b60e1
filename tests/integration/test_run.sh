#!/usr/bin/env bash
# hetmem run: objects bound per a placement, checked against the kernel's
# view (move_pages for the pages' node, get_mempolicy for the range's
# policy); capacity spill; phase migration; report; bad input.
# In a sanitizer build the preload has UBSan but not ASan, the CLI both.
set -u
. "$HETMEM_SRC/tests/integration/record_lib.sh"
cc_prog bindcheck -lnuma || exit 1
jq_py() { /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); $2" "$1"; }

# Plain run: default policy, first touch.
"$WORK/bindcheck" > "$WORK/plain.out"
grep -q "^matrix 0 0 " "$WORK/plain.out" && ok "plain: default policy" || bad "plain: $(cat "$WORK/plain.out")"

cat > "$WORK/p.json" <<'J'
{ "default": "0",
  "rules": [ {"name": "matrix", "device": "node0"},
             {"name": "vector", "device": "node0"},
             {"name": "nothing", "device": "0"} ],
  "phases": { "solve": { "rules": [ {"name": "vector", "device": "ddr"} ] } } }
J
"$H" run --placement "$WORK/p.json" --report "$WORK/r.json" -- "$WORK/bindcheck" > "$WORK/run.out" 2> "$WORK/run.err" \
  || bad "run failed: $(cat "$WORK/run.err")"
# Both objects are bound to node 0 (MPOL_BIND, mask 0x1) and their pages sit
# on node 0, which is where the report says each went.
for obj in matrix vector; do
  read -r _ node mode mask < <(grep "^$obj " "$WORK/run.out")
  rep=$(jq_py "$WORK/r.json" "o=[x for x in d['objects'] if x['name']=='$obj' and x['phase'] is None]; print(o[0]['device'], o[0]['nodes'], o[0]['spilled'])")
  if [ "$mode" = 2 ] && [ "$mask" = 0x1 ] && [ "$rep" = "node0 [$node] False" ]; then ok "$obj: pages on node $node, policy bind 0x1, report '$rep'"
  else bad "$obj: kernel says node=$node mode=$mode mask=$mask, report says '$rep'"; fi
done
r=$(jq_py "$WORK/r.json" "print([x['name'] for x in d['objects'] if x['phase']=='solve' and x['moved']], d['unmatched_rules'])")
[ "$r" = "['vector'] ['rules[2] {\"name\": \"nothing\", \"device\": \"0\"} matched nothing']" ] \
  && ok "phase migration and unmatched rule reported" || bad "phase/unmatched: $r"
diff <(cut -d' ' -f1,2 "$WORK/plain.out") <(cut -d' ' -f1,2 "$WORK/run.out") > /dev/null || bad "program output changed"

# Capacity: node0 holds 6 MiB. matrix (8 MiB) spills to the default device;
# vector (4 MiB) still fits.
"$H" run --placement "$WORK/p.json" --capacity node0=6M --report "$WORK/s.json" -- "$WORK/bindcheck" > "$WORK/s.out" 2> "$WORK/s.err" \
  || bad "spill run failed: $(cat "$WORK/s.err")"
r=$(jq_py "$WORK/s.json" "o={x['name']:(x['requested'],x['device'],x['spilled']) for x in d['objects'] if x['name'] and x['phase'] is None}; print(o['matrix'], o['vector'], [(v['name'],v['capacity'],v['peak']) for v in d['devices'] if v['name']=='node0'])")
[ "$r" = "('node0', '0', True) ('node0', 'node0', False) [('node0', 6291456, 4194304)]" ] \
  && ok "oversized object spilled and reported" || bad "spill report: $r"
grep -q "1 spilled" "$WORK/s.err" && ok "spill in the summary line" || bad "summary: $(tail -1 "$WORK/s.err")"
read -r _ _ mode mask < <(grep "^matrix " "$WORK/s.out")
[ "$mode" = 2 ] && ok "spilled object bound to the fallback device" || bad "spilled matrix policy mode $mode"

# Without --report: a table on stderr, program output untouched.
"$H" run --placement "$WORK/p.json" -- "$WORK/bindcheck" > "$WORK/t.out" 2> "$WORK/t.err"
grep -q "^0x[0-9a-f]\{16\} matrix" "$WORK/t.err" && ok "table on stderr" || bad "no table: $(head -3 "$WORK/t.err")"

# Exit status passes through.
echo '{"default": "0"}' > "$WORK/d.json"
"$H" run --placement "$WORK/d.json" -- sh -c 'exit 4' 2>/dev/null; rc=$?
[ $rc = 4 ] && ok "exit 4 passed through" || bad "exit $rc, want 4"

# Capacity accounting under churn: pages_percent leaves a remainder on the
# default device, and phases re-place live objects; after every object is
# freed nothing may stay charged, and the peak is what was live at once
# (8 objects of at most 8 MiB, 14 MiB for the realloc, plus 3 MiB kept).
cc_prog churn || exit 1
cat > "$WORK/c.json" <<'J'
{ "default": "0",
  "rules": [ {"min_size": "1M", "pages_percent": 40, "device": "node0"} ],
  "phases": { "solve": { "rules": [ {"min_size": "1M", "pages_percent": 70, "device": "node0"} ] } } }
J
"$H" run --placement "$WORK/c.json" --report "$WORK/c-r.json" -- "$WORK/churn" 60 > /dev/null 2> "$WORK/c.err" \
  || bad "churn run failed: $(cat "$WORK/c.err")"
r=$(jq_py "$WORK/c-r.json" "print(sorted((v['name'], v['at_exit'], v['peak'] <= 80 << 20) for v in d['devices']))")
[ "$r" = "[('0', 0, True), ('node0', 0, True)]" ] \
  && ok "churn with pages_percent: nothing charged at exit, peak bounded" || bad "churn accounting: $r $(jq_py "$WORK/c-r.json" "print(d['devices'])")"

# Placement runs write no allocation, name or phase records (the report
# reads none): hetmem run hands the runtime HETMEM_EVENTS=0, and with it
# the spool of 20000 alloc/free cycles holds placement records only, under
# half of what the same run writes with the events (40 B and up a record).
"$H" run --placement "$WORK/c.json" -- env > "$WORK/env.out" 2> /dev/null
grep -qx "HETMEM_EVENTS=0" "$WORK/env.out" && ok "run: the runtime is told not to spool events" || bad "run: HETMEM_EVENTS=0 not set"
for ev in 0 1; do
  mkdir -p "$WORK/sp$ev"
  HETMEM_SPOOL="$WORK/sp$ev" HETMEM_PLACEMENT="$WORK/c.json" HETMEM_BACKEND= HETMEM_EVENTS=$ev \
    LD_PRELOAD="$HETMEM_BUILD/lib/libhetmem_preload.so" "$WORK/churn" 0 20000 > /dev/null 2>&1 || bad "spool run ($ev) failed"
done
s0=$(cat "$WORK"/sp0/*.spool | wc -c); s1=$(cat "$WORK"/sp1/*.spool | wc -c)
[ "$s0" -gt 20000 ] && [ $((2 * s0)) -lt "$s1" ] && ok "spool without events: $s0 bytes, with: $s1" \
  || bad "spool sizes without/with events: $s0 $s1"

# The object table reclaims freed entries: after 50k alloc/free cycles
# every object is still tracked and placed (counted in the sites' totals),
# and none is reported untracked. The report lists the first 10000 only.
"$H" run --placement "$WORK/c.json" --report "$WORK/k-r.json" -- "$WORK/churn" 0 50000 > /dev/null 2> "$WORK/k.err" \
  || bad "cycle run failed: $(cat "$WORK/k.err")"
r=$(jq_py "$WORK/k-r.json" "print(sum(s['placements'] for s in d['sites']), len(d['objects']), d['objects_omitted'], [v['at_exit'] for v in d['devices']])")
if [ "$r" = "50001 10000 40001 [0, 0]" ] && ! grep -q "not tracked" "$WORK/k.err"; then ok "50k alloc/free cycles: every object tracked and placed, the first 10000 listed"
else bad "after cycles: $r $(cat "$WORK/k.err")"; fi

# Phase re-placement order: at "hot" both named objects want node0, which
# has room for one; "first" was allocated first and keeps it, "second"
# spills, as in hetmem sim, although "second" lies at the lower address.
cc_prog order || exit 1
cat > "$WORK/ord.json" <<'J'
{ "default": "0", "rules": [],
  "phases": { "hot": { "rules": [ {"name": "first", "device": "node0"}, {"name": "second", "device": "node0"} ] } } }
J
"$H" run --placement "$WORK/ord.json" --capacity node0=3M --report "$WORK/ord-r.json" -- "$WORK/order" \
  > "$WORK/ord.out" 2> "$WORK/ord.err" || bad "order run failed: $(cat "$WORK/ord.err")"
r=$(jq_py "$WORK/ord-r.json" "print(sorted((o['name'], int(o['spilled'])) for o in d['objects'] if o['phase'] == 'hot'))")
below=$(cut -d' ' -f1 "$WORK/ord.out")
[ "$below" = 1 ] && [ "$r" = "[('first', 0), ('second', 1)]" ] \
  && ok "phase re-placement in allocation order: first keeps node0, second (lower address) spills" \
  || bad "phase re-placement order: second below first: $below, hot events: $r"

# A long run's report is bounded: the first --report-objects placement
# events are listed, the others only counted, and "sites" totals every
# event whatever the limit. Checked against the same run listing every
# event, and against the summary line. Small objects overflow node0's
# 1 MiB (spills); phase solve moves the large ones and moves them back.
cat > "$WORK/sp.json" <<'J'
{ "default": "0",
  "rules": [ {"min_size": "1M", "device": "0"}, {"device": "node0"} ],
  "phases": { "solve": { "rules": [ {"min_size": "1M", "device": "ddr"} ] } } }
J
"$H" run --placement "$WORK/sp.json" --capacity node0=1M --report-objects 100000 --report "$WORK/all-r.json" -- \
  "$WORK/churn" 12 3000 > /dev/null 2> "$WORK/all.err" || bad "full report run failed: $(cat "$WORK/all.err")"
"$H" run --placement "$WORK/sp.json" --capacity node0=1M --report-objects 100 --report "$WORK/cut-r.json" -- \
  "$WORK/churn" 12 3000 > /dev/null 2> "$WORK/cut.err" || bad "bounded report run failed: $(cat "$WORK/cut.err")"
summary() { sed -n 's/^hetmem: run: \([0-9]*\) object placements\{0,1\}, \([0-9]*\) spilled.*/\1 \2/p' "$1"; }
read -r n nsp < <(summary "$WORK/cut.err")
r=$(jq_py "$WORK/cut-r.json" "
a = json.load(open('$WORK/all-r.json'))
n, nsp = ${n:-0}, ${nsp:-0}
key = ('site', 'name', 'phase', 'requested', 'device', 'global')
grp = {}
for o in a['objects']:
    g = grp.setdefault(tuple(o[k] for k in key), dict({k: o[k] for k in key}, nodes=o['nodes'], placements=0, bytes=0,
                                                    bound_bytes=0, spilled=0, moved=0, failed=0,
                                                    **({'source': o['source']} if 'source' in o else {})))
    g['placements'] += 1; g['bytes'] += o['size']; g['bound_bytes'] += o['bound_bytes']
    g['spilled'] += o['spilled']; g['moved'] += o['moved']; g['failed'] += o.get('failed', False)
tot = lambda f: sum(x[f] for x in d['sites'])
noaddr = lambda l: [{k: v for k, v in o.items() if k != 'addr'} for o in l]
# A phase boundary re-places the live objects in record order, the same
# on every run: the two runs list the same first 100 events, moves and all.
first_move = next((i for i, o in enumerate(a['objects']) if o['moved']), n)
checks = {
    'meaningful': n > 1000 and nsp > 0 and any(o['moved'] for o in a['objects']),
    'all listed': len(a['objects']) == n and a['objects_omitted'] == 0,
    '100 listed': len(d['objects']) == 100,
    'omitted': d['objects_omitted'] == n - 100,
    'first events': first_move < 90 and noaddr(d['objects']) == noaddr(a['objects'][:100]),
    'placements': tot('placements') == n,
    'spilled': tot('spilled') == nsp,
    'bytes': tot('bytes') == sum(o['size'] for o in a['objects']),
    'bound_bytes': tot('bound_bytes') == sum(o['bound_bytes'] for o in a['objects']),
    'moved': tot('moved') == sum(o['moved'] for o in a['objects']),
    'sites of all': a['sites'] == list(grp.values()),
    'sites of cut': d['sites'] == a['sites'],
}
print(' '.join(k for k, v in checks.items() if not v) or 'ok')" 2>&1)
[ "$r" = ok ] && ok "--report-objects 100 of $n placements: 100 listed, $((n - 100)) omitted, sites total all of them" \
  || bad "bounded report ($n placements, $nsp spilled): failed: $r"
"$H" run --placement "$WORK/p.json" --report-objects 0 --report "$WORK/z-r.json" -- "$WORK/bindcheck" > /dev/null 2> "$WORK/z.err" \
  || bad "--report-objects 0 run failed: $(cat "$WORK/z.err")"
read -r n _ < <(summary "$WORK/z.err")
r=$(jq_py "$WORK/z-r.json" "print(d['objects'], d['objects_omitted'] == ${n:-0} > 0, [(x['name'], x['nodes']) for x in d['sites'] if x['name'] == 'matrix'])")
[ "$r" = "[] True [('matrix', [0])]" ] && ok "--report-objects 0: none listed, all in sites" || bad "--report-objects 0: $r"

# The table on stderr: one line per placement up to 50 placements, totals
# per site beyond (a long run would print a line per object).
table_rows() { grep -c '^0x[0-9a-f]\{16\} ' "$1"; }
"$H" run --placement "$WORK/c.json" -- "$WORK/churn" 0 49 > /dev/null 2> "$WORK/t50.err"
read -r n _ < <(summary "$WORK/t50.err")
if [ "${n:-}" = 50 ] && [ "$(table_rows "$WORK/t50.err")" = 50 ] && head -1 "$WORK/t50.err" | grep -q "^site  *name  *size  *requested  *device  *note  *source$"
then ok "50 placements: one table line each"; else bad "table of 50: $(head -3 "$WORK/t50.err")"; fi
"$H" run --placement "$WORK/c.json" -- "$WORK/churn" 0 50 > /dev/null 2> "$WORK/t51.err"
if [ "$(table_rows "$WORK/t51.err")" = 2 ] && grep -q "^hetmem: run: 51 object placements, more than 50: totals per site" "$WORK/t51.err"
then ok "51 placements: totals per site"; else bad "table of 51: $(head -5 "$WORK/t51.err")"; fi
"$H" run --placement "$WORK/sp.json" --capacity node0=1M -- "$WORK/churn" 12 3000 > /dev/null 2> "$WORK/tm.err"
read -r n nsp < <(summary "$WORK/tm.err")
r=$(awk '/^site / { print $4, $8, $9 } /^0x/ { p += $4; s += $9; m += $10 } END { print NR, p, s, m }' "$WORK/tm.err" | tr '\n' ' ')
want_m=$(jq_py "$WORK/all-r.json" "print(sum(o['moved'] for o in d['objects']))")
[ "$r" = "placements spilled moved 10 $n $nsp $want_m " ] \
  && ok "$n placements: a table of 7 sites, totals add up" || bad "site table ($n placements, $nsp spilled, $want_m moved): $r"

# Every unmatched rule is reported, however long the list (it used to be
# one spool record, cut at 4000 bytes without its terminator).
/usr/bin/python3 -c "
import json
rules = [{'name': 'never_named_object_with_a_rather_long_name_%03d' % i, 'device': '0'} for i in range(120)]
json.dump({'default': '0', 'rules': rules}, open('$WORK/many.json', 'w'))"
"$H" run --placement "$WORK/many.json" --report "$WORK/many-r.json" -- true 2> /dev/null || bad "run with 120 rules failed"
r=$(jq_py "$WORK/many-r.json" "u=d['unmatched_rules']; print(len(u), all(x.endswith('matched nothing') for x in u), len(d['devices']))")
[ "$r" = "120 True 1" ] && ok "120 unmatched rules reported whole" || bad "unmatched rules: $r"

# Reports merge across processes (bash, a pipeline, then the program): the
# rule matched in one process is not "unmatched", and each device is listed
# once (before: 6 unmatched copies, each device 6 times).
echo '{ "default": "0", "rules": [ {"name": "matrix", "device": "node0"} ] }' > "$WORK/p1.json"
"$H" run --placement "$WORK/p1.json" --report "$WORK/p1-r.json" -- \
  bash -c "true | cat > /dev/null; '$WORK/bindcheck' > /dev/null" 2> /dev/null || bad "pipeline run failed"
r=$(jq_py "$WORK/p1-r.json" "print(d['unmatched_rules'], sorted(v['name'] for v in d['devices']), min(v['processes'] for v in d['devices']) > 1)")
[ "$r" = "[] ['0', 'node0'] True" ] && ok "pipeline: reports merged across processes" || bad "pipeline report: $r"

# Global and static arrays placed by symbol: gvec (global), svec (static),
# lvec (a library's static) and cvec (a library's global that the program
# uses, so the program holds the live copy). The program reads the policy
# before main touches anything, so the binding was made at start-up: the
# whole pages inside each array are bound to node 0 (mode 2, mask 0x1) and
# the partial pages it shares with neighbours, like the unnamed "head", are
# left alone (mode 0); then move_pages finds every whole page on node 0.
cc -O2 -g -fPIC -shared -o "$WORK/libglobals_lib.so" "$PROGS/globals_lib.c" &&
  cc -O2 -g -fno-toplevel-reorder -I"$HETMEM_SRC/include" -o "$WORK/globals" "$PROGS/globals.c" \
    -L"$WORK" -lglobals_lib -Wl,-rpath,"$WORK" -lnuma || exit 1
cat > "$WORK/g.json" <<'J'
{ "default": "0",
  "rules": [ {"name": "gvec", "device": "node0"}, {"name": "svec", "device": "node0"},
             {"name": "lvec", "device": "node0"}, {"name": "cvec", "device": "node0"},
             {"name": "no_such_array", "device": "node0"} ],
  "phases": { "solve": { "rules": [ {"name": "svec", "device": "ddr"} ] } } }
J
"$H" run --placement "$WORK/g.json" --report "$WORK/g-r.json" -- "$WORK/globals" > "$WORK/g.out" 2> "$WORK/g.err"; rc=$?
[ $rc = 0 ] && ok "globals: run exit 0" || bad "globals run: rc $rc $(cat "$WORK/g.err")"
"$WORK/globals" > "$WORK/g-plain.out"
for a in gvec svec lvec cvec; do
  r=$(awk -v a=$a '$1 == a && $2 != "pages" && $2 !~ /^0x/ { printf "%s=%s/%s ", $2, $3, $4 }' "$WORK/g.out")
  case "$r" in
  "head="[0-]/* ) ;;
  *) bad "$a: leading partial page bound: $r"; continue ;;
  esac
  if [[ "$r" == *"first=2/0x1 last=2/0x1 tail="[0-]/* ]]; then ok "$a: whole pages bound to node 0 before main, partial pages left: $r"
  else bad "$a: policy $r"; fi
  read -r _ _ np on node < <(grep "^$a pages " "$WORK/g.out")
  [ "$np" -gt 0 ] && [ "$on" = "$np" ] && [ "$node" = 0 ] && ok "$a: $on of $np whole pages on node 0" ||
    bad "$a: pages $np on $on node $node"
  plain=$(awk -v a=$a '$1 == a && $2 == "first" { print $3 }' "$WORK/g-plain.out")
  [ "$plain" = 0 ] || bad "$a: bound without hetmem run (mode $plain)"
done
r=$(awk '$1 == "head" && $2 != "pages" && $2 !~ /^0x/ { printf "%s ", $3 }' "$WORK/g.out")
[ "$r" = "- 0 0 0 " ] && ok "unnamed neighbour not bound" || bad "head policy: $r"
# The report: one entry per array at start-up, at the address the program
# sees, bound_bytes = its whole pages; svec moves for phase solve and back.
r=$(jq_py "$WORK/g-r.json" "
import re
lay = {l.split()[0]: (int(l.split()[1], 16), int(l.split()[2])) for l in open('$WORK/g.out') if re.match(r'^\w+ 0x', l)}
pg = 4096
out = []
for a in ['gvec', 'svec', 'lvec', 'cvec']:
    e = [x for x in d['objects'] if x['name'] == a and x['phase'] is None and not x['moved']]
    lo = (lay[a][0] + pg - 1) // pg * pg; hi = (lay[a][0] + lay[a][1]) // pg * pg
    out.append(len(e) == 1 and e[0]['global'] and e[0]['device'] == 'node0' and e[0]['addr'] == lay[a][0] and
               e[0]['size'] == lay[a][1] and e[0]['bound_bytes'] == hi - lo and e[0]['nodes'] == [0])
mv = [(x['phase'], x['device']) for x in d['objects'] if x['name'] == 'svec' and x['moved']]
print(out, mv, d['unmatched_rules'])")
[ "$r" = "[True, True, True, True] [('solve', 'ddr'), (None, 'node0')] ['rules[4] {\"name\": \"no_such_array\", \"device\": \"node0\"} matched nothing']" ] &&
  ok "globals report: placements, phase moves, unknown symbol reported unmatched" || bad "globals report: $r"
"$H" run --placement "$WORK/g.json" -- "$WORK/globals" > /dev/null 2> "$WORK/g-t.err"
grep -q "^0x[0-9a-f]\{16\} gvec .*node0 *global" "$WORK/g-t.err" && ok "globals in the table" || bad "table: $(cat "$WORK/g-t.err")"
# The program's arrays of 64 KiB or more are objects without a rule naming
# them, as in hetmem sim: a size rule binds gvec and svec (8 MiB each) to
# node0, cvec (its 512 KiB copy in the program) is an object on the default
# device (bound there too), and lvec (the library's) and head are not.
echo '{"default": "0", "rules": [{"min_size": "8M", "device": "node0"}]}' > "$WORK/gsz.json"
"$H" run --placement "$WORK/gsz.json" --report "$WORK/gsz-r.json" -- "$WORK/globals" > "$WORK/gsz.out" 2> /dev/null ||
  bad "globals by size: run failed"
r=$(jq_py "$WORK/gsz-r.json" "print(sorted((x['name'], x['device']) for x in d['objects'] if x.get('global') and x['phase'] is None and not x['moved']))")
f=$(awk '$2 == "first" { printf "%s=%s ", $1, $3 }' "$WORK/gsz.out")
[ "$r" = "[('cvec', '0'), ('gvec', 'node0'), ('svec', 'node0')]" ] && [ "$f" = "head=0 gvec=2 svec=2 lvec=0 cvec=2 " ] &&
  ok "globals of 64 KiB or more are objects, placed by a size rule: $r" || bad "globals by size: $r, policies $f"
# A stripped program has no symbols to name: its rules match nothing and are
# reported; the library's array is still placed.
strip -o "$WORK/globals-stripped" "$WORK/globals"
"$H" run --placement "$WORK/g.json" --report "$WORK/gs-r.json" -- "$WORK/globals-stripped" > /dev/null 2>&1 || bad "stripped run failed"
r=$(jq_py "$WORK/gs-r.json" "print(sorted(x['name'] for x in d['objects'] if x['phase'] is None), len(d['unmatched_rules']))")
[ "$r" = "['cvec', 'lvec'] 4" ] && ok "stripped program: its arrays' rules reported unmatched" || bad "stripped: $r"

# Bad input.
expect() { # expect CODE PATTERN -- ARGS...
  local code=$1 pat=$2; shift 3
  local err; err=$("$H" run "$@" 2>&1 >/dev/null); local rc=$?
  if [ $rc = "$code" ] && grep -q -- "$pat" <<<"$err" && [ "$(wc -l <<<"$err")" = 1 ]; then ok "rejects: $*"
  else bad "'run $*': rc $rc (want $code), message '$err' (want /$pat/)"; fi
}
echo '{"default": "hbm9", "rules": []}' > "$WORK/bad-dev.json"
echo '{"default": "0", "rules": [' > "$WORK/bad-json.json"
expect 2 "placement FILE is required" -- -- true
expect 2 "missing command" -- --placement "$WORK/d.json"
expect 1 "unknown memory device.*hbm9" -- --placement "$WORK/bad-dev.json" -- true
expect 1 "bad-json.json" -- --placement "$WORK/bad-json.json" -- true
expect 1 "No such file" -- --placement "$WORK/missing.json" -- true
expect 1 "hbm is not a device of" -- --placement "$WORK/d.json" --capacity hbm=1G -- true
expect 2 "not DEV=SIZE" -- --placement "$WORK/d.json" --capacity 1G -- true
expect 2 "not a size" -- --placement "$WORK/d.json" --capacity 0=lots -- true
expect 2 "report-objects: '-1' is not a non-negative integer" -- --placement "$WORK/d.json" --report-objects -1 -- true
expect 2 "report-objects: 'lots' is not a non-negative integer" -- --placement "$WORK/d.json" --report-objects lots -- true
expect 2 "report-objects needs --report FILE" -- --placement "$WORK/d.json" --report-objects 10 -- true
exit $fail
