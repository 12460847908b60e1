#!/usr/bin/env bash
# hetmem sim places and traces only allocations of at least --min-size
# bytes (default 64K), as hetmem run binds and hetmem record tracks them:
# smaller ones stay in the program's heap, on the default device, whatever
# the placement says. rows.sim keeps 8 MiB in 16,384 blocks of 512 bytes
# (one 128 KiB array points to them); the placement sends every object to
# nvm, three times slower than slow here.
source "$(dirname "$0")/sim_lib.sh"
echo '{"default": "slow", "rules": [{"min_size": 1, "device": "nvm"}]}' > "$T/nvm.json"
args=("$K/rows.sim" 16384 512 3)
sim "$T/slow.json" --device slow -- "${args[@]}" || fail "all on slow"
sim "$T/nvm.json.out" --device nvm -- "${args[@]}" || fail "all on nvm"
sim "$T/def.json" --placement "$T/nvm.json" -o "$T/def.trace" -- "${args[@]}" || fail "placement, default --min-size"
sim "$T/one.json" --placement "$T/nvm.json" --min-size 1 -o "$T/one.trace" -- "${args[@]}" || fail "placement, --min-size 1"
ts=$(j "$T/slow.json" .runtime_s) tn=$(j "$T/nvm.json.out" .runtime_s)
gap=$(awk -v a="$ts" -v b="$tn" 'BEGIN { print b - a }')
lt 0 "$gap" "nvm is slower than slow"
# Within a tenth of the gap of the device the blocks are on (the 128 KiB
# array of pointers goes to nvm either way).
d=$(awk -v a="$(j "$T/def.json" .runtime_s)" -v b="$ts" 'BEGIN { d = a - b; print d < 0 ? -d : d }')
lt "$d" "$(awk -v g="$gap" 'BEGIN { print g / 10 }')" "default --min-size: the 512-byte blocks stay on slow ($(j "$T/def.json" .runtime_s) s vs $ts s)"
d=$(awk -v a="$(j "$T/one.json" .runtime_s)" -v b="$tn" 'BEGIN { d = a - b; print d < 0 ? -d : d }')
lt "$d" "$(awk -v g="$gap" 'BEGIN { print g / 10 }')" "--min-size 1: the blocks go to nvm ($(j "$T/one.json" .runtime_s) s vs $tn s)"
[ "$(j "$T/def.json" '.objects | length')" = 1 ] && ok "default --min-size: one object reported" ||
  fail "default --min-size: $(j "$T/def.json" '.objects | length') objects reported"
# The trace holds the allocations that were placed, as hetmem record's.
a=$("$H" trace info "$T/def.trace" | sed -n 's/^records .* alloc \([0-9]*\),.*/\1/p')
[ "$a" = 1 ] && ok "default --min-size: 1 allocation traced" || fail "default --min-size: '$a' allocations traced"
a=$("$H" trace info "$T/one.trace" | sed -n 's/^records .* alloc \([0-9]*\),.*/\1/p')
[ "$a" = 16385 ] && ok "--min-size 1: 16385 allocations traced" || fail "--min-size 1: '$a' allocations traced"
# A bad size is refused before anything runs.
out=$("$H" sim -m "$M" --min-size 12x -- "${args[@]}" 2>&1)
[ $? = 2 ] && [[ "$out" == *"--min-size"*"12x"* ]] && ok "bad --min-size refused: $out" || fail "bad --min-size: $out"
done_tests
