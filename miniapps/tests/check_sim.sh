#!/usr/bin/env bash
# Runs one mini-app's hetmem-cc build under the simulator.
#   usage: check_sim.sh HETMEM MACHINE /path/to/app.sim [extra app args]
# The app runs at --size tiny (plus the extra args) under
# `hetmem sim -m MACHINE --json`; it must exit 0 and print
# "verification: PASSED", and the JSON report must attribute memory traffic
# to at least two of the objects the app names with hetmem_name() (a run
# whose allocations the simulator did not see would pass verification but
# would be useless for placement studies).
set -u
[ $# -ge 3 ] || { echo "usage: check_sim.sh HETMEM MACHINE APP.sim [args]"; exit 2; }
hetmem=$1 machine=$2 app=$3
shift 3
name=$(basename "$app")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v jq >/dev/null || { echo "jq not installed"; exit 77; }
[ -x "$app" ] || fail "$app not built"

start=$(date +%s.%N)
"$hetmem" sim -m "$machine" --json "$tmp/report.json" -- "$app" --size tiny "$@" \
    >"$tmp/out" 2>"$tmp/err"; rc=$?
end=$(date +%s.%N)
cat "$tmp/out" "$tmp/err"
echo "elapsed: $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }') s"
[ "$rc" -eq 0 ] || fail "hetmem sim -m $machine -- $name --size tiny $* exited $rc"
grep -qx 'verification: PASSED' "$tmp/out" || fail "no 'verification: PASSED' from $name"
[ -s "$tmp/report.json" ] || fail "no JSON report written"
runtime=$(jq -r '.runtime_s' "$tmp/report.json") || fail "JSON report does not parse"
awk -v t="$runtime" 'BEGIN { exit !(t > 0) }' || fail "simulated runtime is '$runtime'"
named=$(jq '[.objects[] | select(.name != null and (.bytes_read + .bytes_written) > 0)] | length' \
        "$tmp/report.json") || fail "JSON report has no objects list"
[ "$named" -ge 2 ] || fail "only $named named objects with traffic in the report"
echo "ok: $name verified under hetmem sim -m $machine (simulated ${runtime} s, $named named objects with traffic)"
