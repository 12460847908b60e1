#!/usr/bin/env bash
# The pshuffle benchmarks' argument handling and report arithmetic, without
# training or MPI: bad arguments are refused with one line and exit 2, the
# initial partitions have the sizes and skew they claim, the accuracy report
# computes mean ± std and the paired difference to global shuffling, the plan
# probe's pool is round(Q*n), and a results page keeps its prose.
set -u
S="$PS_SRC"
PY=/usr/bin/python3
W="$PS_WORK/bench.d"
rm -rf "$W" && mkdir -p "$W"
fail() { echo "FAIL: $*"; exit 1; }
$PY -c 'import numpy' 2>/dev/null || { echo "skip: /usr/bin/python3 has no numpy"; exit 77; }
T="$S/bench/pshuffle_accuracy_train.py"

# Usage errors: exit 2, one line naming the problem.
expect_usage() {  # expect_usage PATTERN CMD...
  local pat="$1"; shift
  "$@" > "$W/out" 2> "$W/err"; local rc=$?
  [ $rc = 2 ] || fail "$*: exit $rc, expected 2 ($(cat "$W/err"))"
  grep -q -- "$pat" "$W/err" || fail "$*: stderr lacks '$pat': $(cat "$W/err")"
}
expect_usage "usage: bench/pshuffle-accuracy" "$S/bench/pshuffle-accuracy" --bogus
expect_usage "usage: bench/pshuffle-scale" "$S/bench/pshuffle-scale" --bogus
expect_usage "partition must be one of" $PY "$T" train --out "$W/x" --configs 1:nope:global:bn
expect_usage "expected SEED:PARTITION:STRATEGY:NORM" $PY "$T" train --out "$W/x" --configs 1:sorted:global
expect_usage "Q must lie in (0, 1)" $PY "$T" train --out "$W/x" --configs 1:sorted:1.5:bn
expect_usage "expected global, local, sched" $PY "$T" train --out "$W/x" --strategies fast
expect_usage "norm must be bn or gn" $PY "$T" train --out "$W/x" --configs 1:iid:local:ln
expect_usage "must be >= 1" $PY "$T" train --out "$W/x" --workers 0
[ -f "$W/x" ] && fail "a refused run wrote its output file"

# Partitions: equal sizes, disjoint, complete; label-sorted gives each rank
# about C/M classes; Dirichlet(0.1) is skewed but keeps the sizes equal.
$PY - "$S/bench" <<'PY' || fail "partitions"
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import pshuffle_accuracy_train as t
y = np.random.default_rng(0).integers(0, 10, 12000)
for kind in t.PARTITIONS:
    parts = t.partition(y, kind, 8, seed=1)
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1, (kind, sizes)
    allidx = np.concatenate(parts)
    assert len(allidx) == len(y) and len(np.unique(allidx)) == len(y), kind
    classes = [len(np.unique(y[p])) for p in parts]
    # share of a rank's samples in its most common class
    top = np.mean([np.bincount(y[p], minlength=10).max() / len(p) for p in parts])
    if kind == "iid":
        assert min(classes) == 10 and top < 0.15, (kind, classes, top)
    elif kind == "sorted":
        assert max(classes) <= 3 and top > 0.6, (kind, classes, top)
    else:
        assert top > 0.4, (kind, top)
    assert t.partition(y, kind, 8, seed=1)[3].tolist() == parts[3].tolist(), f"{kind} not deterministic"
PY

# Report: mean ± sample std over seeds, and the difference to global paired by seed.
$PY - "$W/runs.jsonl" <<'PY'
import json, sys
def run(seed, strat, acc):
    return dict(key=f"{seed}:sorted:{strat}:bn", seed=seed, partition="sorted", strategy=strat, norm="bn",
                ranks=8, epochs=2, train_samples=100, test_samples=10, acc=[0.5, acc], acc_mixed_bn=[0.5, acc],
                loss=[1, 1], totals=[100, 100, 100], wall_s=1,
                per_rank=[dict(ex=[dict(epoch=0, q=0.0, samples_sent=0, bytes_sent=0, exchange_s=0, overlap_s=0,
                                        blocked_s=0.001, peak_samples=13, peak_bytes=0)] * 2,
                               t_comp=[1.0, 1.0], t_set=[0, 0, 0], hist=[[1] * 10] * 3, n0=13)] * 8)
