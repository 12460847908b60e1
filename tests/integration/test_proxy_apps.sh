# The third-party proxy apps (bench/apps): XSBench, a C program, builds
# through CMake natively and with hetmem-cc, verifies in both builds with the
# same answer (bench/apps/check.py), and `hetmem sim --json` reports each of
# its three large arrays as an object of its own, of exactly the size the
# program allocates, holding nearly all of the run's traffic.
. "$HETMEM_SRC/tests/integration/proxy_lib.sh"
# The test size: -s small (68 isotopes), -g 500 gridpoints per isotope.
proxy_build_check xsbench hetmem-cc "native and simulated runs verify with the same checksum"

iso=68 g=500
n=$((iso * g))
# GridInit.c: nuclide_grid (6 doubles a point), unionized_energy_array (one
# double a point), index_grid (one int per point and isotope).
declare -A want=([nuclide_grid]=$((n * 48)) [unionized_energy]=$((n * 8)) [index_grid]=$((n * iso * 4)))
sites=""
big_read=0
for name in nuclide_grid unionized_energy index_grid; do
  size=${want[$name]}
  count=$(jq "[.objects[] | select(.bytes_allocated == $size)] | length" "$T/sim.json")
  if [ "$count" != 1 ]; then
    fail "$name: $count objects of $size bytes (want 1)"
    continue
  fi
  site=$(jq -r ".objects[] | select(.bytes_allocated == $size) | .site" "$T/sim.json")
  read=$(jq ".objects[] | select(.bytes_allocated == $size) | .bytes_read" "$T/sim.json")
  if [ "$read" -ge "$size" ]; then ok "$name: one object $site of $size bytes, $read bytes read"
  else fail "$name: $read bytes read, less than its $size bytes"; fi
  sites="$sites $site"
  big_read=$((big_read + read))
done
distinct=$(echo $sites | tr ' ' '\n' | sort -u | wc -l)
[ "$distinct" = 3 ] && ok "three distinct sites" || fail "sites not distinct:$sites"
total=$(jq '([.objects[].bytes_read] | add) + .untracked.bytes_read' "$T/sim.json")
if [ $((big_read * 100)) -ge $((total * 90)) ]; then ok "the three arrays take $big_read of $total bytes read"
else fail "the three arrays take only $big_read of $total bytes read (< 90%)"; fi

done_tests
