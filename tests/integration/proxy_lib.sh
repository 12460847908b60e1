# Shared prologue of the proxy-app tests (sourced): a work folder, the
# ok/fail counters, and proxy_build_check, which builds a third-party app of
# bench/apps natively and with its hetmem compiler wrapper and runs
# bench/apps/check.py at the app's test size, keeping the simulated run's
# `hetmem sim --json` in $T/sim.json.
set -u
B="$HETMEM_BUILD"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
ok() { echo "ok: $*"; }
done_tests() { [ $FAILS = 0 ] && echo "all passed" && exit 0; echo "$FAILS failed"; exit 1; }

# proxy_build_check APP WRAPPER WHAT: builds targets proxy_APP and
# proxy_APP.sim (WRAPPER: hetmem-cc, hetmem-c++ or hetmem-fort, which must
# be built), then checks both builds at size test; WHAT is what a pass
# means. Skips (exit 77) without jq or the wrapper; exits 1 on a failure.
# At the test sizes the apps' arrays are a few KiB, under hetmem's default
# --min-size of 64K: the simulated run places and tracks every allocation
# (--min-size 1), so that the tests see all of the apps' storage.
proxy_build_check() {
  local app=$1 wrapper=$2 what=$3
  command -v jq >/dev/null || { echo "jq not installed"; exit 77; }
  [ -x "$B/bin/$wrapper" ] || { echo "$wrapper not built on this architecture"; exit 77; }
  cmake --build "$B" --target "proxy_$app" "proxy_$app.sim" >"$T/build.log" 2>&1 ||
    { tail -5 "$T/build.log"; echo "FAIL: cmake --build --target proxy_$app proxy_$app.sim"; exit 1; }
  ok "built $B/bench/apps/$app and $app.sim"
  python3 "$HETMEM_SRC/bench/apps/check.py" "$app" test --build "$B" --json "$T/sim.json" --min-size 1 ||
    { echo "FAIL: check.py $app test"; exit 1; }
  ok "$what"
}

# tracked_pct: the share of the simulated run's traffic (bytes read and
# written) in tracked objects, in whole percent.
tracked_pct() {
  jq '([.objects[] | .bytes_read + .bytes_written] | add // 0) as $t |
      100 * $t / ($t + .untracked.bytes_read + .untracked.bytes_written) | floor' "$T/sim.json"
}
