#!/usr/bin/env bash
# The simulator's models of bulk libc calls and the allocation family
# (libc is not instrumented): tests/sim-kernels/libc.c memsets an 8 MiB
# object, copies it into another, and exercises strdup, calloc and realloc.
. "$HETMEM_SRC/tests/integration/sim_lib.sh"
n=8388608
"$H" sim -m "$M" --json "$T/l.json" -- "$K/libc.sim" $n > "$T/out" 2> "$T/err" || fail "libc.sim failed: $(cat "$T/err")"
out=$(head -1 "$T/out")
# strlen(strdup("hello")) and realloc keeping the memset bytes: "5 2".
[ "$out" = "5 2" ] && ok "program output '$out'" || fail "program output '$out', want '5 2'"
[ "$(j "$T/l.json" '[.phases[].name] | join(",")')" = "memset,memcpy" ] && ok "phases" || fail "phases: $(j "$T/l.json" '[.phases[].name]')"
# memset writes all of src; memcpy reads all of src and writes all of dst.
sw=$(j "$T/l.json" '.objects[] | select(.name == "src") | .bytes_written')
sr=$(j "$T/l.json" '.objects[] | select(.name == "src") | .bytes_read')
dt=$(j "$T/l.json" '.objects[] | select(.name == "dst") | .bytes_read + .bytes_written')
[ "${sw:-0}" -ge $n ] && ok "memset wrote src ($sw bytes)" || fail "src written $sw < $n"
[ "${sr:-0}" -ge $n ] && ok "memcpy read src ($sr bytes)" || fail "src read $sr < $n"
[ "${dt:-0}" -ge $n ] && ok "memcpy moved dst ($dt bytes)" || fail "dst traffic $dt < $n"
# The realloc'd object is a new allocation of half the size.
[ "$(j "$T/l.json" "[.objects[] | select(.bytes_allocated == $((n / 2)))] | length")" = 1 ] \
  && ok "realloc made a 4 MiB object" || fail "no 4 MiB object after realloc"
exit $((FAILS > 0))
