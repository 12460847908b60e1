#!/usr/bin/env bash
# Mutation check of the estimator's default model: every tunable of
# src/estimate/model.c's table moved by -50% and by +50%, and every rule
# removed, one at a time, must make test_estimate fail. Runs the test build
# test_estimate_mut (model.c compiled with HM_EST_MUTATION, which reads
# HM_EST_MUTATE: "name*factor" scales a tunable, "-name" removes a rule).
#
# usage: tests/est_mutation.sh TEST_ESTIMATE_MUT [NAME...]
# With names, only those tunables and rules. Lists every mutation that
# test_estimate survives and exits 1 if one is not in
# tests/est_mutation.known (the survivors not yet pinned), or if one listed
# there no longer survives (the list only shrinks).
set -uo pipefail
bin=${1:?usage: est_mutation.sh TEST_ESTIMATE_MUT [NAME...]}
shift
src=$(cd "$(dirname "$0")/.." && pwd)
model=$src/src/estimate/model.c

# The names, from the code's own tables (so a new tunable or rule is
# checked without editing this script).
tunables=$(sed -n '/^static TUNE_CONST tunable_t tunables/,/^};/p' "$model" | grep -o '= {"[a-z0-9_]*"' | sed 's/.*"\(.*\)"/\1/')
rules=$(sed -n '/^static const char \*const rule_names/,/};/p' "$model" | grep -o '"[a-z0-9_]*"' | tr -d '"')
if [ -z "$tunables" ] || [ -z "$rules" ]; then
    echo "est_mutation: cannot read the tunables and rules from $model" >&2
    exit 1
fi
# want NAME [SELECTED...]: NAME is among those selected (all when none is).
want() {
    local n=$1
    shift
    [ $# -eq 0 ] && return 0
    for w in "$@"; do [ "$w" = "$n" ] && return 0; done
    return 1
}

"$bin" >/dev/null 2>&1 || { echo "est_mutation: $bin fails unmutated" >&2; exit 1; }

mutations=()
for t in $tunables; do
    want "$t" "$@" && mutations+=("$t*0.5" "$t*1.5")
done
for r in $rules; do
    want "$r" "$@" && mutations+=("-$r")
done
survived=()
for m in "${mutations[@]}"; do
    HM_EST_MUTATE="$m" timeout 120 "$bin" >/dev/null 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then
        survived+=("$m")
    elif [ $rc -eq 2 ]; then
        echo "est_mutation: HM_EST_MUTATE=$m not understood by $bin" >&2
        exit 1
    fi
done
known=$(grep -v '^#' "$src/tests/est_mutation.known" 2>/dev/null | sed '/^$/d')
echo "est_mutation: ${#mutations[@]} mutations, ${#survived[@]} survived"
bad=0
for m in "${survived[@]}"; do
    if grep -qxF -- "$m" <<<"$known"; then
        echo "  survived (known, tests/est_mutation.known): HM_EST_MUTATE='$m'"
    else
        echo "  survived: HM_EST_MUTATE='$m': no test fails without it"
        bad=1
    fi
done
for m in $known; do
    n=${m#-}
    n=${n%%\**}
    want "$n" "$@" || continue
    printf '%s\n' "${survived[@]}" | grep -qxF -- "$m" && continue
    echo "  killed now: HM_EST_MUTATE='$m': remove it from tests/est_mutation.known"
    bad=1
done
exit $bad
