#!/usr/bin/env bash
# hetmem run: a placement asked for and not applied is an error, never a
# warning on the way. (1) The kernel refuses an object's mbind: a captured
# two-node sysfs tree (HETMEM_SYSFS_ROOT) resolves device node1, which this
# machine lacks; the program runs on, the report marks the event failed
# (device null, nothing bound) and hetmem run ends with one "hetmem: run:"
# line and status 1. (2) The placement file is gone when a process of the
# command starts (a shell removes it, then execs the program): that
# process ends before main with "hetmem: HETMEM_PLACEMENT=FILE: why" and
# status 1. (3) A runtime started by hand with a device it cannot apply
# (HETMEM_BIND) does not start the program either.
set -u
. "$HETMEM_SRC/tests/integration/record_lib.sh"
command -v jq > /dev/null || { echo "jq not installed"; exit 77; }
cc_prog bindcheck -lnuma || { echo "FAIL: cannot compile"; exit 1; }
ROOT="$HETMEM_SRC/tests/fixtures/sysfs/skx-2s-ddr"
if [ -d /sys/devices/system/node/node1 ]; then
  echo "skip: this machine has a node 1: the kernel would not refuse it"; exit 77
fi

# (1) matrix goes to node1: mbind is refused (no such node here).
echo '{"default": "node0", "rules": [{"name": "matrix", "device": "node1"}]}' > "$WORK/m.json"
HETMEM_SYSFS_ROOT="$ROOT" "$H" run --placement "$WORK/m.json" --report "$WORK/m.out.json" -- "$WORK/bindcheck" \
  > "$WORK/m.out" 2> "$WORK/m.err"
rc=$?
[ $rc = 1 ] && ok "refused mbind: status 1" || bad "refused mbind: status $rc, want 1"
grep -q '^hetmem: run: 1 object placement could not be bound: the kernel refused mbind' "$WORK/m.err" &&
  ok "refused mbind: one error line" || bad "refused mbind: stderr '$(cat "$WORK/m.err")'"
grep -q '^hetmem-preload\[[0-9]*\]: mbind(.*node1) failed: ' "$WORK/m.err" && ok "the runtime says why" ||
  bad "no reason from the runtime: '$(cat "$WORK/m.err")'"
grep -q '^vector ' "$WORK/m.out" && ok "the program ran to its end" || bad "program output: $(cat "$WORK/m.out")"
r=$(jq -c '[.objects[] | select(.failed) | {name, requested, device, bound_bytes, moved}]' "$WORK/m.out.json" 2> /dev/null)
[ "$r" = '[{"name":"matrix","requested":"node1","device":null,"bound_bytes":0,"moved":false}]' ] &&
  ok "report: matrix's placement on node1 failed, nothing bound or moved" || bad "report failed events: ${r:-none}"
r=$(jq -c '[.sites[] | select(.failed > 0) | {name, requested, device, placements, failed, bound_bytes}]' "$WORK/m.out.json" 2> /dev/null)
[ "$r" = '[{"name":"matrix","requested":"node1","device":null,"placements":1,"failed":1,"bound_bytes":0}]' ] &&
  ok "report: matrix's site totals count the failed bind" || bad "report failed site totals: ${r:-none}"
# Without --report, the table on stderr says so too.
HETMEM_SYSFS_ROOT="$ROOT" "$H" run --placement "$WORK/m.json" -- "$WORK/bindcheck" > /dev/null 2> "$WORK/t.err"
grep -q '^0x[0-9a-f]* *matrix .* node1 *(failed) *bind failed ' "$WORK/t.err" && ok "table: matrix (failed)" ||
  bad "table: $(grep matrix "$WORK/t.err")"
# The same tree with a placement this machine can apply: no error.
echo '{"default": "node0", "rules": [{"name": "matrix", "device": "node0"}]}' > "$WORK/ok.json"
HETMEM_SYSFS_ROOT="$ROOT" "$H" run --placement "$WORK/ok.json" -- "$WORK/bindcheck" > /dev/null 2> "$WORK/ok.err" &&
  ! grep -q "could not be bound" "$WORK/ok.err" && ok "node0 under the same tree: status 0" ||
  bad "node0 under the same tree: '$(cat "$WORK/ok.err")'"

# (2) The file is removed after hetmem run checked it, before the program's process loads it.
cp "$WORK/ok.json" "$WORK/gone.json"
"$H" run --placement "$WORK/gone.json" -- sh -c 'rm -f "$1" && exec "$2"' sh "$WORK/gone.json" "$WORK/bindcheck" \
  > "$WORK/g.out" 2> "$WORK/g.err"
rc=$?
[ $rc = 1 ] && ok "placement gone: status 1" || bad "placement gone: status $rc, want 1"
grep -q "^hetmem: HETMEM_PLACEMENT=$WORK/gone.json: " "$WORK/g.err" && ok "placement gone: $(grep '^hetmem: HETMEM_PLACEMENT' "$WORK/g.err")" ||
  bad "placement gone: stderr '$(cat "$WORK/g.err")'"
[ ! -s "$WORK/g.out" ] && ok "placement gone: the program did not start" || bad "the program ran: $(cat "$WORK/g.out")"

# (3) The runtime by hand, with a device it cannot resolve.
P=$(dirname "$(readlink -f "$H")")/../lib/libhetmem_preload.so
[ -f "$P" ] || P=$(ls "$HETMEM_BUILD"/lib*/libhetmem_preload.so "$HETMEM_BUILD"/libhetmem_preload.so 2> /dev/null | head -1)
if [ -n "$P" ] && [ -f "$P" ]; then
  LD_PRELOAD="$P" HETMEM_BIND=no-such-device "$WORK/bindcheck" > "$WORK/b.out" 2> "$WORK/b.err"
  rc=$?
  [ $rc = 1 ] && grep -q '^hetmem: HETMEM_BIND=no-such-device: ' "$WORK/b.err" && [ ! -s "$WORK/b.out" ] &&
    ok "bad HETMEM_BIND: $(cat "$WORK/b.err")" || bad "bad HETMEM_BIND: status $rc, '$(cat "$WORK/b.err")'"
else
  bad "libhetmem_preload.so not found"
fi

[ $fail = 0 ] && echo "all passed"
exit $fail
