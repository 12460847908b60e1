# The third-party proxy apps (bench/apps), C++: PENNANT builds through CMake
# natively and with hetmem-c++, both builds match upstream's reference output
# of its Sedov test and compute the same energies and zone fields
# (bench/apps/check.py), and `hetmem sim --json` reports each of its
# point-centred arrays (coordinates and velocities, Mesh.cc and Hydro.cc,
# allocated through PENNANT's Memory::alloc) as an object of its own, of
# exactly the size the program allocates, named by its own allocating line.
. "$HETMEM_SRC/tests/integration/proxy_lib.sh"
# The test size: upstream's test/sedov deck, 45 x 45 zones, 10 cycles.
proxy_build_check pennant hetmem-c++ "native and simulated runs match sedov.xy.std and each other"

# 46 x 46 points, one double2 (16 bytes) each: Mesh::init's px, px0, pxp and
# Hydro::init's pu, pu0, pap, pf. The allocating line in PENNANT's own code
# is the first frame of the source chain outside Memory.hh (Memory::alloc,
# inlined).
size=$((46 * 46 * 16))
want="Hydro.cc:84 Hydro.cc:85 Hydro.cc:86 Hydro.cc:87 Mesh.cc:119 Mesh.cc:122 Mesh.cc:123"
line='(.source // "" | split(" < ") | map(split(" ")[0]) | map(select(startswith("Memory.hh:") | not)) | .[0])'
q=".objects[] | select(.bytes_allocated == $size and ($line | test(\"^(Mesh|Hydro)\\\\.cc:\")))"
got=$(jq -r "$q | $line" "$T/sim.json" | sort | tr '\n' ' ' | sed 's/ $//')
[ "$got" = "$want" ] && ok "7 point arrays of $size bytes, one object per line: $got" ||
  fail "point arrays of $size bytes allocated at '$got' (want one object at each of '$want')"
sites=$(jq -r "$q | .site" "$T/sim.json" | sort -u | wc -l)
[ "$sites" = 7 ] && ok "7 distinct sites" || fail "$sites distinct sites among the point arrays (want 7)"
# (Their device traffic is not checked: at 45 x 45 zones most of the data
# stays in the caches: some of these arrays are never read from memory.)
# (Lines outside every allocation, malloc's headers and the free end of a
# page that the prefetcher reaches, count as untracked: about 5-8% here.)
pct=$(tracked_pct)
[ "$pct" -ge 90 ] && ok "$pct% of the traffic in tracked objects" || fail "only $pct% of the traffic in tracked objects"

done_tests