with open(sys.argv[1], "w") as f:
    for r in (run(1, "global", 0.8), run(2, "global", 0.9), run(1, "local", 0.7), run(2, "local", 0.7)):
        f.write(json.dumps(r) + "\n")
    f.write('{"torn line\n')
PY
$PY "$T" report "$W/runs.jsonl" > "$W/report" 2>&1 || fail "report: $(cat "$W/report")"
grep -q "| BN | sorted | global | 2 | 85.00 ± 7.07 |" "$W/report" || fail "global mean ± std: $(cat "$W/report")"
grep -q "| BN | sorted | local | 2 | 70.00 ± 0.00 | .* | -15.00 ± 7.07 |" "$W/report" || fail "local vs global: $(cat "$W/report")"
: > "$W/empty.jsonl"
expect_usage "no finished runs" $PY "$T" report "$W/empty.jsonl"
# A file that mixes runs of two settings (data path, augmentation) is
# refused: their accuracies are not comparable in one table. A run without
# the fields is one of the earlier study's (store items, no augmentation).
$PY - "$W/runs.jsonl" "$W/mixed.jsonl" <<'PY'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"key')]
with open(sys.argv[2], "w") as f:
    for i, r in enumerate(runs):
        if i == 0:
            r.update(face="ShuffledDataset", augment="crop-flip")
        f.write(json.dumps(r) + "\n")
PY
expect_usage "mixes runs of data paths and augmentations" $PY "$T" report "$W/mixed.jsonl"
$PY - "$W/runs.jsonl" "$W/aug.jsonl" <<'PY'
import json, sys
with open(sys.argv[2], "w") as f:
    for l in open(sys.argv[1]):
        if l.startswith('{"key'):
            r = json.loads(l)
            r.update(face="ShuffledDataset", augment="crop-flip", batch=32, workers=1)
            f.write(json.dumps(r) + "\n")
PY
$PY "$T" report "$W/aug.jsonl" --md "$W/aug.md" > /dev/null 2>&1 || fail "report of the augmented runs"
grep -q "^Data path: .ShuffledDataset. over the user's own map-style Dataset.*augmentation: random crop" "$W/aug.md" \
  || fail "the report does not name its setting: $(head -3 "$W/aug.md")"
grep -q "^- BN, sorted, global: seeds 1, 2$" "$W/aug.md" || fail "the report does not list its runs: $(head -12 "$W/aug.md")"

# Plan probe: bad arguments refused; the pool is round(Q*n).
P="$PS_BENCH_PLAN"
if [ -x "$P" ]; then
  expect_usage "--q" "$P" --ranks 8 --samples 100 --q 2
  expect_usage "not a non-negative integer" "$P" --ranks -3 --samples 100 --q 0.1
  "$P" --ranks 8 --samples 8000 --q 0.25 --reps 3 > "$W/plan.json" || fail "plan probe"
  $PY -c 'import json,sys; p=json.load(open(sys.argv[1])); assert p["npool"] == 250 and 0 < p["nsend"] <= 250 and p["plan_ms_median"] > 0, p' \
    "$W/plan.json" || fail "plan probe output: $(cat "$W/plan.json")"
fi

# Results page: the generated section is replaced, the prose kept.
printf 'intro\n<!-- accuracy:begin -->\nold\n<!-- accuracy:end -->\noutro\n' > "$W/page.md"
echo "new table" > "$W/section.md"
$PY "$S/bench/pshuffle_page.py" "$W/page.md" accuracy "$W/section.md" || fail "page"
[ "$(cat "$W/page.md")" = "$(printf 'intro\n<!-- accuracy:begin -->\nnew table\n<!-- accuracy:end -->\noutro')" ] \
  || fail "page: $(cat "$W/page.md")"
$PY "$S/bench/pshuffle_page.py" "$W/page.md" scale "$W/section.md" 2> "$W/err" && fail "page without markers accepted"
grep -q "no '<!-- scale:begin -->'" "$W/err" || fail "page error: $(cat "$W/err")"
echo "ok"
