#!/usr/bin/env bash
# Out of memory in the CLI: hetmem estimate, hetmem trace info and hetmem
# trace objects under address-space limits (ulimit -v), from the least with
# which hetmem starts at all to the least with which the command succeeds:
# every run ends with exit 0, or with exit 1 and one line "hetmem: ..." on
# stderr; never a signal (a crash or an abort) and never a second line.
source "$(dirname "$0")/sim_lib.sh"
P="$K/phases.sim"
[ -x "$P" ] || { echo "phases.sim not built"; exit 77; }
# A sanitizer runtime reserves terabytes of address space at start.
if grep -Eq '^HETMEM_SANITIZE:STRING=.+' "$HETMEM_BUILD/CMakeCache.txt" 2>/dev/null; then
  echo "skip: sanitizer build (address-space limits do not apply)"
  exit 77
fi
jq '.devices |= .[0:2] | .name = "test-pair"' "$HETMEM_SRC/tests/sim-kernels/machines/two.json" > "$T/pair.json"
for d in slow fast; do
  "$H" sim -m "$T/pair.json" --device $d -o "$T/$d.hmt" -- "$P" 8388608 4 1 >/dev/null || fail "sim --device $d"
done
echo '{"default": "slow", "rules": [{"pages_percent": 50, "device": "fast"}]}' > "$T/pl.json"

# runs KB CMD...: the command under a limit of KB KiB of address space;
# sets rc and err (stderr).
runs() { local kb=$1; shift; (ulimit -v "$kb"; exec "$@") >/dev/null 2>"$T/err"; rc=$?; err=$(cat "$T/err"); }
# least KB in [lo, hi] with which CMD... exits 0 (bisection; the runs
# between are not checked here)
least() {
  local lo=$1 hi=$2; shift 2
  while [ $((hi - lo)) -gt 1024 ]; do
    local mid=$(((lo + hi) / 2))
    runs "$mid" "$@"
    if [ $rc = 0 ]; then hi=$mid; else lo=$mid; fi
  done
  echo "$hi"
}

base=$(least 1024 4194304 "$H" --version)
checks=0
for what in estimate info objects; do
  case $what in
    estimate) cmd=("$H" estimate "$T/slow.hmt" "$T/fast.hmt" --placement "$T/pl.json") ;;
    info) cmd=("$H" trace info "$T/slow.hmt") ;;
    objects) cmd=("$H" trace objects "$T/slow.hmt") ;;
  esac
  runs 4194304 "${cmd[@]}"
  [ $rc = 0 ] || { fail "$what without a tight limit: exit $rc: $err"; continue; }
  top=$(least "$base" 4194304 "${cmd[@]}")
  # 40 limits from where hetmem starts to where the command succeeds.
  failed_runs=0
  for i in $(seq 0 39); do
    kb=$((base + (top - base) * i / 40))
    runs "$kb" "${cmd[@]}"
    checks=$((checks + 1))
    lines=$(printf '%s' "$err" | grep -c '')
    if [ $rc = 0 ]; then
      continue
    elif [ $rc = 1 ] && [ "$lines" = 1 ] && [[ "$err" == hetmem:* ]]; then
      failed_runs=$((failed_runs + 1))
    else
      fail "$what under ${kb} KiB: exit $rc, $lines lines on stderr: $(head -c 300 "$T/err")"
    fi
  done
  [ $failed_runs -gt 0 ] || fail "$what: no run between ${base} and ${top} KiB ran out of memory"
  ok "$what: $failed_runs of 40 runs between ${base} and ${top} KiB ran out of memory, each with one line and exit 1"
done
done_tests
