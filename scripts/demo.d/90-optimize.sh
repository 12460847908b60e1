#!/usr/bin/env bash
# Demo stage: placement search, checked in the simulator. STREAM's traces
# from the simulated KNL (one run per device) feed the estimator; hetmem
# optimize picks what goes into MCDRAM when it may hold only a quarter of the
# footprint; the chosen placement then runs in the simulator, next to all
# data in DDR and all data in MCDRAM.
set -euo pipefail
app="$HETMEM_BUILD/miniapps/stream.sim"
[ -x "$app" ] || { echo "stream.sim not built; skipping the optimize demo"; exit 0; }
w="$DEMO_WORK/optimize"
mkdir -p "$w"
declare -A rt
for dev in ddr mcdram; do
  if [ ! -s "$DEMO_WORK/pipeline/stream.$dev.hmt" ]; then
    hetmem sim -m knl-mcdram --device "$dev" -o "$w/stream.$dev.hmt" --json "$w/stream.$dev.json" \
      -- "$app" --size tiny > /dev/null 2>&1
  else
    cp "$DEMO_WORK/pipeline/stream.$dev.hmt" "$DEMO_WORK/pipeline/stream.$dev.json" "$w/"
  fi
  rt[$dev]=$(jq -r '.runtime_s' "$w/stream.$dev.json")
done
cap=$(hetmem trace objects --json "$w/stream.ddr.hmt" | jq '[.objects[].max_bytes] | add / 4 | floor')
echo "\$ hetmem optimize stream.ddr.hmt stream.mcdram.hmt --capacity mcdram=$cap --algo rl -o best.json"
hetmem optimize "$w/stream.ddr.hmt" "$w/stream.mcdram.hmt" --capacity "mcdram=$cap" --algo rl \
  -o "$w/best.json" | tee "$w/opt.out"
pred=$(hetmem optimize "$w/stream.ddr.hmt" "$w/stream.mcdram.hmt" --capacity "mcdram=$cap" --algo rl --json \
  | jq -r '.predicted_runtime_s')
echo
echo "\$ hetmem sim -m knl-mcdram --placement best.json -- stream.sim --size tiny"
hetmem sim -m knl-mcdram --placement "$w/best.json" --json "$w/best.sim.json" -- "$app" --size tiny \
  > "$w/best.sim.out" 2>&1
grep -E 'verification|simulated runtime' "$w/best.sim.out"
rt[best]=$(jq -r '.runtime_s' "$w/best.sim.json")
printf 'optimize: stream (tiny), MCDRAM capped at %s bytes: rl placement %.3f s simulated (%.3f s predicted); all-DDR %.3f s, all-MCDRAM %.3f s\n' \
  "$cap" "${rt[best]}" "$pred" "${rt[ddr]}" "${rt[mcdram]}" | tee -a "$DEMO_SUMMARY"
