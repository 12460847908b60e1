#!/usr/bin/env bash
# Closed-form checks of the simulator model, each within 5%, on the round
# figures of tests/sim-kernels/machines/two.json (64 cores; slow: 100 ns,
# 64 GB/s; fast: 80 ns, 256 GB/s; nvm: 300 ns read, 64 GB/s read, 16 GB/s write).
source "$(dirname "$0")/sim_lib.sh"
dev() { jq -r --arg d "$2" ".devices[] | select(.name == \$d) | $3" "$1"; }

# 1. Dependent pointer chase over 16 MiB (> the 1 MiB per-core LLC share):
#    each step costs the device's read latency.
for d in slow:100 fast:80 nvm:300; do
  name=${d%%:*} lat=${d##*:}
  sim "$T/c.json" --device "$name" -- "$K/chase.sim" 16777216 100000
  step=$(jq -r '.phases[] | select(.name == "chase") | .time_s * 1e9 / 100000' "$T/c.json")
  near "$step" "$lat" 0.05 "chase step on $name (ns)"
done

# 2. Streaming reads of 2 x 32 MB are bandwidth-bound: the device delivers
#    its per-core share (64/64 = 1 GB/s, 256/64 = 4 GB/s).
for d in slow:1 fast:4; do
  name=${d%%:*} bw=${d##*:}
  sim "$T/s.json" --device "$name" -- "$K/stream.sim" read 32000000 2
  near "$(dev "$T/s.json" "$name" .bandwidth_gbs)" "$bw" 0.05 "stream bandwidth on $name (GB/s)"
  near "$(dev "$T/s.json" "$name" .bytes_read)" 64000000 0.05 "stream bytes read on $name"
done

# 3. L1- and L2-resident working sets: no device traffic beyond the first
#    touch, however many sweeps (--min-size 4K: the 16 KiB set is an
#    object too).
for ws in 16384 131072; do
  sim "$T/a.json" --min-size 4K -- "$K/l1loop.sim" $ws 20
  sim "$T/b.json" --min-size 4K -- "$K/l1loop.sim" $ws 200
  obj=".objects[] | select(.bytes_allocated == $ws) | .bytes_read + .bytes_written"
  a=$(jq -r "$obj" "$T/a.json") b=$(jq -r "$obj" "$T/b.json")
  # Ten times the sweeps, the same traffic (give or take a line or two that
  # stack and libc traffic may evict from the set-associative caches).
  [ -n "$a" ] && [ -n "$b" ] && [ "$b" -le $((a + 128)) ] && ok "working set $ws: device traffic $a B after 20 sweeps, $b B after 200" ||
    fail "working set $ws: device traffic grows with sweeps ('$a' vs '$b')"
  # first touch, plus what the prefetcher fetched ahead to the end of the last page
  lt "$b" $((ws + 4096)) "working set $ws: traffic within its compulsory misses"
  lt "$(dev "$T/b.json" slow '.bytes_read + .bytes_written')" $((ws + 8192)) "working set $ws: all device traffic"
done
sim "$T/a.json" -- "$K/l1loop.sim" 16384 200
near "$(jq -r '.levels[0].hit_rate' "$T/a.json")" 1 0.01 "L1 hit rate of a 16 KiB working set"

# 4. Write streaming on the asymmetric device: every line is read (write
#    allocate) at 1 GB/s and written back at 16/64 = 0.25 GB/s, so the run
#    takes bytes_read/1 + bytes_written/0.25 ns, 2.5x the symmetric device.
sim "$T/w.json" --device nvm -- "$K/stream.sim" write 32000000 2
rd=$(dev "$T/w.json" nvm .bytes_read) wr=$(dev "$T/w.json" nvm .bytes_written)
expect=$(awk -v r="$rd" -v w="$wr" 'BEGIN { print (r / 1.0 + w / 0.25) * 1e-9 }')
near "$(jq -r .runtime_s "$T/w.json")" "$expect" 0.05 "write stream on nvm (s)"
sim "$T/w2.json" --device slow -- "$K/stream.sim" write 32000000 2
lt "$(awk -v a="$(jq -r .runtime_s "$T/w2.json")" 'BEGIN { print a * 2 }')" "$(jq -r .runtime_s "$T/w.json")" \
  "write stream: 2 x time on slow vs time on nvm"

# 5. A bandwidth-bound stream split 50/50 (page interleave) across slow and
#    nvm, which read equally fast, is faster than either alone: each device
#    carries half the bytes, so about half the time.
echo '{"default": "slow", "rules": [{"pages_percent": 50, "device": "nvm"}]}' > "$T/p50.json"
sim "$T/s1.json" --device slow -- "$K/stream.sim" read 32000000 2
sim "$T/s2.json" --device nvm -- "$K/stream.sim" read 32000000 2
sim "$T/sp.json" --placement "$T/p50.json" -- "$K/stream.sim" read 32000000 2
t1=$(jq -r .runtime_s "$T/s1.json") t2=$(jq -r .runtime_s "$T/s2.json") tp=$(jq -r .runtime_s "$T/sp.json")
lt "$tp" "$(awk -v a="$t1" -v b="$t2" 'BEGIN { print 0.9 * (a < b ? a : b) }')" "50/50 split vs 0.9 x best single device"
near "$tp" "$(awk -v a="$t1" 'BEGIN { print a / 2 }')" 0.05 "50/50 split takes half the time (s)"
near "$(dev "$T/sp.json" nvm .bytes_read)" "$(dev "$T/sp.json" slow .bytes_read)" 0.05 "50/50 split: bytes per device"
done_tests
