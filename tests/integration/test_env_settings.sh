#!/usr/bin/env bash
# hetmem record and hetmem run start their command with the runtime
# settings their options give, never with ones left in the caller's
# environment: a stray HETMEM_PLACEMENT/HETMEM_CAPACITY must not bind a
# recording, HETMEM_EVENTS=0 must not empty its trace, HETMEM_SIM_MACHINE
# must not start the simulator in it, and HETMEM_DEPTH/HETMEM_BIND must not
# change what hetmem run matches or binds; each ignored variable is named
# in a warning. HETMEM_LOG, a user's variable, still reaches the program.
set -u
. "$HETMEM_SRC/tests/integration/record_lib.sh"
command -v jq > /dev/null || { echo "jq not installed"; exit 77; }
cc_prog bindcheck -lnuma || { echo "FAIL: cannot compile"; exit 1; }
cc -O2 -g -o "$WORK/sites" "$PROGS/sites.c" -lnuma || { echo "FAIL: cannot compile"; exit 1; }

cat > "$WORK/p.json" <<'J'
{ "default": "0", "rules": [ {"name": "matrix", "device": "node0"}, {"name": "vector", "device": "node0"} ] }
J
# bindcheck prints "NAME NODE MODE MASK": MODE 0 is the default policy, 2 MPOL_BIND.
HETMEM_PLACEMENT="$WORK/p.json" HETMEM_CAPACITY=node0=1G HETMEM_EVENTS=0 HETMEM_SIM_MACHINE=/nonexistent \
  HETMEM_LOG=warn "$H" record -b none -o "$WORK/t.hmt" -- "$WORK/bindcheck" > "$WORK/r.out" 2> "$WORK/r.err" ||
  bad "record with stray settings: $(cat "$WORK/r.err")"
grep -q '^matrix [0-9-]* 0 ' "$WORK/r.out" && grep -q '^vector [0-9-]* 0 ' "$WORK/r.out" &&
  ok "stray HETMEM_PLACEMENT does not bind a recording" || bad "recorded objects bound: $(tr '\n' ' ' < "$WORK/r.out")"
n=$("$H" trace objects --json "$WORK/t.hmt" 2> /dev/null | jq -r '[.objects[] | select(.name == "matrix" or .name == "vector")] | length')
[ "$n" = 2 ] && ok "stray HETMEM_EVENTS=0 does not empty the trace (2 named objects)" || bad "trace has ${n:-no} named objects, want 2"
for v in HETMEM_PLACEMENT HETMEM_CAPACITY HETMEM_EVENTS HETMEM_SIM_MACHINE; do
  grep -q "^hetmem: warning: $v in the environment is ignored" "$WORK/r.err" && ok "record warns of $v" ||
    bad "no warning for $v: $(cat "$WORK/r.err")"
done
grep -q "HETMEM_LOG in the environment" "$WORK/r.err" && bad "HETMEM_LOG, a user's variable, reported as ignored" ||
  ok "HETMEM_LOG passed without a warning"

# hetmem run matches the site id a plain recording gave (a two-link site:
# make < main); HETMEM_DEPTH=1 in the environment would hash one link.
"$H" record -b none -o "$WORK/s.hmt" -- "$WORK/sites" > /dev/null 2>&1 || bad "record sites"
s=$("$H" trace objects --json "$WORK/s.hmt" | jq -r '[.objects[] | select(.source // "" | test("^sites\\.c:[0-9]+ make < sites\\.c:[0-9]+ main$")) | .site][0]')
printf '{"default": "0", "rules": [{"site": "%s", "device": "node0"}]}\n' "$s" > "$WORK/q.json"
HETMEM_DEPTH=1 HETMEM_BIND=node0 HETMEM_PERIOD=7 "$H" run --placement "$WORK/q.json" --report "$WORK/q.out.json" \
  -- "$WORK/sites" > /dev/null 2> "$WORK/q.err" || bad "run with stray settings: $(cat "$WORK/q.err")"
u=$(jq -r '.unmatched_rules | length' "$WORK/q.out.json" 2> /dev/null)
d=$(jq -r --arg s "$s" '[.objects[] | select(.site == $s) | .device] | join(",")' "$WORK/q.out.json" 2> /dev/null)
[ "$s" != null ] && [ "$u" = 0 ] && [ "$d" = node0 ] && ok "stray HETMEM_DEPTH does not change run's site ids ($s placed)" ||
  bad "run: site '$s' on '$d', ${u:-?} unmatched rules"
for v in HETMEM_DEPTH HETMEM_BIND HETMEM_PERIOD; do
  grep -q "^hetmem: warning: $v in the environment is ignored" "$WORK/q.err" && ok "run warns of $v" ||
    bad "no warning for $v: $(cat "$WORK/q.err")"
done

[ $fail = 0 ] && echo "all passed"
exit $fail
