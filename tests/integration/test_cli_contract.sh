#!/usr/bin/env bash
# The CLI's shared contract, command by command: usage lines made from the
# option tables (every listed option is in the usage line), -h and
# `hetmem help CMD` as --help, options after operands, `sim --json -` with
# only JSON on stdout, file errors naming the file and the reason once,
# unitless capacities below a page refused, and a placement rule that
# matches nothing treated alike by estimate, sim and run (a warning; an
# error with --strict).
source "$(dirname "$0")/sim_lib.sh"
PS="$HETMEM_BUILD/bin/pshuffle"
C="$K/chase.sim"

# -- help -----------------------------------------------------------------
# usage_block FILE: the usage block (up to the first blank line).
usage_block() { sed -n '1,/^$/p' "$1"; }
# listed_opts FILE: the options of the "options:" list, each as the usage
# line writes it (its short form when it has one).
listed_opts() {
  sed -n '/^options:/,/^$/p' "$1" | sed -En 's/^  (-[A-Za-z]), --.*/\1/p; s/^ +(--[a-z][a-z-]*).*/\1/p' |
    grep -vx -- -h | sort -u
}
check_help() { # NAME CMD...: --help, -h and the usage line from the options
  local name=$1; shift
  "$@" --help > "$T/h1" 2> "$T/err" || { fail "$name --help: exit $?"; return; }
  "$@" -h > "$T/h2" 2>> "$T/err" || { fail "$name -h: exit $?"; return; }
  cmp -s "$T/h1" "$T/h2" && ok "$name -h is --help" || fail "$name -h differs from --help"
  local missing=""
  for o in $(listed_opts "$T/h1"); do
    usage_block "$T/h1" | grep -Eq -- "(^|[[( ])$o( |]|\\.|$)" || missing="$missing $o"
  done
  [ -n "$(listed_opts "$T/h1")" ] || missing=" (no options listed)"
  [ -z "$missing" ] && ok "$name: the usage line has every listed option" || fail "$name: usage line lacks$missing"
}
for c in doctor record run sim estimate optimize validate; do
  check_help "hetmem $c" "$H" $c
  "$H" help $c > "$T/h3" && "$H" $c --help > "$T/h1" && cmp -s "$T/h1" "$T/h3" && ok "hetmem help $c" || fail "hetmem help $c"
done
for s in info dump objects; do
  check_help "hetmem trace $s" "$H" trace $s
  "$H" help trace $s > "$T/h3" && "$H" trace $s --help > "$T/h1" && cmp -s "$T/h1" "$T/h3" && ok "hetmem help trace $s" ||
    fail "hetmem help trace $s"
done
"$H" help nosuch 2> "$T/err"; [ $? = 2 ] && grep -q "^hetmem: help: nosuch: unknown command" "$T/err" && ok "hetmem help of an unknown command" ||
  fail "hetmem help nosuch: $(cat "$T/err")"
"$H" record --help > "$T/h1"
for w in "none|perf-sw" "-F HZ" "--per-cpu"; do
  usage_block "$T/h1" | grep -qF -- "$w" && ok "record usage shows $w" || fail "record usage lacks $w: $(usage_block "$T/h1")"
done
if [ -x "$PS" ]; then
  for c in plan verify; do
    check_help "pshuffle $c" "$PS" $c
    "$PS" help $c > "$T/h3" && "$PS" $c --help > "$T/h1" && cmp -s "$T/h1" "$T/h3" && ok "pshuffle help $c" || fail "pshuffle help $c"
  done
  out=$("$PS" plan --json --ranks 4 --samples 100 --q 0.5 --epochs 1) && [ "$(echo "$out" | jq -r .ranks)" = 4 ] &&
    ok "pshuffle plan options in any order" || fail "pshuffle plan: $out"
  "$PS" verify "$T/nosuch" --json > /dev/null 2> "$T/err"
  [ $? = 1 ] && grep -q "nosuch" "$T/err" && ok "pshuffle verify DIR --json (option after the operand)" ||
    fail "pshuffle verify DIR --json: $(cat "$T/err")"
else
  echo "skip: pshuffle checks (pshuffle not built: MPI missing)"
fi

