#!/usr/bin/env bash
# The runtimes' environment variables: a value the runtime cannot use is
# refused with one line "hetmem: VAR=VALUE: why", and the program does not
# run (before, the preload library took its default in silence: a period
# of 0 or "abc" sampled at 1 kHz, a depth of 17 hashed 6 frames). The
# commands that start a runtime check the variables a user sets before
# anything runs, with the same words.
set -u
: "${HETMEM_BIN:?}" "${HETMEM_BUILD:?}" "${HETMEM_SRC:?}"
H="$HETMEM_BIN/hetmem"
P="$HETMEM_BUILD/lib/libhetmem_preload.so"
[ -e "$P" ] || { echo "skip: no $P"; exit 77; }
W=$(mktemp -d "${TMPDIR:-/tmp}/hetmem-env.XXXXXX")
trap 'rm -rf "$W"' EXIT
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

# refused VAR VALUE WHY: under the preload (with $EXTRA in the
# environment too), /bin/echo does not run; exit 1 and the one line.
EXTRA=HETMEM_LOG=error
refused() {
  local var=$1 val=$2 why=$3
  env "$EXTRA" "$var=$val" LD_PRELOAD="$P" /bin/echo started > "$W/out" 2> "$W/err"; local rc=$?
  if [ $rc = 1 ] && [ ! -s "$W/out" ] && [ "$(wc -l < "$W/err")" = 1 ] &&
    grep -qxF "hetmem: $var=$val: $why" "$W/err"; then ok "refused: $(cat "$W/err")"
  else bad "$var=$val: exit $rc, stdout '$(cat "$W/out")', stderr '$(cat "$W/err")' (want 'hetmem: $var=$val: $why')"; fi
}
accepted() {
  env "$@" LD_PRELOAD="$P" /bin/echo started > "$W/out" 2> "$W/err"; local rc=$?
  [ $rc = 0 ] && [ "$(cat "$W/out")" = started ] && [ ! -s "$W/err" ] && ok "accepted: $*" ||
    bad "$*: exit $rc, stdout '$(cat "$W/out")', stderr '$(cat "$W/err")'"
}
max=9223372036854775807
EXTRA=HETMEM_BACKEND=soft
refused HETMEM_PERIOD abc "not an integer from 1 to $max"
refused HETMEM_PERIOD 0 "not an integer from 1 to $max"
refused HETMEM_PERIOD -5 "not an integer from 1 to $max"
refused HETMEM_PERIOD 9223372036854775808 "not an integer from 1 to $max"
refused HETMEM_PERIOD 18446744073709551616 "not an integer from 1 to $max"
refused HETMEM_PERIOD "" "not an integer from 1 to $max"
# Without a backend nothing samples: 0 is what hetmem record -b none gives.
EXTRA=HETMEM_BACKEND=
refused HETMEM_PERIOD abc "not an integer from 0 to $max"
EXTRA=HETMEM_LOG=error
refused HETMEM_DEPTH 17 "not an integer from 1 to 16"
refused HETMEM_DEPTH 0 "not an integer from 1 to 16"
refused HETMEM_EVENTS 2 "not an integer from 0 to 1"
refused HETMEM_EVENTS no "not an integer from 0 to 1"
refused HETMEM_MIN_SIZE 1.5K "not a size (an integer of bytes with an optional K, M, G or T suffix, e.g. 512M or 16G)"
refused HETMEM_SPOOL_MAX 1K \
  "not a size of at least 64K (an integer of bytes with an optional K, M, G or T suffix, e.g. 512M or 16G)"
refused HETMEM_BACKEND sofft "not a sampling backend (soft, pebs, ibs, spe, perf-sw; empty for none)"
refused HETMEM_SIGNAL_OFFSET 99 "not an offset in 0..$(( $(kill -l SIGRTMAX) - $(kill -l SIGRTMIN) )) (SIGRTMIN+N must be a real-time signal)"
refused HETMEM_CAPACITY node0 "'node0' is not DEV=SIZE"
refused HETMEM_CAPACITY "node0=1G,=2G" "'=2G' is not DEV=SIZE"
refused HETMEM_CAPACITY node0=lots \
  "'lots' is not a size (an integer of bytes with an optional K, M, G or T suffix, e.g. 512M or 16G)"
refused HETMEM_LOG loud "not a log level (error, warn, info or debug)"
long=$(printf '/tmp/%0300d.json' 0)
refused HETMEM_PLACEMENT "$long" "longer than 255 bytes"
# Values in range, and the edges, run the program; a leading zero is
# decimal (010 is ten, not octal eight).
accepted HETMEM_PERIOD=010 HETMEM_DEPTH=16 HETMEM_EVENTS=0 HETMEM_MIN_SIZE=4K HETMEM_BACKEND= HETMEM_LOG=warn
accepted HETMEM_PERIOD=$max HETMEM_DEPTH=1 HETMEM_CAPACITY=node0=1G,node1=512M
accepted HETMEM_BACKEND= HETMEM_PERIOD=0

# The simulator's runtime: a bad HETMEM_SIM_PERIOD is the run's error.
K="$HETMEM_BUILD/tests/sim-kernels"
if [ -x "$K/nops.sim" ]; then
  HETMEM_SIM_MACHINE="$HETMEM_SRC/share/machines/ddr5.json" HETMEM_SIM_RESULT="$W/sim.json" HETMEM_SIM_PERIOD=0 \
    "$K/nops.sim" 1 1000 > /dev/null 2>&1; rc=$?
  e=$(jq -r .error "$W/sim.json" 2> /dev/null)
  [ $rc = 1 ] && [ "$e" = "HETMEM_SIM_PERIOD=0: not an integer from 1 to $max" ] && ok "sim runtime: $e" ||
    bad "sim runtime with HETMEM_SIM_PERIOD=0: exit $rc, error '$e'"
else
  echo "skip: sim kernels not built"
fi

# The CLI: HETMEM_LOG for every command; HETMEM_SPOOL_MAX and
# HETMEM_SIGNAL_OFFSET before record and run start anything.
echo '{"default": "0"}' > "$W/d.json"
cli() { # cli WANT-LINE ENV... -- ARGS...
  local want=$1; shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" "$H" "$@" > "$W/out" 2> "$W/err"; local rc=$?
  [ $rc = 1 ] && [ "$(wc -l < "$W/err")" = 1 ] && grep -qxF "$want" "$W/err" && ! grep -q started "$W/out" &&
    ok "hetmem ${1}: $(cat "$W/err")" || bad "${envs[*]} hetmem $*: exit $rc, '$(cat "$W/err")' (want '$want')"
}
cli "hetmem: HETMEM_LOG=loud: not a log level (error, warn, info or debug)" HETMEM_LOG=loud -- doctor
for c in "record -b none -o $W/t.hmt" "run --placement $W/d.json"; do
  # shellcheck disable=SC2086
  cli "hetmem: HETMEM_SIGNAL_OFFSET=99: not an offset in 0..$(( $(kill -l SIGRTMAX) - $(kill -l SIGRTMIN) )) (SIGRTMIN+N must be a real-time signal)" \
    HETMEM_SIGNAL_OFFSET=99 -- $c -- /bin/echo started
  # shellcheck disable=SC2086
  cli "hetmem: HETMEM_SPOOL_MAX=1K: not a size of at least 64K (an integer of bytes with an optional K, M, G or T suffix, e.g. 512M or 16G)" \
    HETMEM_SPOOL_MAX=1K -- $c -- /bin/echo started
done
[ $fail = 0 ] && echo "all passed"
exit $fail
