#!/usr/bin/env bash
# Closed-form checks of the simulator's finer model (docs/sim.md): the miss
# window, sampling, capacity, dependences and loaded latency.
source "$(dirname "$0")/sim_lib.sh"
MM="$HETMEM_SRC/tests/sim-kernels/machines"
phase_ns() { jq -r --arg p "$2" '.phases[] | select(.name == $p) | .time_s * 1e9' "$1"; }

# 1. Miss window: slots free as misses complete, in any order. Random reads
#    of 32 MiB (32x the LLC) with p% of the pages on a 300 ns device and the
#    rest on a 100 ns one, bandwidth far above demand and a ROB too large to
#    fill: each access costs the mean latency over the 16 MLP slots
#    (Little's law), whatever the mix.
M="$MM/mlp.json"
for p in 0 10 50 100; do
  echo "{\"default\": \"fast\", \"rules\": [{\"pages_percent\": $p, \"device\": \"slow\"}]}" > "$T/p.json"
  sim "$T/g.json" --placement "$T/p.json" -- "$K/gather.sim" 33554432 200000
  per=$(awk -v t="$(phase_ns "$T/g.json" gather)" 'BEGIN { print t / 200000 }')
  little=$(awk -v p="$p" 'BEGIN { print ((100 - p) * 100 + p * 300) / 100 / 16 }')
  near "$per" "$little" 0.10 "gather with $p% of pages on the slow device: ns per access vs Little's law"
done

# 2. Sampling: the period is drawn at random (fixed seed) around its mean,
#    so a loop reading a[i] and b[i] (alternate loads) has both arrays
#    sampled alike at period 1000, where a fixed period would see only one.
#    Stores of a write stream carry only an L1 hit/miss source and no weight.
M="$MM/two.json"
"$H" sim -m "$M" -o "$T/r2.trace" --sample-period 1000 -- "$K/stream.sim" read2 8000000 2 >/dev/null
"$H" trace objects --json "$T/r2.trace" > "$T/r2.json"
sa=$(jq '.objects[] | select(.name == "a") | .loads' "$T/r2.json")
sb=$(jq '.objects[] | select(.name == "b") | .loads' "$T/r2.json")
lt 3000 "$((sa + sb))" "read2: load samples of a and b"
near "$sa" "$sb" 0.10 "read2 at period 1000: load samples of a vs b"
"$H" sim -m "$M" -o "$T/w.trace" --sample-period 1000 -- "$K/stream.sim" write 8000000 2 >/dev/null
"$H" trace dump --jsonl "$T/w.trace" | jq -c 'select(.kind == "sample" and .access == "store")' > "$T/w.jsonl"
nst=$(wc -l < "$T/w.jsonl")
bad=$(jq -s '[.[] | select(.weight != 0 or (.dsrc != 1 and .dsrc != 0))] | length' "$T/w.jsonl")
misses=$(jq -s '[.[] | select(.dsrc == 0)] | length' "$T/w.jsonl")
lt 1000 "$nst" "write stream: store samples"
[ "$bad" = 0 ] && ok "store samples carry only L1 hit/miss (dsrc 1/0), weight 0" || fail "$bad store samples with a latency or a deeper source"
near "$misses" "$(awk -v n="$nst" 'BEGIN { print n / 8 }')" 0.25 "store samples missing L1 (1 in 8)"

# 3. Capacity: --device holds a device to its capacity as placement rules
#    do. With 8 MiB of slow memory per thread, a 32 MiB array put there by
#    --device or by a rule spills the same bytes to the first device, and
#    both runs say so.
jq '.devices[1].capacity = "8M"' "$MM/mlp.json" > "$T/cap.json"
M="$T/cap.json"
"$H" sim -m "$M" --device slow --json "$T/d.json" -- "$K/gather.sim" 33554432 1000 >/dev/null 2>"$T/d.err"
echo '{"default": "fast", "rules": [{"pages_percent": 100, "device": "slow"}]}' > "$T/p.json"
"$H" sim -m "$M" --placement "$T/p.json" --json "$T/r.json" -- "$K/gather.sim" 33554432 1000 >/dev/null 2>"$T/r.err"
sd=$(jq '.devices[1].spilled_bytes' "$T/d.json") sr=$(jq '.devices[1].spilled_bytes' "$T/r.json")
near "$sd" $((24 << 20)) 0.01 "--device slow over capacity: 32 MiB - 8 MiB spilled"
near "$sd" "$sr" 0.01 "--device and a placement rule spill alike"
lt "$(jq '.devices[1].peak_bytes' "$T/d.json")" $(((8 << 20) + 1)) "--device slow: peak within capacity"
grep -q "device slow full.*spilled to fast" "$T/d.err" && ok "--device spill reported" || fail "--device spill not reported: $(cat "$T/d.err")"

