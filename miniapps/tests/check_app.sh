#!/usr/bin/env bash
# Checks one mini-app.  usage: check_app.sh MODE /path/to/app [extra app args]
#   tiny     --size tiny exits 0 and prints "verification: PASSED"
#   inject   --size tiny --inject-error exits 1 and prints "verification: FAILED"
#   badargs  each bad command line exits 2 with exactly one stderr line
#            "<app>: <what>: <why>" and nothing on stdout; --help exits 0
#   traffic  under Valgrind DHAT (--size tiny plus the extra args), the most
#            accessed large object gets at least 10x the traffic of the least
#            accessed one (skips without valgrind)
set -u
mode=$1 app=$2
name=$(basename "$app")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

case $mode in
tiny)
    "$app" --size tiny >"$tmp/out" 2>"$tmp/err"; rc=$?
    cat "$tmp/out" "$tmp/err"
    [ "$rc" -eq 0 ] || fail "$name --size tiny exited $rc"
    grep -qx 'verification: PASSED' "$tmp/out" || fail "no 'verification: PASSED'"
    ;;
inject)
    "$app" --size tiny --inject-error >"$tmp/out" 2>"$tmp/err"; rc=$?
    cat "$tmp/out" "$tmp/err"
    [ "$rc" -eq 1 ] || fail "$name --inject-error exited $rc, expected 1"
    grep -qx 'verification: FAILED' "$tmp/out" || fail "no 'verification: FAILED'"
    ;;
badargs)
    "$app" --help >"$tmp/out" 2>"$tmp/err" || fail "--help exited non-zero"
    grep -q "^usage: $name" "$tmp/out" || fail "--help prints no usage line"
    grep -q -- '--iters' "$tmp/out" || fail "--help does not list --iters"
    bad=( "--size huge" "--size" "--iters" "--iters abc" "--iters -3" "--iters 0"
          "--iters 12x" "--bogus" "stray" "--iters=" "--size=big" "--help=1"
          "--iters 99999999999999999999999" )
    for args in "${bad[@]}"; do
        # shellcheck disable=SC2086  # word splitting is intended
        "$app" $args >"$tmp/out" 2>"$tmp/err"; rc=$?
        [ "$rc" -eq 2 ] || fail "'$name $args' exited $rc, expected 2"
        [ ! -s "$tmp/out" ] || fail "'$name $args' wrote to stdout: $(head -c 200 "$tmp/out")"
        [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "'$name $args' stderr is not one line: $(cat "$tmp/err")"
        grep -Eq "^$name: [^:]+: .+" "$tmp/err" || fail "'$name $args' error not '<app>: <what>: <why>': $(cat "$tmp/err")"
        echo "ok: $name $args -> $(cat "$tmp/err")"
    done
    ;;
traffic)
    command -v valgrind >/dev/null || { echo "SKIP: valgrind not installed"; exit 77; }
    python3 "$(dirname "$0")/../scripts/traffic.py" --min-ratio 10 "$app" --size tiny "${@:3}" \
        || fail "$name: traffic ratio check"
    ;;
*) echo "usage: $0 tiny|inject|badargs|traffic APP" >&2; exit 2 ;;
esac
echo "PASS: $name $mode"
