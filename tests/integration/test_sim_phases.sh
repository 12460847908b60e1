#!/usr/bin/env bash
# Per-phase placement rules: at each phase boundary live objects move to
# where the phase's rules say (as move_pages would), the copy is charged,
# and capacity holds. Arrays A and B (16 MiB each) are swept in phases pa
# and pb; the fast device has room for one of them (20 MiB per core). They
# are written before the phases (WRITE=1), so every page is populated and
# moves; without that, fresh calloc pages are not populated when they first
# move, and only what was touched is copied.
source "$(dirname "$0")/sim_lib.sh"
jq '.devices[1].capacity = "1280M"' "$M" > "$T/m.json"
WRITE=0
run() { "$H" sim -m "$T/m.json" --json "$T/$1.json" "${@:2}" -- "$K/phases.sim" 16777216 4 $WRITE > /dev/null 2> "$T/$1.err" ||
  fail "$1 run: $(cat "$T/$1.err")"; }
ph() { jq -r ".phases[] | select(.name == \"$2\") | .time_s" "$T/$1.json"; }
run slow --device slow
WRITE=1
run slow1 --device slow
echo '{"default": "slow", "phases": {"pa": {"rules": [{"name": "A", "device": "fast"}]},
                                     "pb": {"rules": [{"name": "B", "device": "fast"}]}}}' > "$T/ph.json"
run phased --placement "$T/ph.json"
mig=$(jq -r .migrated_bytes "$T/phased.json")
# A moves in and out, B moves in and out: 4 x 16 MiB (+ a partial page each)
lt $((4 * 16777216 - 1)) "$mig" "migrated bytes at least 4 x 16 MiB"
lt "$mig" $((4 * 16777216 + 4 * 8192)) "migrated bytes at most 4 x (16 MiB + 2 pages)"
[ "$(jq -r '.devices[1].spilled_bytes' "$T/phased.json")" = 0 ] && ok "nothing spilled" || fail "spill with phase rules"
lt "$(jq -r '.devices[1].peak_bytes' "$T/phased.json")" $((20 * 1048576 + 1)) "fast device holds at most its capacity"
# With S the time of 4 sweeps from slow (of clean data) (16 MiB at 1 GB/s = S/4; at 4 GB/s
# on fast = S/16):
#  pa = A moves in (read from slow, S/4) + 4 sweeps from fast (S/4) = S/2;
#  pb = B moves in, but slow is still absorbing A's write-back from the end
#       of pa (S/4, of which the S/16 of reading A from fast have passed):
#       (S/4 - S/16) + S/4 + 4 sweeps from fast (S/4) = 11 S / 16.
S=$(ph slow pa)
near "$(ph phased pa)" "$(awk -v s="$S" 'BEGIN { print s / 2 }')" 0.05 "phase pa: S/2"
near "$(ph phased pb)" "$(awk -v s="$S" 'BEGIN { print s * 11 / 16 }')" 0.05 "phase pb: 11 S/16"
lt "$(jq -r .runtime_s "$T/phased.json")" "$(jq -r .runtime_s "$T/slow1.json")" "phased placement beats all-slow"
for o in A B; do
  r=$(jq -r ".objects[] | select(.name == \"$o\") | .bytes_read" "$T/phased.json")
  lt $((4 * 16777216 + 16777216 - 1)) "$r" "object $o read: 4 sweeps and its move in and out"
done

# Fresh calloc pages: A and B move in before anything touched them, so
# nothing is copied in; they move out populated. With S as above:
#  pa = 4 sweeps from fast = S/4; pb = the same (B is read from fast only,
#  so A's write-back to slow does not delay it).
WRITE=0
run phased0 --placement "$T/ph.json"
mig=$(jq -r .migrated_bytes "$T/phased0.json")
lt $((2 * 16777216 - 1)) "$mig" "untouched pages: migrated bytes at least 2 x 16 MiB (the moves out)"
lt "$mig" $((2 * 16777216 + 2 * 8192)) "untouched pages: migrated bytes at most 2 x (16 MiB + 2 pages)"
near "$(ph phased0 pa)" "$(awk -v s="$S" 'BEGIN { print s / 4 }')" 0.05 "untouched pages: phase pa: S/4"
near "$(ph phased0 pb)" "$(awk -v s="$S" 'BEGIN { print s / 4 }')" 0.05 "untouched pages: phase pb: S/4"
# Peaks count populated pages: 16 MiB on fast at a time; slow ends up
# holding both arrays (moved out), never more.
near "$(jq -r '.devices[1].peak_bytes' "$T/phased0.json")" 16777216 0.01 "untouched pages: fast peak 16 MiB"
near "$(jq -r '.devices[0].peak_bytes' "$T/phased0.json")" 33554432 0.01 "untouched pages: slow peak 32 MiB"
done_tests