# 4. Dependences through indices: an index chase (i = next[i], 32-bit
#    indices) over 32 MiB costs each device's read latency per step, on
#    every preset, as the pointer chase does; a random gather whose loads
#    do not depend on each other still overlaps (test 1). Where the preset
#    has a loaded-latency curve, the latency is the curve's at the chase's
#    own load: each step reads a line and writes back a dirty one (the
#    array was just written), two lines of this thread's share per step.
# curve_at FILE DEVICE U: the device's read latency at utilisation U
curve_at() {
  jq -r --arg d "$2" --argjson u "$3" '.devices[] | select(.name == $d) |
    [[0, .read_latency_ns]] + (.loaded_latency // []) |
    (last[1]) as $flat |
    [range(1; length) as $i | select(.[$i - 1][0] <= $u and $u < .[$i][0]) |
     .[$i - 1][1] + (.[$i][1] - .[$i - 1][1]) * ($u - .[$i - 1][0]) / (.[$i][0] - .[$i - 1][0])] | .[0] // $flat' "$1"
}
for m in "$HETMEM_SRC"/share/machines/*.json; do
  for d in $(jq -r '.devices[].name' "$m"); do
    "$H" sim -m "$m" --device "$d" --json "$T/ic.json" -- "$K/ichase.sim" 33554432 20000 >/dev/null 2>&1
    step=$(awk -v t="$(phase_ns "$T/ic.json" chase)" 'BEGIN { print t / 20000 }')
    share=$(jq -r --arg d "$d" '.cores as $c | .devices[] | select(.name == $d) | .read_bandwidth_gbs / $c' "$m")
    lat=$(curve_at "$m" "$d" "$(awk -v s="$step" -v b="$share" 'BEGIN { print 128 / (s * b) }')")
    near "$step" "$lat" 0.10 \
      "index chase on $(basename "$m" .json)/$d: ns per step vs read latency at its load"
  done
done

# 5. Loaded latency: a chase with K lines of a stream between steps, on a
#    4 GB/s device (16 ns of channel time per line) with the curve
#    (0.5, 120) (0.7, 140) (0.9, 200) ns: each step costs the curve's
#    latency at the utilisation (K + 1) x 16 ns / step.
M="$MM/loaded.json"
for k in 3 5 8; do
  sim "$T/l.json" -- "$K/lchase.sim" 33554432 20000 $k
  step=$(awk -v t="$(phase_ns "$T/l.json" chase)" 'BEGIN { print t / 20000 }')
  u=$(awk -v k=$k -v s="$step" 'BEGIN { print (k + 1) * 16 / s }')
  curve=$(jq -r --argjson u "$u" '.devices[0] as $d | [[0, $d.read_latency_ns]] + $d.loaded_latency |
    [range(1; length) as $i | select(.[$i - 1][0] <= $u and $u < .[$i][0]) |
     .[$i - 1][1] + (.[$i][1] - .[$i - 1][1]) * ($u - .[$i - 1][0]) / (.[$i][0] - .[$i - 1][0])] | .[0] // 200' "$M")
  lt 0.45 "$u" "chase + $k stream lines: utilisation"
  near "$step" "$curve" 0.10 "chase + $k stream lines at utilisation $u: ns per step vs the machine's loaded latency"
done

# 6. Dependences through a select: a branch-free binary search (cmov) over
#    32 MiB computes each probe's address from the comparison of the value
#    the previous probe loaded, so every probe served by the device waits a
#    full latency. On the miss-window machine with a 64-entry ROB (so that
#    successive lookups do not overlap), moving the array from the 100 ns to
#    the 300 ns device adds 200 ns per device-served probe: per lookup,
#    (log2 n - cached levels) x 200 ns, the device-served probes being
#    counted from the device's lines read (difference of two lookup counts).
jq '.core.rob = 64' "$MM/mlp.json" > "$T/rob.json"
M="$T/rob.json"
for d in fast slow; do
  for l in 20000 40000; do
    "$H" sim -m "$M" --device $d --json "$T/bs_${d}_$l.json" -- "$K/bsearch.sim" 4194304 $l >/dev/null
  done
done
per_lookup() { awk -v a="$(phase_ns "$T/bs_$1_20000.json" search)" -v b="$(phase_ns "$T/bs_$1_40000.json" search)" 'BEGIN { print (b - a) / 20000 }'; }
lines() { jq -n --slurpfile a "$T/bs_$1_20000.json" --slurpfile b "$T/bs_$1_40000.json" --arg d "$1" \
  '[$b[0], $a[0]] | map(.devices[] | select(.name == $d) | .bytes_read) | (.[0] - .[1]) / 64 / 20000'; }
levels=$(lines slow)
lt 8 "$levels" "binary search over 32 MiB: device-served probes per lookup"
near "$(lines fast)" "$levels" 0.01 "binary search: same probes served by either device"
dt=$(awk -v s="$(per_lookup slow)" -v f="$(per_lookup fast)" 'BEGIN { print s - f }')
near "$dt" "$(awk -v l="$levels" 'BEGIN { print l * 200 }')" 0.10 \
  "binary search: slow - fast ns per lookup vs device-served probes x 200 ns"
# 7. Dependent loads that hit L1 cost the L1 latency: a pointer chase over
#    16 KiB (inside the 32 KiB L1 of two.json, 4 cycles at 2 GHz) costs
#    2 ns per step, not the instructions' 0.25 ns each.
M="$MM/two.json"
sim "$T/l1.json" -- "$K/chase.sim" 16384 200000
step=$(awk -v t="$(phase_ns "$T/l1.json" chase)" 'BEGIN { print t / 200000 }')
near "$step" 2 0.10 "chase over 16 KiB (L1): ns per step vs the L1 latency"

# 8. The prefetcher follows descending and every-other-line streams as it
#    does ascending ones. On a one-core machine whose demand misses alone
#    would take 400 ns / 4 fill buffers = 100 ns per line, the prefetcher
#    sets the pace: reading backwards or one element in every other line
#    costs the same per line fetched as reading forwards.
jq '.cores = 1 | .core.mlp = 4 | .devices[1].read_latency_ns = 400' "$MM/two.json" > "$T/pf.json"
M="$T/pf.json"
per_line() { awk -v t="$(j "$1" .runtime_s)" -v b="$(j "$1" '.devices[] | select(.name == "fast") | .bytes_read')" 'BEGIN { print t * 1e9 / (b / 64) }'; }
for mode in read back skip; do
  sim "$T/pf_$mode.json" --device fast -- "$K/stream.sim" $mode 16000000 1
done
fwd=$(per_line "$T/pf_read.json")
lt "$fwd" 50 "forward stream: ns per line, well under the 100 ns of demand misses alone"
near "$(per_line "$T/pf_back.json")" "$fwd" 0.10 "descending stream: ns per line vs ascending"
near "$(per_line "$T/pf_skip.json")" "$fwd" 0.10 "stride-2 stream (every other line): ns per line vs ascending"
#    Random misses that land one line below or two above a recent one
#    (bracketing lookups) are not taken for such streams: 200000 random
#    pairs cost no more prefetches than 200000 single random loads (the
#    initialising pass of the array prefetches the same in both).
M="$MM/two.json"
sim "$T/pf_g0.json" -- "$K/gather.sim" 33554432 200000
for d in -1 2 -2; do
  sim "$T/pf_g.json" -- "$K/gather.sim" 33554432 200000 $d
  lt "$(( $(j "$T/pf_g.json" .prefetches) - $(j "$T/pf_g0.json" .prefetches) ))" 2000 \
    "random pairs $d line(s) apart: prefetches beyond single random loads (of 200000 pairs)"
done
#    A miss one line above a recent one does start an ascending stream (as
#    the hardware's streamer does), which issues at most two prefetches per
#    lookup: such a pair costs at most two prefetches more than a single
#    random load, not the rest of its 4 KiB page (2.7 M for these 200000
#    pairs when a stream started at full distance).
sim "$T/pf_g.json" -- "$K/gather.sim" 33554432 200000 1
lt "$(( $(j "$T/pf_g.json" .prefetches) - $(j "$T/pf_g0.json" .prefetches) ))" 402000 \
  "random pairs 1 line apart: prefetches beyond single random loads (at most 2 for each of 200000 pairs)"
# 9. Naming after the data is written moves its pages as move_pages()
#    would: 32 MiB written on slow (1 GB/s per thread on two.json), then
#    named "x" by a rule that sends "x" to fast, takes 32 MiB / 1 GB/s
#    longer than the same run whose rule names nothing.
M="$MM/two.json"
echo '{"default": "slow", "rules": [{"name": "x", "device": "fast"}]}' > "$T/mv.json"
echo '{"default": "slow", "rules": [{"name": "y", "device": "fast"}]}' > "$T/nomv.json"
sim "$T/mv_out.json" --placement "$T/mv.json" -- "$K/rename.sim" 33554432 2>/dev/null
sim "$T/nomv_out.json" --placement "$T/nomv.json" -- "$K/rename.sim" 33554432 2>/dev/null
moved=$(awk -v a="$(j "$T/mv_out.json" .runtime_s)" -v b="$(j "$T/nomv_out.json" .runtime_s)" 'BEGIN { print (a - b) * 1e9 }')
near "$moved" 33554432 0.10 "hetmem_name after writing 32 MiB: ns added vs bytes / 1 GB/s"
near "$(j "$T/mv_out.json" '.devices[] | select(.name == "fast") | .bytes_written')" 33554432 0.05 \
  "hetmem_name after writing: the moved bytes are written to the new device"

# 10. Global and file-static arrays are placed by rules naming their
#    symbols: gvec (global) to fast and svec (static) to nvm, 8 MiB each,
#    written once and read twice, so each device reads 3 x 8 MiB (write
#    allocate, then two sweeps) and the default device next to nothing.
echo '{"default": "slow", "rules": [{"name": "gvec", "device": "fast"}, {"name": "svec", "device": "nvm"}]}' > "$T/gl.json"
sim "$T/gl_out.json" --placement "$T/gl.json" -- "$K/globals.sim" 2
for o in gvec:fast svec:nvm; do
  near "$(j "$T/gl_out.json" ".devices[] | select(.name == \"${o#*:}\") | .bytes_read")" 25165824 0.05 \
    "global array ${o%%:*} placed on ${o#*:} by symbol: bytes read there"
  [ "$(j "$T/gl_out.json" ".objects[] | select(.name == \"${o%%:*}\") | .device")" = "${o#*:}" ] &&
    ok "${o%%:*} reported as an object on ${o#*:}" || fail "${o%%:*} not reported on ${o#*:}"
done
lt "$(j "$T/gl_out.json" '.devices[] | select(.name == "slow") | .bytes_read')" 65536 "globals by symbol: default device reads"
#    A static array of a shared library (lvec, 2 MiB, written once and read
#    twice through a pointer) is placed by its symbol too.
echo '{"default": "slow", "rules": [{"name": "lvec", "device": "nvm"}]}' > "$T/gll.json"
sim "$T/gll_out.json" --placement "$T/gll.json" -- "$K/globals.sim" 2 lib
near "$(j "$T/gll_out.json" '.devices[] | select(.name == "nvm") | .bytes_read')" 6291456 0.05 \
  "library array lvec placed on nvm by symbol: bytes read there"
[ "$(j "$T/gll_out.json" '.objects[] | select(.name == "lvec") | .device')" = nvm ] &&
  ok "lvec reported as an object on nvm" || fail "lvec not reported on nvm: $(j "$T/gll_out.json" -c .objects)"

# 11. Loaded latency on a preset: on ddr4 (a curve measured with Intel MLC,
#    docs/machines.md), a chase with k stream lines between steps, at the
#    utilisation its own lines give (reads per step over the step, against
#    the thread's share 110/28 GB/s), costs the curve's latency per step.
#    Steady state: the difference of two run lengths.
for k in 3 6; do
  for n in 20000 40000; do
    "$H" sim -m ddr4 --json "$T/ld_$n.json" -- "$K/lchase.sim" 33554432 $n $k >/dev/null 2>&1
  done
  read -r step u < <(jq -rn --slurpfile a "$T/ld_20000.json" --slurpfile b "$T/ld_40000.json" '
    ([$b[0], $a[0]] | map(.devices[0] | .bytes_read + .bytes_written) | (.[0] - .[1]) / 20000) as $bytes |
    ([$b[0], $a[0]] | map(.phases[] | select(.name == "chase") | .time_s) | (.[0] - .[1]) * 1e9 / 20000) as $s |
    "\($s) \($bytes / ($s * 110 / 28))"')
  lt 0.5 "$u" "ddr4 chase + $k stream lines: utilisation"
  near "$step" "$(curve_at "$HETMEM_SRC/share/machines/ddr4.json" ddr "$u")" 0.10 \
    "ddr4 chase + $k stream lines at utilisation $u: ns per step vs the preset's loaded latency"
done

done_tests
