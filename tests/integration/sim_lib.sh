# Shared helpers for the simulator's integration tests (sourced).
set -u
K="$HETMEM_BUILD/tests/sim-kernels"
M="$HETMEM_SRC/tests/sim-kernels/machines/two.json"
H="$HETMEM_BIN/hetmem"
FAILS=0
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
command -v jq >/dev/null || { echo "jq not installed"; exit 77; }
[ -x "$K/chase.sim" ] || { echo "sim kernels not built ($K)"; exit 77; }

fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
ok() { echo "ok: $*"; }
# sim OUT.json ARGS... : runs hetmem sim with --json OUT.json
sim() { local out=$1; shift; "$H" sim -m "$M" --json "$out" "$@" >/dev/null; }
j() { jq -r "$2" "$1"; }
# near A B REL WHAT: |A-B| <= REL*|B|
near() {
  if ! [[ "$1" =~ ^-?[0-9.e+-]+$ && "$2" =~ ^-?[0-9.e+-]+$ ]]; then
    fail "$4: not numbers ('$1', '$2')"
  elif awk -v a="$1" -v b="$2" -v r="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; m = (b < 0 ? -b : b) * r; exit !(d <= m) }'; then
    ok "$4: $1 ~ $2"
  else
    fail "$4: $1 not within $3 of $2"
  fi
}
lt() { if awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; then ok "$3: $1 < $2"; else fail "$3: $1 >= $2"; fi; }
done_tests() { [ $FAILS = 0 ] && echo "all passed" && exit 0; echo "$FAILS failed"; exit 1; }