# -- sim --json -: only JSON on stdout; the program's output on stderr --------
"$H" sim -m "$M" --json - -- "$C" 4096 10 > "$T/out.json" 2> "$T/err" || fail "sim --json -"
if python3 -m json.tool "$T/out.json" > /dev/null 2>&1 && [ "$(jq -r .exit_status "$T/out.json")" = 0 ]; then
  ok "sim --json - | python3 -m json.tool"
else
  fail "sim --json -: stdout is not JSON: $(head -c 200 "$T/out.json")"
fi
grep -qx "0x1" "$T/err" && ok "the program's own output went to stderr" || fail "program output not on stderr: $(cat "$T/err")"
"$H" sim -m "$M" -- "$C" 4096 10 > "$T/out.txt" 2> /dev/null
head -1 "$T/out.txt" | grep -qx "0x1" && ok "without --json -, the program's output stays on stdout" ||
  fail "sim without --json -: $(head -2 "$T/out.txt")"

# -- options after operands (GNU style) ------------------------------------
"$H" sim -m "$M" --device fast -o "$T/fast.hmt" -- "$C" 65536 20000 > /dev/null 2>&1 || fail "sim -o fast.hmt"
"$H" sim -m "$M" --device slow -o "$T/slow.hmt" -- "$C" 65536 20000 > /dev/null 2>&1 || fail "sim -o slow.hmt"
for s in info objects; do
  "$H" trace $s "$T/fast.hmt" --json > "$T/a.json" && "$H" trace $s --json "$T/fast.hmt" > "$T/b.json" &&
    cmp -s "$T/a.json" "$T/b.json" && ok "trace $s FILE --json" || fail "trace $s FILE --json"
done
"$H" trace dump "$T/fast.hmt" -n 3 --jsonl > "$T/a.json" && [ "$(wc -l < "$T/a.json")" = 3 ] && ok "trace dump FILE -n 3 --jsonl" ||
  fail "trace dump FILE -n 3 --jsonl"

# -- file errors: exit 1, one line, the file and the reason once --------------
file_err() { # FILE REASON ARGS...
  local f=$1 why=$2; shift 2
  "$H" "$@" > /dev/null 2> "$T/err"; local rc=$?
  local line; line=$(cat "$T/err")
  local times; times=$(grep -o -F -- "$f" "$T/err" | wc -l)
  local reasons; reasons=$(grep -o -F -- "$why" "$T/err" | wc -l)
  if [ $rc = 1 ] && [ "$(wc -l < "$T/err")" = 1 ] && [ "$times" = 1 ] && [ "$reasons" = 1 ]; then
    ok "$1 ($*): $line"
  else
    fail "$* : exit $rc, want one line naming $f and '$why' once: $line"
  fi
}
N="$T/nosuch.json"; NT="$T/nosuch.hmt"; E="No such file or directory"
echo '{"default": "slow", "rules": []}' > "$T/p.json"
file_err "$N" "$E" estimate "$T/slow.hmt" "$T/fast.hmt" --placement "$N"
file_err "$N" "$E" estimate --summary "$N" --placement "$T/p.json"
file_err "$NT" "$E" estimate "$T/slow.hmt" "$NT" --placement "$T/p.json"
file_err "$NT" "$E" optimize "$T/slow.hmt" "$NT" --capacity fast=1M
file_err "$N" "$E" optimize --summary "$N" --capacity fast=1M
file_err "$N" "$E" sim -m "$N" -- "$C" 4096 10
file_err "$N" "$E" sim -m "$M" --placement "$N" -- "$C" 4096 10
file_err "$N" "$E" run --placement "$N" -- /bin/true
file_err "$N" "$E" validate --machine "$N" -- "$C" 4096 10
for s in info dump objects; do file_err "$NT" "$E" trace $s "$NT"; done
file_err "$T/no/dir/o.json" "$E" sim -m "$M" --json "$T/no/dir/o.json" -- "$C" 4096 10
file_err "$T/no/dir/p.json" "$E" optimize "$T/slow.hmt" "$T/fast.hmt" --capacity fast=1M -o "$T/no/dir/p.json"

