# The third-party proxy apps (bench/apps), C++: LULESH 2.0 builds through
# CMake natively and with hetmem-c++, verifies in both builds with the same
# final origin energy (bench/apps/check.py), and `hetmem sim --json` reports
# each of its thirteen node-centred std::vector fields (coordinates,
# velocities, accelerations, forces, nodal mass: lulesh.h's
# AllocateNodePersistent) as an object of its own, of exactly the size the
# program allocates, named by its own allocating line.
. "$HETMEM_SRC/tests/integration/proxy_lib.sh"
# The test size: -s 10, so (10 + 1)^3 nodes.
proxy_build_check lulesh hetmem-c++ "native and simulated runs verify with the same final origin energy"

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
# (Lines outside every allocation, malloc's headers and the free end of a
# page that the prefetcher reaches, count as untracked: about 5-8% here.)
pct=$(tracked_pct)
[ "$pct" -ge 90 ] && ok "$pct% of the traffic in tracked objects" || fail "only $pct% of the traffic in tracked objects"

done_tests
