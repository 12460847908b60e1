#!/usr/bin/env bash
# Every file a command reads is refused unless it is a regular file: a FIFO
# in its place (no writer will ever come) gives one line naming it and a
# non-zero exit at once, never a hang. Each command runs under `timeout 10`
# (a hang is exit 124); the wall times are printed. Also: a JSON input over
# HETMEM_JSON_MAX is refused, and the limit can be raised.
source "$(dirname "$0")/sim_lib.sh"
P="$K/phases.sim"
[ -x "$P" ] || { echo "phases.sim not built"; exit 77; }
F="$T/fifo"
mkfifo "$F"
# Valid inputs, so that the FIFO is the only thing wrong in each command.
"$H" sim -m "$M" --device slow -o "$T/slow.hmt" -- "$P" 1048576 1 1 > /dev/null || fail "sim slow"
"$H" sim -m "$M" --device fast -o "$T/fast.hmt" -- "$P" 1048576 1 1 > /dev/null || fail "sim fast"
echo '{"default": "slow", "rules": []}' > "$T/p.json"
"$H" estimate "$T/slow.hmt" "$T/fast.hmt" --placement "$T/p.json" --save-summary "$T/s.json" > /dev/null || fail "summary"

maxms=0
refused() { # refused NAME ARGS...: hetmem ARGS must refuse $F
  local name=$1; shift
  local t0 t1 rc ms
  t0=$(date +%s%N)
  timeout 10 "$H" "$@" > "$T/out" 2> "$T/err" < /dev/null
  rc=$?
  t1=$(date +%s%N)
  ms=$(( (t1 - t0) / 1000000 ))
  [ $ms -gt $maxms ] && maxms=$ms
  if [ $rc = 124 ]; then fail "$name: hung on a FIFO (killed after 10 s)"; return; fi
  if [ $rc = 0 ]; then fail "$name: exit 0 with a FIFO"; return; fi
  if [ "$(wc -l < "$T/err")" != 1 ] || ! grep -q "^hetmem: .*$F.*not a regular file" "$T/err"; then
    fail "$name: want one line naming $F as not a regular file, got: $(cat "$T/err")"; return
  fi
  ok "$name: refused in $ms ms: $(cat "$T/err")"
}
refused "trace info" trace info "$F"
refused "trace dump" trace dump "$F"
refused "trace objects" trace objects "$F"
refused "estimate trace" estimate "$F" "$T/fast.hmt" --placement "$T/p.json"
refused "estimate placement" estimate "$T/slow.hmt" "$T/fast.hmt" --placement "$F"
refused "estimate summary" estimate --summary "$F" --placement "$T/p.json"
refused "optimize trace" optimize "$T/slow.hmt" "$F" --capacity fast=1M
refused "optimize summary" optimize --summary "$F" --capacity fast=1M
refused "optimize policy" optimize --summary "$T/s.json" --capacity fast=1M --algo rl --policy "$F"
refused "sim machine" sim -m "$F" --device slow -- "$P" 1024 1 1
refused "sim placement" sim -m "$M" --placement "$F" -- "$P" 1024 1 1
refused "run placement" run --placement "$F" -- true
refused "validate machine" validate --machine "$F" --placements 1 -- "$P" 1024 1 1
echo "slowest refusal: $maxms ms"

# An executable FIFO as the program of sim: refused, not read forever.
mkfifo -m 755 "$T/xfifo"
timeout 10 "$H" sim -m "$M" --device slow -- "$T/xfifo" > /dev/null 2> "$T/err"
rc=$?
[ $rc != 124 ] && [ $rc != 0 ] && grep -q "not a regular file" "$T/err" && ok "sim program: $(cat "$T/err")" \
  || fail "sim with a FIFO as the program: exit $rc: $(cat "$T/err")"

# The JSON size limit: a placement padded past 1K is refused under
# HETMEM_JSON_MAX=1K with one line, and read under the default.
{ printf '{"default": "slow", "rules": [], "pad": "'; head -c 2000 /dev/zero | tr '\0' x; printf '"}\n'; } > "$T/big.json"
HETMEM_JSON_MAX=1K "$H" estimate "$T/slow.hmt" "$T/fast.hmt" --placement "$T/big.json" > /dev/null 2> "$T/err"
rc=$?
[ $rc = 1 ] && [ "$(wc -l < "$T/err")" = 1 ] && grep -q "over the limit of 1.0 KiB (HETMEM_JSON_MAX)" "$T/err" \
  && ok "JSON limit: $(cat "$T/err")" || fail "JSON limit: exit $rc: $(cat "$T/err")"
"$H" estimate "$T/slow.hmt" "$T/fast.hmt" --placement "$T/big.json" > /dev/null 2> "$T/err"
grep -q HETMEM_JSON_MAX "$T/err" && fail "default limit refused a 2 KB file: $(cat "$T/err")" \
  || ok "under the default limit the 2 KB file is read"
done_tests
