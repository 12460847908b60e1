#!/usr/bin/env bash
# Demo stage: the placement pipeline on a mini-app. STREAM runs in the
# simulated KNL (DDR4 + MCDRAM, flat mode) once per device with all data on
# it, writing one sampled trace per device (the differential traces); the
# traces are inspected; then a mixed placement that puts the arrays c and a
# in MCDRAM is measured in the same simulator.
set -euo pipefail
app="$HETMEM_BUILD/miniapps/stream.sim"
[ -x "$app" ] || { echo "stream.sim not built; skipping the pipeline demo"; exit 0; }
w="$DEMO_WORK/pipeline"
mkdir -p "$w"
declare -A rt
for dev in ddr mcdram; do
  echo "\$ hetmem sim -m knl-mcdram --device $dev -o stream.$dev.hmt --sample-period 1000 -- stream.sim --size tiny"
  hetmem sim -m knl-mcdram --device "$dev" -o "$w/stream.$dev.hmt" --sample-period 1000 \
    --json "$w/stream.$dev.json" -- "$app" --size tiny > "$w/stream.$dev.out" 2>&1
  grep -E 'verification|simulated runtime' "$w/stream.$dev.out"
  rt[$dev]=$(jq -r '.runtime_s * 1000' "$w/stream.$dev.json")
done
echo
echo "\$ hetmem trace info stream.mcdram.hmt"
hetmem trace info "$w/stream.mcdram.hmt" | sed -n '1,14p'
echo
echo "\$ hetmem trace objects stream.ddr.hmt   (first rows)"
hetmem trace objects "$w/stream.ddr.hmt" | sed -n '1,8p'
cat > "$w/c-a-in-mcdram.json" <<'J'
{ "default": "ddr",
  "rules": [ {"name": "c", "device": "mcdram"},
             {"name": "a", "device": "mcdram"} ] }
J
echo
echo "\$ hetmem sim -m knl-mcdram --placement c-a-in-mcdram.json -- stream.sim --size tiny"
hetmem sim -m knl-mcdram --placement "$w/c-a-in-mcdram.json" --json "$w/stream.mixed.json" \
  -- "$app" --size tiny > "$w/stream.mixed.out" 2>&1
grep -E 'verification|simulated runtime' "$w/stream.mixed.out"
rt[mixed]=$(jq -r '.runtime_s * 1000' "$w/stream.mixed.json")
samples=$(hetmem trace info --json "$w/stream.ddr.hmt" | jq -r '.samples')
printf 'pipeline: stream (tiny) on knl-mcdram: %.1f ms all-DDR, %.1f ms all-MCDRAM, %.1f ms with c and a in MCDRAM; %s samples in the DDR trace\n' \
  "${rt[ddr]}" "${rt[mcdram]}" "${rt[mixed]}" "$samples" | tee -a "$DEMO_SUMMARY"
echo "pipeline: hetmem estimate and hetmem optimize are not built yet; the mixed runtime above is measured, not estimated" >> "$DEMO_SUMMARY"
