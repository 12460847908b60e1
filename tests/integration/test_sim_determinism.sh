#!/usr/bin/env bash
# Same program, same input: bit-identical JSON report and sampled trace.
source "$(dirname "$0")/sim_lib.sh"
echo '{"default": "slow", "rules": [{"name": "chain", "pages_percent": 30, "device": "fast"}]}' > "$T/p.json"
for i in 1 2; do
  "$H" sim -m "$M" --placement "$T/p.json" -o "$T/t$i.trace" --sample-period 97 --json "$T/j$i.json" \
    -- "$K/chase.sim" 4194304 50000 > "$T/o$i.txt" || fail "run $i failed"
  [ $i = 1 ] && sleep 1 # a different creation second in the trace header
done
cmp -s "$T/j1.json" "$T/j2.json" && ok "JSON reports identical" || fail "JSON reports differ"
# The trace header carries the wall-clock creation time ("created_unix",
# written by the trace writer) and the header checksum over it; every other
# byte must be identical.
if cmp -s "$T/t1.trace" "$T/t2.trace"; then
  ok "traces identical ($(stat -c %s "$T/t1.trace") bytes)"
else
  [ "$(stat -c %s "$T/t1.trace")" = "$(stat -c %s "$T/t2.trace")" ] || fail "trace sizes differ"
  at=$(grep -abo '"created_unix":[0-9]*' "$T/t1.trace" | head -1 | cut -d: -f1)
  other=$(cmp -l "$T/t1.trace" "$T/t2.trace" | awk -v a="$at" '!($1 <= 32 || ($1 > a + 15 && $1 <= a + 30))' | wc -l)
  [ -n "$at" ] && [ "$other" = 0 ] && ok "traces identical but for the creation time in the header" ||
    fail "traces differ beyond the header's creation time ($other bytes)"
fi
cmp -s "$T/o1.txt" "$T/o2.txt" && ok "summaries identical" || fail "summaries differ"
[ -s "$T/t1.trace" ] || fail "empty trace"

# The program's addresses do not depend on what the simulator runtime
# itself allocates: it allocates from its own heap, never the program's.
# heap.sim prints a hash of where ~20,000 small blocks and two 1.5 MiB
# arrays land: the same in repeated runs, with and without a trace, at
# sample periods 1 and 1000 (the trace writer allocating as it goes), and
# with the machine and placement files at short and deep paths (parsed
# into different sizes). Before the runtime had its own heap, a trace
# moved these blocks (HPCG's 108-byte ones), and with them which pages a
# placement puts on each device.
for i in 1 2 3 4; do
  "$H" sim -m "$M" -- "$K/heap.sim" 2> /dev/null | grep '^hash ' || fail "heap.sim run $i failed"
done > "$T/heap.txt"
n=$(sort -u "$T/heap.txt" | wc -l)
[ "$(wc -l < "$T/heap.txt")" = 4 ] && [ "$n" = 1 ] && ok "heap.sim: same heap layout in 4 runs" ||
  fail "heap.sim: $n different heap layouts in 4 runs"
for p in 1 1000; do
  "$H" sim -m "$M" -o "$T/hp$p.trace" --sample-period $p -- "$K/heap.sim" 2> /dev/null | grep '^hash ' ||
    fail "traced heap.sim (period $p) failed"
done >> "$T/heap.txt"
[ "$(wc -l < "$T/heap.txt")" = 6 ] && [ "$(sort -u "$T/heap.txt" | wc -l)" = 1 ] &&
  ok "heap.sim: same heap layout without a trace and with one at periods 1 and 1000" ||
  fail "heap.sim: heap layout depends on the trace: $(sort -u "$T/heap.txt" | tr '\n' ' ')"
