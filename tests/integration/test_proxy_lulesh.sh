# The third-party proxy apps (bench/apps), C++: LULESH 2.0 builds through
# CMake natively and with hetmem-c++, verifies in both builds with the same
# final origin energy (bench/apps/check.py), and `hetmem sim --json` reports
# each of its thirteen node-centred std::vector fields (coordinates,
# velocities, accelerations, forces, nodal mass: lulesh.h's
# AllocateNodePersistent) as an object of its own, of exactly the size the
# program allocates, named by its own allocating line.
set -u
B="$HETMEM_BUILD"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
ok() { echo "ok: $*"; }
command -v jq >/dev/null || { echo "jq not installed"; exit 77; }
[ -x "$B/bin/hetmem-c++" ] || { echo "hetmem-c++ not built on this architecture"; exit 77; }

cmake --build "$B" --target proxy_lulesh proxy_lulesh.sim >"$T/build.log" 2>&1 ||
  { tail -5 "$T/build.log"; echo "FAIL: cmake --build --target proxy_lulesh proxy_lulesh.sim"; exit 1; }
ok "built $B/bench/apps/lulesh and lulesh.sim"

# The test size: -s 10, so (10 + 1)^3 nodes.
python3 "$HETMEM_SRC/bench/apps/check.py" lulesh test --build "$B" --json "$T/sim.json" ||
  { echo "FAIL: check.py lulesh test"; exit 1; }
ok "native and simulated runs verify with the same final origin energy"

size=$((11 * 11 * 11 * 8))
q=".objects[] | select(.bytes_allocated == $size and ((.source // \"\") | test(\"AllocateNodePersistent\")))"
n=$(jq "[$q] | length" "$T/sim.json")
[ "$n" = 13 ] && ok "13 node fields of $size bytes" || fail "$n node fields of $size bytes allocated in AllocateNodePersistent (want 13)"
sites=$(jq -r "$q | .site" "$T/sim.json" | sort -u | wc -l)
[ "$sites" = 13 ] && ok "13 distinct sites" || fail "$sites distinct sites among the node fields (want 13)"
lines=$(jq -r "$q | .source | split(\" \")[0]" "$T/sim.json" | sort -u)
nl=$(echo "$lines" | grep -c '^lulesh\.h:[0-9][0-9]*$')
[ "$nl" = 13 ] && ok "13 distinct allocating lines: $(echo $lines)" || fail "allocating lines: $(echo $lines)"
read0=$(jq "[$q | .bytes_read] | min" "$T/sim.json")
[ "$read0" -gt 0 ] 2>/dev/null && ok "every node field read (least $read0 bytes)" || fail "a node field with $read0 bytes read"
# Nearly all data is in tracked objects (C++ storage included).
pct=$(jq '([.objects[] | .bytes_read + .bytes_written] | add) as $t | 100 * $t / ($t + .untracked.bytes_read + .untracked.bytes_written) | floor' "$T/sim.json")
[ "$pct" -ge 95 ] && ok "$pct% of the traffic in tracked objects" || fail "only $pct% of the traffic in tracked objects"

[ $FAILS = 0 ] && echo "all passed" && exit 0
echo "$FAILS failed"
exit 1
