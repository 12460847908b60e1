#!/usr/bin/env bash
# Demo stage: a third-party proxy app through the pipeline. LULESH 2.0
# (bench/apps/lulesh, C++, unchanged sources) is built with the hetmem
# wrapper, run once per device of the cxl machine (DDR5 plus a CXL
# expander), and the estimator's traces feed hetmem optimize with DDR capped
# at a quarter of the tracked footprint; the chosen placement is estimated
# and then simulated, next to all data on DDR and all on CXL. The size is
# smaller than the benches' (-s 20 instead of 30) to keep the demo short;
# its per-element arrays (8,000 doubles, 62.5 KiB) are then under the
# default --min-size of 64K, so every run passes --min-size 32K, as
# hetmem record and hetmem run would need on hardware.
set -euo pipefail
w="$DEMO_WORK/lulesh"
mkdir -p "$w"
app="$HETMEM_BUILD/bench/apps/lulesh.sim"
if [ ! -x "$app" ]; then
  [ -x "$HETMEM_BUILD/bin/hetmem-cc" ] || { echo "hetmem-cc not built; skipping the LULESH demo"; exit 0; }
  echo "\$ cmake --build build --target proxy_lulesh.sim"
  cmake --build "$HETMEM_BUILD" --target proxy_lulesh.sim > "$w/build.log" 2>&1 ||
    { tail -5 "$w/build.log"; echo "demo: building LULESH failed (log above)" >&2; exit 1; }
fi
args=(-s 20 -i 10)
declare -A rt
for dev in ddr cxl; do
  echo "\$ hetmem sim -m cxl --min-size 32K --device $dev -o lulesh.$dev.hmt -- lulesh.sim ${args[*]}"
  hetmem sim -m cxl --min-size 32K --device "$dev" -o "$w/lulesh.$dev.hmt" --json "$w/lulesh.$dev.json" \
    -- "$app" "${args[@]}" > "$w/lulesh.$dev.out" 2>&1
  grep -E 'Final Origin Energy|MaxRelDiff|simulated runtime' "$w/lulesh.$dev.out"
  rt[$dev]=$(jq -r '.runtime_s' "$w/lulesh.$dev.json")
done
nobj=$(jq '.objects | length' "$w/lulesh.ddr.json")
cap=$(hetmem trace objects --json "$w/lulesh.ddr.hmt" | jq '[.objects[].max_bytes] | add / 4 | floor')
echo
echo "\$ hetmem optimize lulesh.ddr.hmt lulesh.cxl.hmt --capacity ddr=$cap --algo rl -o best.json"
hetmem optimize "$w/lulesh.ddr.hmt" "$w/lulesh.cxl.hmt" --capacity "ddr=$cap" --algo rl --seed 1 \
  --json -o "$w/best.json" > "$w/opt.json"
jq -r '"  predicted \(.predicted_runtime_s) s; all on ddr \(.references.all_default_s) s, first touch \(.references.first_touch_s) s, greedy \(.references.greedy_s) s; \(.estimator_calls) estimator calls"' "$w/opt.json"
echo
echo "\$ hetmem estimate --model all lulesh.ddr.hmt lulesh.cxl.hmt --placement best.json"
hetmem estimate --model all "$w/lulesh.ddr.hmt" "$w/lulesh.cxl.hmt" --placement "$w/best.json" --json > "$w/est.json"
pred=$(jq -r '.models.default.runtime_s' "$w/est.json")
lin=$(jq -r '.models.linear.runtime_s' "$w/est.json")
echo "  default model $pred s, linear model $lin s"
echo
echo "\$ hetmem sim -m cxl --min-size 32K --placement best.json -- lulesh.sim ${args[*]}"
hetmem sim -m cxl --min-size 32K --placement "$w/best.json" --json "$w/best.sim.json" -- "$app" "${args[@]}" \
  > "$w/best.sim.out" 2>&1
grep -E 'Final Origin Energy|simulated runtime' "$w/best.sim.out"
rt[best]=$(jq -r '.runtime_s' "$w/best.sim.json")
tracked=$(jq '([.objects[] | .bytes_read + .bytes_written] | add) as $t | 100 * $t / ($t + .untracked.bytes_read + .untracked.bytes_written) | floor' "$w/lulesh.ddr.json")
printf 'lulesh: LULESH 2.0 (-s 20 -i 10) on cxl, %s objects holding %s%% of the traffic, DDR capped at %s bytes: rl placement %.4f s simulated (default model %.4f s, linear %.4f s); all-DDR %.4f s, all-CXL %.4f s\n' \
  "$nobj" "$tracked" "$cap" "${rt[best]}" "$pred" "$lin" "${rt[ddr]}" "${rt[cxl]}" | tee -a "$DEMO_SUMMARY"
