#!/usr/bin/env bash
# Global and static arrays are objects of every simulated run, as heap
# allocations are, with no placement rule naming them: tests/sim-kernels/
# statics.c has a file-static array sarr (line 12), a global garr (13) and a
# heap array harr (malloc, line 25), 8 MiB each, written once and read REPS
# times; edge (14) is a global of exactly 64 KiB, the object size from which
# heap allocations are tracked (HETMEM_MIN_SIZE's default), so it is one;
# below (15, 8 bytes short of it) and the read-only ctab (16, .rodata) are
# not. Each object's traffic: the caches hold far less than 8 MiB (test-two:
# L3 64M shared by 64 cores), so a write sweep reads each line once (write
# allocate) and writes it back once as the first read sweep evicts it, and
# each of the REPS=2 read sweeps reads it again: 3 x 8 MiB read and 8 MiB
# written per array.
. "$HETMEM_SRC/tests/integration/sim_lib.sh"
[ -x "$K/statics.sim" ] || { echo "statics.sim not built"; exit 77; }
MiB8=8388608

"$H" sim -m "$M" --device fast --json "$T/d.json" -- "$K/statics.sim" 2 > /dev/null 2> "$T/err" ||
  fail "statics.sim --device fast: $(cat "$T/err")"
objs=$(j "$T/d.json" '[.objects[] | select(.bytes_allocated > 0) | "\(.name // "-")=\(.bytes_allocated)@\(.source // "-" | split(" ")[0])"] | sort | join(",")')
want="-=$MiB8@statics.c:25,edge=65536@statics.c:14,garr=$MiB8@statics.c:13,sarr=$MiB8@statics.c:12"
[ "$objs" = "$want" ] && ok "objects: $objs" || fail "objects '$objs', want '$want'"
for o in sarr garr; do
  near "$(j "$T/d.json" ".objects[] | select(.name == \"$o\") | .bytes_read")" $((3 * MiB8)) 0.05 "$o: bytes read"
  near "$(j "$T/d.json" ".objects[] | select(.name == \"$o\") | .bytes_written")" $MiB8 0.05 "$o: bytes written"
  [ "$(j "$T/d.json" ".objects[] | select(.name == \"$o\") | .device")" = fast ] && ok "$o on fast" || fail "$o not on fast"
done
near "$(j "$T/d.json" ".objects[] | select(.bytes_allocated == $MiB8 and .name == null) | .bytes_read")" $((3 * MiB8)) 0.05 \
  "harr: bytes read"
# The three arrays carry nearly all the traffic; memory outside objects
# (stack, small globals) next to nothing.
lt "$(j "$T/d.json" '.untracked.bytes_read')" 262144 "untracked bytes read"
# A site id is the symbol's: the same in every run (here, a placement run).
site=$(j "$T/d.json" '.objects[] | select(.name == "sarr") | .site')

# A placement naming the static array by symbol puts its traffic on the
# named device, the rest on the default one.
echo '{"default": "slow", "rules": [{"name": "sarr", "device": "nvm"}]}' > "$T/p.json"
sim "$T/p_out.json" --placement "$T/p.json" -- "$K/statics.sim" 2 || fail "statics.sim --placement"
near "$(j "$T/p_out.json" '.devices[] | select(.name == "nvm") | .bytes_read')" $((3 * MiB8)) 0.05 "sarr by symbol: nvm reads"
near "$(j "$T/p_out.json" '.devices[] | select(.name == "slow") | .bytes_read')" $((6 * MiB8)) 0.05 \
  "garr and harr on the default device: slow reads"
[ "$(j "$T/p_out.json" '.objects[] | select(.name == "sarr") | "\(.device) \(.site)"')" = "nvm $site" ] &&
  ok "sarr on nvm, site $site as in the device run" || fail "sarr: $(j "$T/p_out.json" -c '.objects[] | select(.name == "sarr")')"
# ... and by its declaration line.
echo '{"default": "slow", "rules": [{"site": "statics.c:12", "device": "fast"}]}' > "$T/pl.json"
sim "$T/pl_out.json" --placement "$T/pl.json" -- "$K/statics.sim" 2 || fail "statics.sim --placement by line"
near "$(j "$T/pl_out.json" '.devices[] | select(.name == "fast") | .bytes_read')" $((3 * MiB8)) 0.05 "sarr by line: fast reads"

# Traces carry them: device runs' samples are attributed to the arrays, and
# the estimator and optimizer name them.
for d in slow fast; do
  "$H" sim -m "$M" --device $d -o "$T/$d.hmt" --sample-period 200 -- "$K/statics.sim" 2 > /dev/null 2>&1 || fail "sim -o, $d"
done
"$H" trace objects --json "$T/slow.hmt" > "$T/to.json" 2> "$T/err" || fail "trace objects: $(cat "$T/err")"
r=$(jq -r '.samples as $n | [.objects[] | select(.name == "sarr" or .name == "garr" or .bytes == 8388608) |
      "\(.name // "-")=\(.bytes):\(if .samples * 4 > $n then "share" else "few" end)"] | sort | join(",")' "$T/to.json")
[ "$r" = "-=$MiB8:share,garr=$MiB8:share,sarr=$MiB8:share" ] && ok "trace objects: each array over a quarter of the samples ($r)" ||
  fail "trace objects: $r"
echo '{"default": "slow", "rules": [{"name": "sarr", "device": "fast"}]}' > "$T/pf.json"
"$H" estimate "$T/slow.hmt" "$T/fast.hmt" --placement "$T/pf.json" --json > "$T/e.json" 2> "$T/err" || fail "estimate: $(cat "$T/err")"
en=$(jq -r '[.models.default.objects[]? | select(.name and .name != "(untracked)") | "\(.name)@\(.source // "-" | split(" ")[0])"] | sort | join(",")' "$T/e.json")
[ "$en" = "edge@statics.c:14,garr@statics.c:13,sarr@statics.c:12" ] && ok "estimate names $en" || fail "estimate objects '$en'"
"$H" optimize "$T/slow.hmt" "$T/fast.hmt" --capacity fast=9M --algo greedy -o "$T/o.json" > /dev/null 2> "$T/err" ||
  fail "optimize: $(cat "$T/err")"
# (fast holds one of the three 8 MiB arrays; a global one is named by symbol)
n=$(jq '[.rules[] | select(.device == "fast" and (.name == "sarr" or .name == "garr" or .site != null))] | length' "$T/o.json")
[ "$n" = 1 ] && ok "optimize puts one 8 MiB array on fast: $(jq -c .rules "$T/o.json")" || fail "optimize: $(cat "$T/o.json")"

# Fortran: COMMON blocks and a main program's large locals (static, .bss).
if command -v gfortran >/dev/null && [ -x "$HETMEM_BIN/hetmem-fort" ]; then
  printf '%s\n' 'program t' '  real(8) :: a(131072), c(262144)' '  common /blk/ c' '  integer :: i' \
    '  do i = 1, size(a)' '     a(i) = i' '  end do' '  c = 2' '  print *, sum(a) + sum(c)' 'end program t' > "$T/f.f90"
  "$HETMEM_BIN/hetmem-fort" -O2 -g "$T/f.f90" -o "$T/f.sim" 2> "$T/f.err" || fail "hetmem-fort: $(cat "$T/f.err")"
  "$H" sim -m "$M" --json "$T/f.json" -- "$T/f.sim" > /dev/null 2>&1 || fail "f.sim"
  fs=$(j "$T/f.json" '[.objects[] | select(.bytes_allocated > 0) | "\(.name)=\(.bytes_allocated)@\(.source // "-")"] | sort | join(",")')
  [[ "$fs" =~ ^a\.[0-9]+=1048576@f\.f90:2,blk_=2097152@f\.f90:[23]$ ]] && ok "Fortran static local and COMMON: $fs" ||
    fail "Fortran objects: $fs"
else
  echo "skip: no gfortran"
fi
done_tests
