#!/usr/bin/env bash
# Demo stage: a streaming kernel built with hetmem-cc, run in the simulated
# spr-hbm machine (DDR5 + HBM) with all data on each device and with a
# 50/50 page interleave.
set -euo pipefail
K="$HETMEM_BUILD/tests/sim-kernels/stream.sim"
[ -x "$K" ] || { echo "stream.sim not built; skipping the simulator demo"; exit 0; }
work="${DEMO_WORK:-$(mktemp -d)}"
echo '{"default": "ddr", "rules": [{"pages_percent": 50, "device": "hbm"}]}' > "$work/sim-50-50.json"
args=(copy 64000000 2)
declare -A rt
for how in "--device ddr" "--device hbm" "--placement $work/sim-50-50.json"; do
  tag=$(echo "$how" | awk '{ print ($1 == "--device") ? $2 : "50/50" }')
  echo "\$ hetmem sim -m spr-hbm $how --json ... -- stream.sim ${args[*]}"
  # The summary only: the kernel's own output (the sum it computed) goes to a file.
  hetmem sim -m spr-hbm $how --json "$work/sim-$$.json" -- "$K" "${args[@]}" > "$work/sim-$$.out"
  sed -n '/^hetmem sim:/,$p' "$work/sim-$$.out" | sed -n '1,8p'
  rt[$tag]=$(jq -r '.runtime_s * 1000' "$work/sim-$$.json")
  echo
done
printf 'sim: simulated runtime of a stream copy (2 x 64 MB) on spr-hbm: %.1f ms all on ddr, %.1f ms all on hbm, %.1f ms with 50/50 pages\n' \
  "${rt[ddr]}" "${rt[hbm]}" "${rt[50/50]}" | tee -a "${DEMO_SUMMARY:-/dev/null}"
