#!/usr/bin/env bash
# The three-device preset share/machines/cxl3.json (ddr5 socket, direct CXL
# expander, switched CXL pool): closed-form costs on each of its devices,
# within 2%, from the figures of the preset itself.
source "$(dirname "$0")/sim_lib.sh"
M=cxl3
P="$HETMEM_SRC/share/machines/cxl3.json"
dev() { jq -r --arg d "$2" ".devices[] | select(.name == \$d) | $3" "$1"; }
cores=$(jq -r .cores "$P")
names=$(jq -r '.devices[].name' "$P")
[ "$(echo $names)" = "ddr cxl pool" ] && ok "devices: ddr cxl pool" || fail "devices: '$(echo $names)'"

for name in $names; do
  lat=$(dev "$P" "$name" .read_latency_ns)
  bw=$(dev "$P" "$name" .read_bandwidth_gbs)
  # 1. Dependent pointer chase over 64 MiB (far beyond the per-core L3
  #    share): each step costs the device's read latency.
  sim "$T/c.json" --device "$name" -- "$K/chase.sim" 67108864 100000
  near "$(j "$T/c.json" '.phases[] | select(.name == "chase") | .time_s * 1e9 / 100000')" "$lat" 0.02 \
    "chase step on $name (ns)"
  # 2. Streaming reads: the device's per-core share of its bandwidth.
  sim "$T/s.json" --device "$name" -- "$K/stream.sim" read 32000000 2
  near "$(dev "$T/s.json" "$name" .bandwidth_gbs)" "$(awk -v b="$bw" -v c="$cores" 'BEGIN { print b / c }')" 0.02 \
    "stream bandwidth on $name (GB/s)"
done

# 3. The devices are ordered: each tier is slower than the one before.
sim "$T/d.json" --device ddr -- "$K/chase.sim" 16777216 20000
sim "$T/p.json" --device pool -- "$K/chase.sim" 16777216 20000
lt "$(j "$T/d.json" .runtime_s)" "$(j "$T/p.json" .runtime_s)" "chase runtime ddr < pool"
done_tests
