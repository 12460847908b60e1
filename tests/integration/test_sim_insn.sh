#!/usr/bin/env bash
# Instruction counts match known trip counts: a loop of 20 (or 40) nops plus
# add/cmp/branch retires 23 (43) instructions per trip; the coverage and
# access hooks are not counted.
source "$(dirname "$0")/sim_lib.sh"
count() { "$H" sim -m "$M" --json - -- "$K/nops.sim" "$1" "$2" | jq -r .instructions; }
a=$(count 20 1000000) b=$(count 20 3000000) c=$(count 40 1000000) d=$(count 40 3000000)
[ $((b - a)) = 46000000 ] && ok "20-nop loop: 2e6 more trips add $((b - a)) instructions" ||
  fail "20-nop loop: 2e6 more trips add $((b - a)) instructions, want 46000000"
[ $((d - c)) = 86000000 ] && ok "40-nop loop: 2e6 more trips add $((d - c)) instructions" ||
  fail "40-nop loop: 2e6 more trips add $((d - c)) instructions, want 86000000"
# Outside the loop, the program's fixed cost is the same for both bodies.
[ $((a - 23000000)) = $((c - 43000000)) ] && ok "fixed cost outside the loop: $((a - 23000000))" ||
  fail "fixed cost differs: $((a - 23000000)) vs $((c - 43000000))"
lt $((a - 23000000)) 1000 "fixed cost is small"
# Separate compile and link steps give the same program.
CC="$HETMEM_BIN/hetmem-cc"
if "$CC" -O2 -c "$HETMEM_SRC/tests/sim-kernels/nops.c" -o "$T/nops.o" && "$CC" "$T/nops.o" -o "$T/nops.sim"; then
  e=$("$H" sim -m "$M" --json - -- "$T/nops.sim" 20 1000000 | jq -r .instructions)
  [ "$e" = "$a" ] && ok "hetmem-cc -c then link: $e instructions" || fail "two-step build counts $e, one-step $a"
else
  fail "hetmem-cc -c / link failed"
fi
"$CC" -fsanitize=address -c "$HETMEM_SRC/tests/sim-kernels/nops.c" -o "$T/x.o" 2>"$T/err" &&
  fail "hetmem-cc accepted -fsanitize=address" || ok "$(cat "$T/err")"
done_tests
