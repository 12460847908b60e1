#!/usr/bin/env bash
# Closed-form checks of the simulator's finer model (docs/sim.md): the miss
# window, sampling, capacity, dependences and loaded latency.
source "$(dirname "$0")/sim_lib.sh"
MM="$HETMEM_SRC/tests/sim-kernels/machines"
phase_ns() { jq -r --arg p "$2" '.phases[] | select(.name == $p) | .time_s * 1e9' "$1"; }

# 1. Miss window: slots free as misses complete, in any order. Random reads
#    of 64 MiB (64x the LLC) with p% of the pages on a 300 ns device and the
#    rest on a 100 ns one, bandwidth far above demand and a ROB too large to
#    fill: each access costs the mean latency over the 16 MLP slots
#    (Little's law), whatever the mix.
M="$MM/mlp.json"
for p in 0 10 50 100; do
  echo "{\"default\": \"fast\", \"rules\": [{\"pages_percent\": $p, \"device\": \"slow\"}]}" > "$T/p.json"
  sim "$T/g.json" --placement "$T/p.json" -- "$K/gather.sim" 67108864 400000
  per=$(awk -v t="$(phase_ns "$T/g.json" gather)" 'BEGIN { print t / 400000 }')
  little=$(awk -v p="$p" 'BEGIN { print ((100 - p) * 100 + p * 300) / 100 / 16 }')
  near "$per" "$little" 0.10 "gather with $p% of pages on the slow device: ns per access vs Little's law"
done
done_tests