ns=$("$H" trace info "$T/hp1.trace" | awk '/^samples/ {print $2}')
[ "${ns:-0}" -gt 100000 ] && ok "period-1 trace: $ns samples written meanwhile" || fail "period-1 trace: ${ns:-no} samples"
deep="$T/a-folder-with-a-long-name/for/the/machine/and/placement/files"
mkdir -p "$deep"
cp "$M" "$deep/m.json"
echo '{"default": "slow", "rules": [{"name": "x", "pages_percent": 30, "device": "fast"}]}' > "$T/hp.json"
cp "$T/hp.json" "$deep/hp.json"
for mp in "$M $T/hp.json" "$deep/m.json $deep/hp.json"; do
  set -- $mp
  for o in "" "-o $T/hq.trace --sample-period 1" "-o $T/hq.trace --sample-period 1000"; do
    "$H" sim -m "$1" --placement "$2" $o -- "$K/heap.sim" 2> /dev/null | grep '^hash ' ||
      fail "heap.sim with a placement ($mp $o) failed"
  done
done > "$T/heap3.txt"
[ "$(wc -l < "$T/heap3.txt")" = 6 ] && [ "$(sort -u "$T/heap3.txt" | wc -l)" = 1 ] &&
  ok "heap.sim with a placement: same heap layout with and without a trace, files at short and deep paths" ||
  fail "heap.sim with a placement: layouts differ: $(sort -u "$T/heap3.txt" | tr '\n' ' ')"

# Nothing of where a run happens reaches the result: the same mini-app
# built in two folders of different name lengths, run from different
# directories, by a relative and an absolute path, with different
# environments (size, count, TMPDIR, locale), gives a bit-identical JSON
# report. hetmem sim pads the environment and argv[0] so that the initial
# stack (and with it argv's strings and every stack address) is the same.
CC="$HETMEM_BIN/hetmem-cc"
a="$T/a" b="$T/a-build-folder-with-a-much-longer-name/and/deeper"
for d in "$a" "$b"; do
  mkdir -p "$d/miniapps" "$d/include"
  cp -r "$HETMEM_SRC/miniapps/stream" "$HETMEM_SRC/miniapps/common" "$d/miniapps/"
  cp -r "$HETMEM_SRC/include/hetmem" "$d/include/"
  (cd "$d/miniapps/stream" && "$CC" -O2 stream.c ../common/miniapp.c -o stream.sim -lm) || fail "hetmem-cc in $d failed"
done
echo '{"default": "ddr", "rules": [{"name": "a", "pages_percent": 37, "device": "hbm"}]}' > "$T/pp.json"
(cd "$a/miniapps/stream" && env -i PATH="$PATH" LANG=C \
  "$H" sim -m spr-hbm --placement "$T/pp.json" --json "$T/e1.json" -- ./stream.sim --size tiny > /dev/null) ||
  fail "run in $a failed"
big=$(head -c 20000 /dev/zero | tr '\0' x)
mkdir -p "$T/tmp2"
(cd / && env BIG="$big" TMPDIR="$T/tmp2" LANG=C.UTF-8 A=1 B=2 C=3 \
  "$H" sim -m spr-hbm --placement "$T/pp.json" --json "$T/e2.json" -- "$b/miniapps/stream/stream.sim" --size tiny > /dev/null) ||
  fail "run in $b failed"
cmp -s <(jq -S 'del(.program)' "$T/e1.json") <(jq -S 'del(.program)' "$T/e2.json") &&
  ok "two build folders, environments and directories: identical JSON reports (but for the program's path)" ||
  fail "two build folders, environments and directories: reports differ: $(diff <(jq -S 'del(.program)' "$T/e1.json") <(jq -S 'del(.program)' "$T/e2.json") | head -4 | tr '\n' ' ')"
(cd "$b/miniapps/stream" && "$H" sim -m spr-hbm --placement "$T/pp.json" --json "$T/e3.json" -- ./stream.sim --size tiny > /dev/null) ||
  fail "run in $b failed"
cmp -s "$T/e1.json" "$T/e3.json" && ok "same relative invocation from two build folders: byte-identical JSON" ||
  fail "same relative invocation from two build folders: JSON differs"
