#!/usr/bin/env bash
# The pshuffle CLI without MPI: plan statistics and usage errors.
set -u
P="$PSHUFFLE"
fail() { echo "FAIL: $*"; exit 1; }
W="$PS_WORK/cli.d"
rm -rf "$W" && mkdir -p "$W"

# Plan: every rank puts round(Q*n) samples in the pool; those dealt to
# another rank move (on average (M-1)/M of them); peak = n + received;
# mixing grows; counts stay balanced.
"$P" plan --ranks 8 --samples 8000 --q 0.1 --epochs 5 --json > "$W/plan.json" || fail "plan --json"
/usr/bin/python3 - "$W/plan.json" <<'PY' || fail "plan statistics"
import json, sys
p = json.load(open(sys.argv[1]))
assert p["ranks"] == 8 and p["local_min"] == p["local_max"] == 1000, p
prev = 0
for e in p["epochs"]:
    assert 55 <= e["send_min"] <= e["send_max"] <= 100, e
    assert 55 <= e["recv_min"] <= e["recv_max"] <= 100, e
    assert e["peak_storage"] <= 1100, e
    assert e["mixed"] > prev, e
    prev = e["mixed"]
assert abs(p["epochs"][0]["mixed"] - 0.1 * 7 / 8) < 0.01, p["epochs"][0]
PY
"$P" plan --ranks 4 --samples 400 --q 0 --epochs 3 | grep -q "0.00%" || fail "Q=0 must not mix"
"$P" plan --ranks 4 --samples 400 --strategy local --epochs 3 | grep -q "0.00%" || fail "local must not mix"
# Global: a fresh uniform partition each epoch, so about 1/M of the samples
# are on their original rank, every epoch (fixed points allowed).
"$P" plan --ranks 4 --samples 4000 --strategy global --epochs 3 --json > "$W/global.json" || fail "global"
/usr/bin/python3 - "$W/global.json" <<'PY' || fail "global strategy statistics"
import json, sys
p = json.load(open(sys.argv[1]))
for e in p["epochs"]:
    assert e["q"] == 1 and abs(e["mixed"] - 0.75) < 0.03, e
PY
# Two ranks at Q=1: half the samples move, not all (no wholesale swap).
"$P" plan --ranks 2 --samples 2000 --q 1 --epochs 4 --json > "$W/two.json" || fail "two ranks"
/usr/bin/python3 - "$W/two.json" <<'PY' || fail "two ranks must mix"
import json, sys
p = json.load(open(sys.argv[1]))
for e in p["epochs"]:
    assert abs(e["mixed"] - 0.5) < 0.05 and 400 <= e["send_min"] <= 600, e
PY
"$P" plan --ranks 3 --samples 100 --q 0.8 --q-decay 0.5 --q-min 0.1 --epochs 6 --json > "$W/decay.json" || fail "decay"
grep -q '"q": 0.1,' "$W/decay.json" || fail "decaying schedule does not reach its floor"
# Identical for the same seed, different for another.
a=$("$P" plan --ranks 5 --samples 500 --q 0.3 --epochs 4 --seed 1 --json)
b=$("$P" plan --ranks 5 --samples 500 --q 0.3 --epochs 4 --seed 1 --json)
c=$("$P" plan --ranks 5 --samples 500 --q 0.3 --epochs 4 --seed 2 --json)
[ "$a" = "$b" ] || fail "plan not deterministic"
[ "$a" != "$c" ] || fail "seed has no effect"

# Per-rank totals: balanced counts hold; what a rank sends never exceeds
# its pool, and the peak is its count plus what it received.
"$P" plan --ranks 5 --samples 503 --q 0.2 --epochs 3 --per-rank --json > "$W/per.json" || fail "per-rank"
/usr/bin/python3 - "$W/per.json" <<'PY' || fail "per-rank totals"
import json, sys
p = json.load(open(sys.argv[1]))
assert [r["samples"] for r in p["per_rank"]] == [100, 101, 100, 101, 101], p["per_rank"]
assert sum(r["sent"] for r in p["per_rank"]) == sum(r["received"] for r in p["per_rank"])
for r in p["per_rank"]:
    k = int(0.2 * r["samples"] + 0.5)
    assert 0 < r["sent"] <= 3 * k and 0 < r["received"] <= 3 * k, r
    assert r["samples"] < r["peak_storage"] <= r["samples"] + k + 5, r
PY

# Usage errors: exit 2, one line naming the problem.
expect_usage() {
  local want="$1"; shift
  "$P" "$@" > /dev/null 2> "$W/err"; rc=$?
  [ $rc -eq 2 ] || fail "'$*' exited $rc, expected 2"
  [ "$(wc -l < "$W/err")" -eq 1 ] || { cat "$W/err"; fail "'$*': not one line"; }
  grep -q -- "$want" "$W/err" || { cat "$W/err"; fail "'$*': message lacks '$want'"; }
}
expect_usage "outside \[0, 1\]" plan --ranks 4 --samples 100 --q 1.5
expect_usage "outside \[0, 1\]" plan --ranks 4 --samples 100 --q -0.2
expect_usage "required" plan --ranks 4 --q 0.5
expect_usage "not a number" plan --ranks 4 --samples 100 --q abc
expect_usage "not a non-negative integer" plan --ranks -3 --samples 100 --q 0.1
expect_usage "at least the rank count" plan --ranks 8 --samples 4 --q 0.1
expect_usage "not global, local or partial" plan --ranks 4 --samples 100 --strategy wide
expect_usage "takes no --q" plan --ranks 4 --samples 100 --strategy global --q 0.5
expect_usage "unknown option" plan --bogus
expect_usage "unknown command" frobnicate
expect_usage "one store directory" verify

# verify of something that is not a store: exit 1, one line.
"$P" verify "$W/none" > /dev/null 2> "$W/err"; rc=$?
[ $rc -eq 1 ] && grep -q "pshuffle: $W/none: No such file" "$W/err" || { cat "$W/err"; fail "verify of a missing directory"; }
mkdir -p "$W/empty"
"$P" verify "$W/empty" > /dev/null 2> "$W/err"; rc=$?
[ $rc -eq 1 ] && grep -q "no rank-NNNNN" "$W/err" || { cat "$W/err"; fail "verify of an empty directory"; }
"$P" --help | grep -q "plan" || fail "--help"
expect_usage "option '--q' given twice" plan --ranks 4 --samples 100 --q 0.1 --q 0.2

# The released library holds no test hook; the test build (tests/lib) does.
if [ -n "${PSHUFFLE_LIB:-}" ] && [ -e "$PSHUFFLE_LIB" ]; then
  ! grep -aq "PSHUFFLE_TEST_" "$PSHUFFLE_LIB" || fail "$PSHUFFLE_LIB holds PSHUFFLE_TEST_ hooks"
  tl="$(dirname "$(dirname "$PSHUFFLE_LIB")")/tests/lib/$(basename "$PSHUFFLE_LIB")"
  grep -aq "PSHUFFLE_TEST_FAIL_ALLOC" "$tl" || fail "$tl (the test build) lacks its hooks"
fi
echo PASS
