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
# The header says from which size allocations were tracked; hetmem
# optimize --refine simulates with it (trace-format.md).
"$H" trace info "$T/one.trace" | grep -q '^objects .*(tracked from 1 B)$' && ok "trace header: min_size 1" ||
  fail "trace header of a --min-size 1 run: $("$H" trace info "$T/one.trace" | grep '^objects')"
[ "$("$H" trace info --json "$T/def.trace" | jq .header.min_size)" = 65536 ] && ok "trace header: min_size 65536 by default" ||
  fail "trace header: min_size $("$H" trace info --json "$T/def.trace" | jq .header.min_size)"
# optimize --refine runs its placement at the traces' --min-size: with
# traces of --min-size 1 runs, the round's measured time is that of
# hetmem sim --min-size 1 with the same placement (under the default it
# would leave the blocks on slow).
for d in slow nvm; do
  "$H" sim -m "$M" --device $d --min-size 1 -o "$T/$d.hmt" -- "${args[@]}" > /dev/null || fail "trace on $d"
done
if "$H" optimize "$T/slow.hmt" "$T/nvm.hmt" --capacity slow=64K --refine 1 --json -o "$T/best.json" > "$T/opt.json" 2> "$T/opt.err"; then
  pf=$(jq -r '.refine.rounds[0].placement' "$T/opt.json")
  sim "$T/again.json" --min-size 1 --placement "$pf" -- "${args[@]}" || fail "placement $pf again"
  near "$(jq -r '.refine.rounds[0].measured_s' "$T/opt.json")" "$(j "$T/again.json" .runtime_s)" 1e-9 \
    "--refine measured its round at the traces' --min-size"
else
  fail "optimize --refine 1: $(cat "$T/opt.err")"
fi
# hetmem validate --min-size runs its device runs and placements so.
if "$H" validate -m "$M" --placements 2 --min-size 1 --keep "$T/val" -j 2 -- "${args[@]}" > "$T/val.txt" 2>&1; then
  [ "$("$H" trace info --json "$T/val/dev-nvm.hmt" | jq .header.min_size)" = 1 ] && ok "validate --min-size 1: device runs so" ||
    fail "validate --min-size 1: device run's min_size $("$H" trace info --json "$T/val/dev-nvm.hmt" | jq .header.min_size)"
else
  fail "validate --min-size 1: $(tail -3 "$T/val.txt")"
fi
# A bad size is refused before anything runs.
out=$("$H" sim -m "$M" --min-size 12x -- "${args[@]}" 2>&1)
[ $? = 2 ] && [[ "$out" == *"--min-size"*"12x"* ]] && ok "bad --min-size refused: $out" || fail "bad --min-size: $out"
done_tests