# The program file's size does not reach the result either: debug
# information naming a longer build path makes the same program a few
# pages longer, and the runtime maps the file (for its symbols) in a slot
# of fixed size, so the program's own mappings do not move. The same
# binary padded by 9000 bytes, run with the placement file at a longer path,
# gives the same report.
mkdir -p "$T/padded" "$T/a-longer-folder-for-the-placement-file"
cp "$a/miniapps/stream/stream.sim" "$T/padded/stream.sim"
head -c 9000 /dev/zero >> "$T/padded/stream.sim"
cp "$T/pp.json" "$T/a-longer-folder-for-the-placement-file/pp.json"
(cd "$T/padded" && env -i PATH="$PATH" LANG=C \
  "$H" sim -m spr-hbm --placement "$T/a-longer-folder-for-the-placement-file/pp.json" --json "$T/e4.json" \
  -- ./stream.sim --size tiny > /dev/null) || fail "run of the padded copy failed"
cmp -s <(jq -S 'del(.program, .placement)' "$T/e1.json") <(jq -S 'del(.program, .placement)' "$T/e4.json") &&
  ok "a program file 9000 bytes longer, placement at a longer path: identical JSON report" ||
  fail "a longer program file: reports differ: $(diff <(jq -S 'del(.program, .placement)' "$T/e1.json") <(jq -S 'del(.program, .placement)' "$T/e4.json") | head -4 | tr '\n' ' ')"
# Nor does the program's path when the run writes a trace: the trace
# header holds the command as given, and the runtime builds it outside the
# program's heap, so a longer path does not move the program's allocations.
mkdir -p "$T/p-a-longer-folder-name-for-the-same-program/deeper"
cp "$T/padded/stream.sim" "$T/p-a-longer-folder-name-for-the-same-program/deeper/stream.sim"
n=0
for d in "$T/padded" "$T/p-a-longer-folder-name-for-the-same-program/deeper"; do
  n=$(( n + 1 ))
  (cd "$T" && env -i PATH="$PATH" LANG=C "$H" sim -m spr-hbm --placement "$T/pp.json" -o "$T/s$n.trace" \
    --sample-period 1000 --json "$T/s$n.json" -- "$d/stream.sim" --size tiny > /dev/null) ||
    fail "traced run from $d failed"
done
"$H" trace info "$T/s$n.trace" | grep -q 'p-a-longer-folder-name' || fail "the trace header lacks the program's path"
cmp -s <(jq -S 'del(.program, .trace)' "$T/s$((n - 1)).json") <(jq -S 'del(.program, .trace)' "$T/s$n.json") &&
  ok "traced runs from two program paths: identical JSON report" ||
  fail "traced runs from two program paths: reports differ: $(diff <(jq -S 'del(.program, .trace)' "$T/s$((n - 1)).json") <(jq -S 'del(.program, .trace)' "$T/s$n.json") | head -4 | tr '\n' ' ')"
# heap.sim prints where its small allocations land: the same from both
# paths (a header built on the heap moved them).
for d in "$T/padded" "$T/p-a-longer-folder-name-for-the-same-program/deeper"; do
  cp "$K/heap.sim" "$d/heap.sim"
  (cd "$T" && env -i PATH="$PATH" LANG=C "$H" sim -m "$M" -o "$T/h.trace" --sample-period 1000 \
    -- "$d/heap.sim" 2> /dev/null | grep '^hash ') || fail "traced heap.sim from $d failed"
done > "$T/heap2.txt"
[ "$(wc -l < "$T/heap2.txt")" = 2 ] && [ "$(sort -u "$T/heap2.txt" | wc -l)" = 1 ] &&
  ok "traced heap.sim from two program paths: same heap layout" ||
  fail "traced heap.sim from two program paths: heap layouts differ: $(tr '\n' ' ' < "$T/heap2.txt")"
done_tests