# -- capacities: a unitless size below a page is refused; percentages nowhere --
cap_err() { # WANT ARGS...
  local want=$1; shift
  "$H" "$@" > /dev/null 2> "$T/err"; local rc=$?
  [ $rc = 2 ] && [ "$(wc -l < "$T/err")" = 1 ] && grep -qF -- "$want" "$T/err" && ok "refused: $(cat "$T/err")" ||
    fail "$*: exit $rc, want 2 and '$want': $(cat "$T/err")"
}
cap_err "64 bytes is smaller than a page; did you mean 64M?" optimize "$T/slow.hmt" "$T/fast.hmt" --capacity fast=64
cap_err "64 bytes is smaller than a page; did you mean 64M?" run --placement "$T/p.json" --capacity fast=64 -- /bin/true
cap_err "'25%' is not a size" optimize "$T/slow.hmt" "$T/fast.hmt" --capacity fast=25%
cap_err "'25%' is not a size" run --placement "$T/p.json" --capacity fast=25% -- /bin/true
"$H" optimize "$T/slow.hmt" "$T/fast.hmt" --capacity fast=4096 > /dev/null 2>&1 && ok "a unitless capacity of a page" ||
  fail "--capacity fast=4096 refused"
"$H" optimize "$T/slow.hmt" "$T/fast.hmt" --capacity fast=0 > /dev/null 2>&1 && ok "a capacity of 0" || fail "--capacity fast=0 refused"

# -- one size grammar: an integer with an optional K/M/G/T suffix ----------
for v in 1e3 0.5K 1.5M 0x10 38.5M; do
  cap_err "--min-size: '$v' is not a size" run --placement "$T/p.json" --min-size $v -- /bin/true
  cap_err "--min-size: '$v' is not a size" record --min-size $v -- /bin/true
  cap_err "--capacity: '$v' is not a size" optimize "$T/slow.hmt" "$T/fast.hmt" --capacity fast=$v
  cap_err "--capacity: '$v' is not a size" run --placement "$T/p.json" --capacity fast=$v -- /bin/true
done
"$H" optimize "$T/slow.hmt" "$T/fast.hmt" --capacity fast=64KiB > /dev/null 2>&1 && ok "a capacity of 64KiB" ||
  fail "--capacity fast=64KiB refused"
sed 's/"size": "[0-9]*K"/"size": "0.5M"/' "$HETMEM_SRC/share/machines/ddr4.json" > "$T/frac.json"
"$H" sim -m "$T/frac.json" -- "$C" 4096 10 > /dev/null 2> "$T/err"; rc=$?
[ $rc = 1 ] && [ "$(wc -l < "$T/err")" = 1 ] && grep -qF 'frac.json' "$T/err" && grep -qF '"size" must be a size' "$T/err" &&
  ok "a fractional cache size in a machine file refused: $(cat "$T/err")" || fail "machine size 0.5M: exit $rc: $(cat "$T/err")"
HETMEM_JSON_MAX=1e3 "$H" estimate "$T/slow.hmt" "$T/fast.hmt" --placement "$T/p.json" > /dev/null 2> "$T/err"; rc=$?
[ $rc = 1 ] && [ "$(wc -l < "$T/err")" = 1 ] && grep -qF 'HETMEM_JSON_MAX=1e3: not a size' "$T/err" &&
  ok "HETMEM_JSON_MAX=1e3 refused: $(cat "$T/err")" || fail "HETMEM_JSON_MAX=1e3: exit $rc: $(cat "$T/err")"

