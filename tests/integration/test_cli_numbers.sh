#!/usr/bin/env bash
# Numeric options go through one parser (hm_cli_u64_in): decimal or 0x-hex,
# never octal; a value out of the option's range, negative, not a number
# or over 2^64-1 is refused with exit 2 and one line naming the option, the
# value and the range, before anything runs. Sampling periods stop at
# 2^63-1, the most a trace header holds: a larger one used to run and
# write a trace that no reader could open.
set -u
: "${HETMEM_BIN:?}" "${HETMEM_BUILD:?}" "${HETMEM_SRC:?}"
H="$HETMEM_BIN/hetmem"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
max=9223372036854775807
# refused CMD OPT VALUE RANGE [NOTE] -- ARGS...: hetmem CMD ARGS (with OPT
# VALUE among them) exits 2 with the one line.
refused() {
  local cmd=$1 opt=$2 val=$3 range=$4 note=""
  shift 4
  [ "$1" != -- ] && { note=" ($1)"; shift; }
  shift
  "$H" "$cmd" "$@" > "$T/out" 2> "$T/err"; local rc=$?
  local want="hetmem: $cmd: $opt: '$val' is not an integer from $range$note (see 'hetmem $cmd --help')"
  if [ $rc = 2 ] && [ "$(wc -l < "$T/err")" = 1 ] && grep -qxF "$want" "$T/err"; then ok "$(cat "$T/err")"
  else bad "hetmem $cmd $*: exit $rc, '$(cat "$T/err")' (want '$want')"; fi
}
prog=/bin/true
M=knl-mcdram
hdr="a trace header holds at most 2^63-1"
for v in 0 -1 9223372036854775808 18446744073709551616 abc 1e3 " 5" 0x; do
  refused sim --sample-period "$v" "1 to $max" "$hdr" -- -m "$M" --sample-period "$v" -- "$prog"
  refused validate --period "$v" "1 to $max" "$hdr" -- --machine "$M" --period "$v" -- "$prog"
done
refused validate --placements 10001 "1 to 10000" -- --machine "$M" --placements 10001 -- "$prog"
refused validate --jobs 0 "1 to 1024" -- --machine "$M" -j 0 -- "$prog"
refused validate --calibrate 101 "1 to 100" runs -- --machine "$M" --calibrate 101 -- "$prog"
refused validate --allow-exit 256 "1 to 255" "an exit status" -- --machine "$M" --allow-exit 256 -- "$prog"
refused record --depth 17 "1 to 16" frames -- -b soft --depth 17 -- "$prog"
refused record -F 0 "1 to 20000" \
  "Hz; each soft sample costs a few microseconds of handler and decoding, so faster rates stall the program" -- \
  -b soft -F 0 -- "$prog"
refused estimate --windows 0 "1 to 100000" -- --windows 0 a.hmt --placement p.json
refused optimize --split-step 101 "1 to 100" "a percentage" -- a.hmt --capacity hbm=1G --split-step 101
refused optimize --budget 0 "1 to 18446744073709551615" "estimator calls" -- a.hmt --capacity hbm=1G --budget 0
refused optimize --refine 0 "1 to 100" rounds -- a.hmt --capacity hbm=1G --refine 0
# soft: -p is microseconds and the trace holds nanoseconds.
"$H" record -b soft -p 9223372036854776 -o "$T/p.hmt" -- "$prog" > /dev/null 2> "$T/err"; rc=$?
[ $rc = 2 ] && [ "$(wc -l < "$T/err")" = 1 ] && grep -qF -- "-p: 9223372036854776 microseconds is over 9223372036854775" "$T/err" &&
  ok "$(cat "$T/err")" || bad "record -p 9223372036854776: exit $rc, '$(cat "$T/err")'"
[ -e "$T/p.hmt" ] && bad "a trace was written for a refused period"

# A leading zero is decimal: --sample-period 010 samples every 10 accesses.
K="$HETMEM_BUILD/tests/sim-kernels"
if [ -x "$K/nops.sim" ] && command -v jq > /dev/null; then
  "$H" sim -m ddr5 -o "$T/s.hmt" --sample-period 010 -- "$K/nops.sim" 1 1000 > /dev/null 2> "$T/err" ||
    bad "sim --sample-period 010: $(cat "$T/err")"
  p=$("$H" trace info --json "$T/s.hmt" | jq -r '.header.period // .period')
  [ "$p" = 10 ] && ok "--sample-period 010 is 10" || bad "--sample-period 010 gave period '$p'"
  "$H" sim -m ddr5 -o "$T/m.hmt" --sample-period "$max" -- "$K/nops.sim" 1 1000 > /dev/null 2> "$T/err" &&
    "$H" trace info "$T/m.hmt" > /dev/null 2>> "$T/err" && ok "--sample-period 2^63-1 runs and its trace reads" ||
    bad "--sample-period $max: $(cat "$T/err")"
else
  echo "skip: sim kernels or jq missing"
fi
[ $fail = 0 ] && echo "all passed"
exit $fail
