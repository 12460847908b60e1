#!/usr/bin/env bash
# Demo stage: the placement pipeline on a mini-app. STREAM runs in the
# simulated KNL (DDR4 + MCDRAM, flat mode) once per device with all data on
# it, writing one sampled trace per device (the differential traces); the
# traces are inspected; the runtime of a mixed placement that puts the
# arrays c and a in MCDRAM is estimated from them, then measured in the same
# simulator; last, a short validation table over drawn placements.
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
echo "\$ hetmem estimate --model all stream.ddr.hmt stream.mcdram.hmt --placement c-a-in-mcdram.json"
hetmem estimate --model all "$w/stream.ddr.hmt" "$w/stream.mcdram.hmt" --placement "$w/c-a-in-mcdram.json" | sed -n '1,9p'
hetmem estimate --model all --json "$w/stream.ddr.hmt" "$w/stream.mcdram.hmt" --placement "$w/c-a-in-mcdram.json" > "$w/est.json"
echo
echo "\$ hetmem sim -m knl-mcdram --placement c-a-in-mcdram.json -- stream.sim --size tiny"
hetmem sim -m knl-mcdram --placement "$w/c-a-in-mcdram.json" --json "$w/stream.mixed.json" \
  -- "$app" --size tiny > "$w/stream.mixed.out" 2>&1
grep -E 'verification|simulated runtime' "$w/stream.mixed.out"
rt[mixed]=$(jq -r '.runtime_s * 1000' "$w/stream.mixed.json")
samples=$(hetmem trace info --json "$w/stream.ddr.hmt" | jq -r '.samples')
printf 'pipeline: stream (tiny) on knl-mcdram: %.1f ms all-DDR, %.1f ms all-MCDRAM, %.1f ms with c and a in MCDRAM; %s samples in the DDR trace\n' \
  "${rt[ddr]}" "${rt[mcdram]}" "${rt[mixed]}" "$samples" | tee -a "$DEMO_SUMMARY"
lin=$(jq -r '.models.linear.runtime_s * 1000' "$w/est.json"); def=$(jq -r '.models.default.runtime_s * 1000' "$w/est.json")
printf 'estimate: c and a in MCDRAM: %.1f ms (default model, %+.1f%%), %.1f ms (linear, %+.1f%%), measured %.1f ms\n' \
  "$def" "$(awk -v e="$def" -v m="${rt[mixed]}" 'BEGIN{print 100*(e-m)/m}')" \
  "$lin" "$(awk -v e="$lin" -v m="${rt[mixed]}" 'BEGIN{print 100*(e-m)/m}')" "${rt[mixed]}" | tee -a "$DEMO_SUMMARY"
echo
echo "\$ hetmem validate --machine knl-mcdram --placements 4 -- stream.sim --size tiny"
hetmem validate --machine knl-mcdram --placements 4 --json "$w/validate.json" -- "$app" --size tiny
for m in linear default; do
  printf 'validate: %-7s model, 4 drawn placements of stream (tiny, devices %.2fx apart): mean |error| %.1f%%, max %.1f%%\n' "$m" \
    "$(jq -r .gap "$w/validate.json")" "$(jq -r .summary.$m.mean_abs_err_pct "$w/validate.json")" \
    "$(jq -r .summary.$m.max_abs_err_pct "$w/validate.json")" | tee -a "$DEMO_SUMMARY"
done