# -- an option given twice: refused alike by every command ------------------
twice() { # OPTION ARGS... (OPTION as the error names it)
  local o=$1; shift
  cap_err "option $o given twice" "$@"
}
twice "'--json'" doctor --json --json
twice "'-o' (--output)" record -o "$T/a.hmt" -o "$T/b.hmt" -- /bin/true
twice "'--placement'" run --placement "$T/p.json" --placement "$T/p.json" -- /bin/true
twice "'-m' (--machine)" sim -m "$M" -m "$M" -- "$C" 4096 10
twice "'--json'" estimate "$T/slow.hmt" "$T/fast.hmt" --placement "$T/p.json" --json --json
twice "'--algo'" optimize "$T/slow.hmt" "$T/fast.hmt" --capacity fast=1M --algo greedy --algo rl
twice "'--seed'" validate --machine "$M" --seed 1 --seed 2 -- "$C" 4096 10
for s in info objects; do twice "'--json'" trace $s --json --json "$T/fast.hmt"; done
twice "'-n' (--limit)" trace dump -n 1 -n 2 "$T/fast.hmt"
cap_err "--capacity: device 'fast' given twice" optimize "$T/slow.hmt" "$T/fast.hmt" --capacity fast=1M --capacity fast=2M
cap_err "--capacity: device 'fast' given twice" run --placement "$T/p.json" --capacity fast=1G --capacity fast=2G -- /bin/true
if [ -x "$PS" ]; then
  "$PS" plan --ranks 2 --samples 10 --q 0.5 --q 0.6 > /dev/null 2> "$T/err"; rc=$?
  [ $rc = 2 ] && [ "$(wc -l < "$T/err")" = 1 ] && grep -qF "option '--q' given twice" "$T/err" &&
    ok "refused: $(cat "$T/err")" || fail "pshuffle plan --q twice: exit $rc: $(cat "$T/err")"
  "$PS" verify --json --json "$T" > /dev/null 2> "$T/err"; rc=$?
  [ $rc = 2 ] && grep -qF "option '--json' given twice" "$T/err" && ok "refused: $(cat "$T/err")" ||
    fail "pshuffle verify --json twice: exit $rc: $(cat "$T/err")"
fi

# -- periods and signals that would wrap -------------------------------------
cap_err "-p: 18446744073709602 microseconds is over 9223372036854775" record -b soft -p 18446744073709602 -- /bin/true
for v in 4294967296 31 -1 4K; do
  HETMEM_SIGNAL_OFFSET=$v "$H" record -b soft -o "$T/sig.hmt" -- /bin/true > /dev/null 2> "$T/err"; rc=$?
  [ $rc = 1 ] && [ "$(wc -l < "$T/err")" = 1 ] && grep -qF "hetmem: HETMEM_SIGNAL_OFFSET=$v: not an offset in 0..30" "$T/err" &&
    ok "refused: $(cat "$T/err")" || fail "HETMEM_SIGNAL_OFFSET=$v: exit $rc: $(cat "$T/err")"
done
if [ -e "$HETMEM_BUILD/lib/libhetmem_preload.so" ]; then
  HETMEM_SIGNAL_OFFSET=30 "$H" record -b soft -o "$T/sig.hmt" -- /bin/true > /dev/null 2> "$T/err" &&
    ok "HETMEM_SIGNAL_OFFSET=30 (SIGRTMAX) records" || fail "HETMEM_SIGNAL_OFFSET=30: $(cat "$T/err")"
fi

# -- a rule that matches nothing: a warning in estimate, sim and run; an error
# with --strict in all three ------------------------------------------------
echo '{"default": "slow", "rules": [{"name": "nosuch", "device": "fast"}]}' > "$T/un.json"
echo '{"default": "0", "rules": [{"name": "nosuch", "device": "0"}]}' > "$T/un0.json"
rule='rules\[0\] {"name": "nosuch", "device": "[a-z0-9]*"} matched nothing'
unmatched() { # NAME PLACEMENT ARGS... (--strict goes first)
  local name=$1 pl=$2; shift 2
  "$H" "$@" > /dev/null 2> "$T/err"; local rc=$?
  [ $rc = 0 ] && grep -q "^hetmem: warning: .*$pl: $rule\$" "$T/err" && ok "$name: a warning" ||
    fail "$name: exit $rc: $(cat "$T/err")"
  "$H" "$1" --strict "${@:2}" > /dev/null 2> "$T/err"; rc=$?
  [ $rc = 1 ] && grep -q "^hetmem: .*$pl: $rule (--strict)\$" "$T/err" && ok "$name --strict: an error" ||
    fail "$name --strict: exit $rc: $(cat "$T/err")"
}
unmatched estimate un.json estimate "$T/slow.hmt" "$T/fast.hmt" --placement "$T/un.json"
unmatched sim un.json sim -m "$M" --placement "$T/un.json" -- "$C" 4096 10
if [ -e "$HETMEM_BUILD/lib/libhetmem_preload.so" ]; then
  unmatched run un0.json run --placement "$T/un0.json" -- /bin/true
else
  echo "skip: run (libhetmem_preload.so not built)"
fi
done_tests
