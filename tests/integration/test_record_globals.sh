#!/usr/bin/env bash
# Global and static arrays are objects of a recording, as in hetmem sim:
# hetmem record -b soft on gstream (a global gbig and a file-static sbig,
# 32 MiB each, streamed 3:1; gsmall, a global under 64 KiB, is no object)
# gives each array an allocation, a name and a site record, so that its
# samples are attributed; the site id is the one hetmem sim gives the same
# symbol, so that a placement written from either trace applies to the
# other; hetmem run places the arrays a rule names by that site id or by
# the declaring line.
set -u
. "$HETMEM_SRC/tests/integration/record_lib.sh"
command -v jq > /dev/null || { echo "jq not installed"; exit 77; }
cc_prog gstream -lnuma || { echo "cannot compile"; exit 1; }
build_attr || { echo "cannot build trace helper"; exit 1; }
# Sample counts follow the CPU time the program got (see test_record.sh).
cpu_of() { sed -n 's/^cpu \([0-9.]*\)$/\1/p' "$1" | tail -1; }
want_for() { awk -v c="${1:-0}" -v f="$2" 'BEGIN {printf "%d", c * 1000 * f}'; }
gline=$(grep -n '^double gbig\[' "$PROGS/gstream.c" | cut -d: -f1)
sline=$(grep -n '^static double sbig\[' "$PROGS/gstream.c" | cut -d: -f1)

"$H" record -b soft -o "$WORK/g.hmt" -- "$WORK/gstream" 1.0 > "$WORK/g.out" 2> "$WORK/g.err" ||
  { bad "record: $(cat "$WORK/g.err")"; exit 1; }
"$H" trace objects --json "$WORK/g.hmt" > "$WORK/o.json" 2> "$WORK/err" || bad "trace objects: $(cat "$WORK/err")"
r=$(jq -r '[.objects[] | "\(.name // "-")=\(.bytes)@\(.source // "-")"] | sort | join(",")' "$WORK/o.json")
want="gbig=33554432@gstream.c:$gline,sbig=33554432@gstream.c:$sline"
[ "$r" = "$want" ] && ok "objects: $r" || bad "objects '$r', want '$want'"
# Each frame names the array by module offset and symbol.
for a in gbig sbig; do
  f=$(jq -r ".objects[] | select(.name == \"$a\") | .frames" "$WORK/o.json")
  [[ "$f" =~ ^gstream\+0x[0-9a-f]+\ $a\ at\ gstream\.c:[0-9]+$ ]] && ok "$a frame: $f" || bad "$a frame: '$f'"
done
# The samples taken while streaming fall in the arrays, 3:1.
"$WORK/trace_attr" "$WORK/g.hmt" > "$WORK/g.attr" || bad "trace_attr"
read -r _ _ _ _ _ inG _ < <(awk '$4 == "gbig"' "$WORK/g.attr")
read -r _ _ _ _ _ inS _ < <(awk '$4 == "sbig"' "$WORK/g.attr")
inG=${inG:-0} inS=${inS:-0}
cpu=$(cpu_of "$WORK/g.err"); want=$(want_for "$cpu" 0.25)
if [ -z "$cpu" ] || [ $((inG + inS)) -lt "$want" ] || [ $((inG + inS)) -lt 100 ]; then
  bad "too few samples in the arrays while streaming ($((inG + inS)), want $want and at least 100 for ${cpu:-?} s of CPU time)"
else ok "$((inG + inS)) samples in the arrays while streaming for $cpu s of CPU time (want $want)"; fi
share=$(( 100 * inG / (inG + inS > 0 ? inG + inS : 1) ))
[ "$share" -ge 60 ] && [ "$share" -le 90 ] && ok "gbig share $share% (75 +-15)" || bad "gbig share $share% not within 75 +-15"
# A site id is the symbol's, the same in every run and in hetmem sim.
"$H" record -b none -o "$WORK/g2.hmt" -- "$WORK/gstream" 0.01 > /dev/null 2>&1 || bad "second record"
s1=$(jq -r '[.objects[] | "\(.name)=\(.site)"] | sort | join(",")' "$WORK/o.json")
s2=$("$H" trace objects --json "$WORK/g2.hmt" | jq -r '[.objects[] | "\(.name)=\(.site)"] | sort | join(",")')
[ "$s1" = "$s2" ] && ok "site ids stable across runs: $s1" || bad "site ids differ: '$s1' and '$s2'"
K="$HETMEM_BUILD/tests/sim-kernels"
if [ -x "$K/statics.sim" ]; then
  # The same hetmem-cc program, simulated and recorded: its arrays are the
  # same objects, with the same site ids and declaring lines.
  "$H" sim -m "$HETMEM_SRC/tests/sim-kernels/machines/two.json" --device slow -o "$WORK/s.hmt" --sample-period 1000 \
    -- "$K/statics.sim" 1 > /dev/null 2> "$WORK/err" || bad "sim statics: $(cat "$WORK/err")"
  "$H" record -b soft -o "$WORK/r.hmt" -- "$K/statics.sim" 1 > /dev/null 2> "$WORK/err" || bad "record statics: $(cat "$WORK/err")"
  q='[.objects[] | select(.name) | "\(.name)=\(.site)@\(.source)"] | sort | join(",")'
  ss=$("$H" trace objects --json "$WORK/s.hmt" | jq -r "$q") rs=$("$H" trace objects --json "$WORK/r.hmt" | jq -r "$q")
  [ -n "$ss" ] && [ "$ss" = "$rs" ] && [[ "$ss" == *"sarr=0x"*"@statics.c:12"* ]] &&
    ok "sim and record agree on statics.sim's arrays: $ss" || bad "sim '$ss', record '$rs'"
else
  echo "skip: statics.sim not built (no hetmem-cc here)"
fi

# hetmem run: a rule naming gbig by the site id the recording gave it and
# one naming sbig by its declaring line bind their whole pages to node 0
# before main (gstream reads gbig's policy first thing).
site=$(jq -r '.objects[] | select(.name == "gbig") | .site' "$WORK/o.json")
cat > "$WORK/p.json" <<J
{ "default": "0",
  "rules": [ {"site": "$site", "device": "node0"}, {"site": "gstream.c:$sline", "device": "node0"} ] }
J
"$H" run --placement "$WORK/p.json" --report "$WORK/r.json" -- "$WORK/gstream" 0.01 > "$WORK/run.out" 2> "$WORK/run.err" ||
  bad "run: $(cat "$WORK/run.err")"
grep -q '^gbig policy 2 0x1$' "$WORK/run.out" && ok "gbig bound to node 0 before main" || bad "gbig: $(head -1 "$WORK/run.out")"
r=$(jq -r '[.objects[] | select(.phase == null) | "\(.name)=\(.device):\(.global):\(.source)"] | sort | join(",")' "$WORK/r.json")
u=$(jq -r '.unmatched_rules | length' "$WORK/r.json")
[ "$r" = "gbig=node0:true:gstream.c:$gline,sbig=node0:true:gstream.c:$sline" ] && [ "$u" = 0 ] &&
  ok "run placed both arrays: $r" || bad "run report: $r, $u unmatched rules"
"$WORK/gstream" 0.01 2> /dev/null | grep -q '^gbig policy 0 ' && ok "not bound without hetmem run" || bad "bound without run"

[ $fail = 0 ] && echo "all passed"
exit $fail
