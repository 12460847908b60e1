#!/usr/bin/env bash
# Closed-form checks of dependences through indices at any stride
# (docs/sim.md, Dependences): a load whose address is base + v x stride +
# field, v loaded by a miss still in flight, waits for it, whatever the
# stride (the access size, a struct size, any multiple of the access size)
# and the field; a gather through loaded indices still overlaps.
source "$(dirname "$0")/sim_lib.sh"
MM="$HETMEM_SRC/tests/sim-kernels/machines"
phase_ns() { jq -r --arg p "$2" '.phases[] | select(.name == $p) | .time_s * 1e9' "$1"; }
# curve_at FILE DEVICE U: the device's read latency at utilisation U (as in test_sim_realism.sh)
curve_at() {
  jq -r --arg d "$2" --argjson u "$3" '.devices[] | select(.name == $d) |
    [[0, .read_latency_ns]] + (.loaded_latency // []) |
    (last[1]) as $flat |
    [range(1; length) as $i | select(.[$i - 1][0] <= $u and $u < .[$i][0]) |
     .[$i - 1][1] + (.[$i][1] - .[$i - 1][1]) * ($u - .[$i - 1][0]) / (.[$i][0] - .[$i - 1][0])] | .[0] // $flat' "$1"
}
STEPS=10000
# chase M DEVICE WIDTH SLOT FIELD: ns per step of i = next[i * SLOT/WIDTH + FIELD/WIDTH] over 64 MiB
# (16x the largest per-thread cache of the presets, L2 plus LLC share: few
# steps hit a cache)
chase() {
  "$H" sim -m "$1" --device "$2" --json "$T/c.json" -- "$K/schase.sim" "$3" "$4" "$5" 67108864 $STEPS >/dev/null 2>&1 ||
    { echo "nan"; return; }
  awk -v t="$(phase_ns "$T/c.json" chase)" -v n=$STEPS 'BEGIN { print t / n }'
}
# expect M DEVICE STEP: the device's read latency at the chase's own load
# (each step reads a line and writes back a dirty one: the array was just
# written), as test_sim_realism.sh's index chase
expect() {
  local share
  share=$(jq -r --arg d "$2" '.cores as $c | .devices[] | select(.name == $d) | .read_bandwidth_gbs / $c' "$1")
  curve_at "$1" "$2" "$(awk -v s="$3" -v b="$share" 'BEGIN { print 128 / (s * b) }')"
}

# 1. On every preset, uint32 and uint64 index chases over slots of 4, 8, 16
#    and 64 bytes (index field at the slot's start, or further in) cost the
#    read latency of the preset's last device per step within 10%, and a
#    uint32 chase over 64-byte slots (field at byte 60) that of every device.
for m in "$HETMEM_SRC"/share/machines/*.json; do
  devs=$(jq -r '.devices[].name' "$m")
  for d in $devs; do
    for cfg in "4 64 60"; do
      step=$(chase "$m" "$d" $cfg)
      near "$step" "$(expect "$m" "$d" "$step")" 0.10 \
        "$(basename "$m" .json)/$d: chase (width slot field) = ($cfg): ns per step vs read latency"
    done
  done
  d=$(jq -r '.devices[-1].name' "$m")
  for cfg in "4 4 0" "4 8 0" "4 16 12" "4 64 0" "8 8 0" "8 16 8" "8 64 24"; do
    step=$(chase "$m" "$d" $cfg)
    near "$step" "$(expect "$m" "$d" "$step")" 0.10 \
      "$(basename "$m" .json)/$d: chase (width slot field) = ($cfg): ns per step vs read latency"
  done
done

# 2. A 64-byte-slot uint32 index chase on cxl with all data on CXL costs
#    225-275 ns per step (the device's 250 ns within 10%).
step=$(chase cxl cxl 4 64 0)
lt 225 "$step" "cxl/cxl 64-byte-slot chase: ns per step above 225"
lt "$step" 275 "cxl/cxl 64-byte-slot chase: ns per step below 275"

# 3. An independent gather a[b[i]].x over 64-byte structs still overlaps:
#    on the miss-window machine (16 fill buffers, bandwidth far above
#    demand, no prefetcher) each gather costs Little's law, 100 ns / 16, plus
#    its share of the index array's own misses (4 bytes of b per gather: one
#    line per 16), on either device.
M="$MM/mlp.json"
for d in fast:100 slow:300; do
  "$H" sim -m "$M" --device "${d%%:*}" --json "$T/g.json" -- "$K/sgather.sim" 33554432 200000 >/dev/null
  per=$(awk -v t="$(phase_ns "$T/g.json" gather)" 'BEGIN { print t / 200000 }')
  near "$per" "$(awk -v l="${d#*:}" 'BEGIN { print (1 + 4 / 64) * l / 16 }')" 0.10 \
    "gather a[b[i]].x over 64-byte structs on ${d%%:*}: ns per gather vs Little's law"
done

done_tests
