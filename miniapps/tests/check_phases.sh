#!/usr/bin/env bash
# Per-phase placement pays on a mini-app whose phases want different data in
# fast memory, migration included.
#   usage: check_phases.sh HETMEM MACHINE FAST PERCENT /path/to/app.sim [app args]
# The app runs at --size tiny (plus the args) under `hetmem sim -m MACHINE`
# once per device, giving the traces; FAST gets PERCENT of the footprint.
# `hetmem optimize --algo exhaustive` gives the best static placement and
# `--algo rl --phases` a per-phase one. Both are then simulated
# (`hetmem sim --placement`): the per-phase placement must be predicted and
# simulated faster than the static one by more than 1%, with bytes migrated
# at phase boundaries, and both runs must verify.
set -u
[ $# -ge 5 ] || { echo "usage: check_phases.sh HETMEM MACHINE FAST PERCENT APP.sim [args]"; exit 2; }
hetmem=$1 machine=$2 fast=$3 pct=$4 app=$5
shift 5
name=$(basename "$app")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v jq >/dev/null || { echo "jq not installed"; exit 77; }
[ -x "$app" ] || fail "$app not built"

sim() { # TAG SIM-ARGS...: one verified run, report in $tmp/TAG.json
    local tag=$1
    shift
    "$hetmem" sim -m "$machine" --json "$tmp/$tag.json" "$@" -- "$app" --size tiny "${APP_ARGS[@]}" \
        >"$tmp/$tag.out" 2>"$tmp/$tag.err" || fail "$tag: hetmem sim exited $?: $(tail -c 300 "$tmp/$tag.err")"
    grep -qx 'verification: PASSED' "$tmp/$tag.out" || fail "$tag: no 'verification: PASSED'"
}
APP_ARGS=("$@")
traces=()
mjson=$(dirname "$0")/../../share/machines/$machine.json
[ -f "$mjson" ] || fail "no machine preset $machine"
for d in $(jq -r '.devices[].name' "$mjson"); do
    sim "all-$d" --device "$d" -o "$tmp/$d.hmt"
    traces+=("$tmp/$d.hmt")
done
foot=$(jq '[.objects[] | select(.name != null) | .bytes_allocated] | add' "$tmp/all-$fast.json")
cap=$((foot * pct / 100))
echo "footprint $foot bytes; $fast capacity $cap bytes ($pct%)"

"$hetmem" optimize "${traces[@]}" --capacity "$fast=$cap" --algo exhaustive --json -o "$tmp/static.place" \
    >"$tmp/static.opt" || fail "optimize --algo exhaustive failed"
"$hetmem" optimize "${traces[@]}" --capacity "$fast=$cap" --algo rl --phases --seed 1 --json -o "$tmp/phased.place" \
    >"$tmp/phased.opt" || fail "optimize --phases failed"
ps=$(jq .predicted_runtime_s "$tmp/static.opt")
pp=$(jq .predicted_runtime_s "$tmp/phased.opt")
mig=$(jq .migration_s "$tmp/phased.opt")
echo "predicted: static $ps s, per phase $pp s (of which migration $mig s)"
awk -v s="$ps" -v p="$pp" 'BEGIN { exit !(p < 0.99 * s) }' || fail "per-phase placement not predicted faster"
awk -v m="$mig" 'BEGIN { exit !(m > 0) }' || fail "no migration predicted"

sim static --placement "$tmp/static.place"
sim phased --placement "$tmp/phased.place"
ts=$(jq .runtime_s "$tmp/static.json")
tp=$(jq .runtime_s "$tmp/phased.json")
moved=$(jq .migrated_bytes "$tmp/phased.json")
echo "simulated: static $ts s, per phase $tp s ($moved bytes migrated)"
[ "$moved" -gt 0 ] || fail "nothing migrated in the per-phase run"
awk -v s="$ts" -v p="$tp" 'BEGIN { exit !(p < 0.99 * s) }' || fail "per-phase placement not simulated faster"
echo "PASS: $name on $machine, $fast at $pct%: per phase $(awk -v s="$ts" -v p="$tp" 'BEGIN { printf "%+.1f%%", 100 * (s / p - 1) }') over the best static placement, simulated"
