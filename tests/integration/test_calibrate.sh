#!/usr/bin/env bash
# Calibration on measured mixed runs (docs/estimator.md, "Calibration"):
# hetmem optimize --refine 1 on a small stream mini-app on knl-mcdram runs
# the chosen placement in the simulator (its time equals an independent
# hetmem sim --placement run), calibrates on it (hetmem estimate
# --calibrate on the kept run fits the same overlap and mix coefficient,
# and estimates that placement at its measured time), keeps the capacity;
# hetmem validate --calibrate 1 reports the error with 0 and 1 runs; and
# bad input is refused in one line.
set -u
H="$HETMEM_BIN/hetmem"
S="$HETMEM_BUILD/miniapps/stream.sim"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
command -v jq >/dev/null || { echo "jq not installed"; exit 77; }
[ -x "$S" ] || { echo "stream.sim not built"; exit 77; }
export TMPDIR="$T"
FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
ok() { echo "ok: $*"; }
near() { # A B REL WHAT
  if awk -v a="$1" -v b="$2" -v r="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; m = (b < 0 ? -b : b) * r; exit !(a != "" && d <= m) }'; then
    ok "$4: $1 ~ $2"; else fail "$4: $1 not within $3 of $2"; fi
}
ARGS=(--n 131072 --iters 4) # four arrays of 1 MiB
cd "$T" || exit 1
for d in ddr mcdram; do
  "$H" sim -m knl-mcdram --device $d -o $d.hmt --json $d.json -- "$S" "${ARGS[@]}" >/dev/null || fail "sim --device $d"
done

# optimize --refine 1: one round, its placement run and measured.
"$H" optimize ddr.hmt mcdram.hmt --capacity mcdram=2M --refine 1 --json -o final.json > opt.json 2> opt.err \
  || fail "optimize --refine 1: $(cat opt.err)"
[ "$(jq '.refine.rounds | length' opt.json)" = 1 ] && ok "one round" || fail "rounds: $(jq -c .refine opt.json)"
pf=$(jq -r '.refine.rounds[0].placement' opt.json); tr=$(jq -r '.refine.rounds[0].trace' opt.json)
meas=$(jq -r '.refine.rounds[0].measured_s' opt.json); pred=$(jq -r '.refine.rounds[0].predicted_s' opt.json)
w=$(jq -r '.refine.overlap' opt.json)
[ -s "$pf" ] && [ -s "$tr" ] && ok "round 1's placement and run kept" || fail "round 1's files: $pf $tr"
"$H" sim -m knl-mcdram --placement "$pf" -o again.hmt -- "$S" "${ARGS[@]}" >/dev/null || fail "sim --placement"
again=$("$H" estimate ddr.hmt mcdram.hmt --placement "$pf" --calibrate "again.hmt=$pf" --json | jq -r '.calibration.runs[0].measured_s')
near "$meas" "$again" 1e-9 "the round measured its placement as hetmem sim does"
awk -v w="$w" 'BEGIN { exit !(w >= 0 && w <= 1) }' && ok "overlap $w in [0, 1]" || fail "overlap '$w'"
# The same fit from the kept run through estimate --calibrate.
"$H" estimate ddr.hmt mcdram.hmt --placement "$pf" --calibrate "$tr=$pf" --json > cal.json 2> cal.err || fail "estimate --calibrate: $(cat cal.err)"
near "$(jq -r .calibration.overlap cal.json)" "$w" 1e-9 "estimate --calibrate fits the overlap optimize did"
near "$(jq -r .calibration.mean_error_before cal.json)" "$(awk -v p="$pred" -v m="$meas" 'BEGIN { d = (p - m) / m; print d < 0 ? -d : d }')" 1e-6 "its error before is the round's"
awk -v a="$(jq -r .calibration.mean_error_after cal.json)" -v b="$(jq -r .calibration.mean_error_before cal.json)" \
  'BEGIN { exit !(a <= b + 1e-12) }' && ok "no worse after calibration" || fail "worse after calibration: $(jq -c .calibration cal.json)"
near "$(jq -r .calibration.runs[0].measured_s cal.json)" "$meas" 1e-9 "the run's measured time from its trace"
# One run: w stays 1 and the mix term fits the run exactly (a mixed
# placement has a spread), so its calibrated estimate is its measured time.
near "$(jq -r .calibration.overlap cal.json)" 1 0 "one run leaves the overlap at 1"
near "$(jq -r .calibration.mix cal.json)" "$(jq -r .refine.rounds[0].mix opt.json)" 1e-9 "estimate --calibrate fits the mix optimize did"
jq -e '.models.default.interval.spread_s > 0' cal.json >/dev/null && ok "the chosen placement has a spread" || fail "no spread: $(jq -c .models.default.interval cal.json)"
near "$(jq -r .models.default.runtime_s cal.json)" "$meas" 1e-6 "calibrated on its own run, the placement is estimated at its measured time"
near "$(jq -r .calibration.mix_cap cal.json)" "$(awk -v p="$pred" -v m="$meas" 'BEGIN { d = (m - p) / p; print d < 0 ? -d : d }')" 1e-6 "the cap is the run's relative error (of its estimate)"
# Uncalibrated, the same estimate as without --calibrate on a run that cannot tell (all on ddr).
echo '{"default": "ddr", "rules": []}' > ddr.pl.json
"$H" sim -m knl-mcdram --placement ddr.pl.json -o ddrpl.hmt -- "$S" "${ARGS[@]}" >/dev/null || fail "sim all on ddr"
a=$("$H" estimate ddr.hmt mcdram.hmt --placement "$pf" --json | jq -r .models.default.runtime_s)
b=$("$H" estimate ddr.hmt mcdram.hmt --placement "$pf" --calibrate ddrpl.hmt=ddr.pl.json --json | jq -r .models.default.runtime_s)
[ "$a" = "$b" ] && ok "a run with all data on one device leaves the model as it is ($a)" || fail "$a != $b"
# The Python binding calibrates the same: Estimator.calibrate fits the same
# mix, and the placement is then estimated at its measured time.
lib="$HETMEM_BUILD/lib/libhetmem.so"
if [ -x /usr/bin/python3 ] && [ -e "$lib" ] && ! grep -q '^HETMEM_SANITIZE:STRING=.' "$HETMEM_BUILD/CMakeCache.txt" 2>/dev/null; then
  out=$(PYTHONPATH="$HETMEM_SRC/python" HETMEM_LIB="$lib" PF="$pf" MEAS="$meas" /usr/bin/python3 - <<'PY'
import os
from hetmem.estimate import Estimator
e = Estimator(["ddr.hmt", "mcdram.hmt"])
c = e.calibrate([(os.environ["PF"], float(os.environ["MEAS"]))])
after = e.estimate(os.environ["PF"])["runtime_s"]
e.calibrate([])
print("%.17g %.17g %.17g %.17g" % (c["mix"], c["overlap"], after, e.estimate(os.environ["PF"])["runtime_s"]))
PY
)
  read -r pmix pw pafter pback <<<"$out"
  near "$pmix" "$(jq -r .calibration.mix cal.json)" 1e-9 "python: calibrate fits the same mix"
  near "$pafter" "$meas" 1e-6 "python: the calibrated estimate of the run's placement is its measured time"
  near "$pback" "$a" 1e-12 "python: calibrate([]) puts the model back"
else
  echo "skip: python binding (no /usr/bin/python3, no $lib, or a sanitized build)"
fi
# The final placement fits the capacity: objects of 1 MiB, at most 2 on mcdram.
n=$(jq '[.rules[] | select(.device == "mcdram")] | length' final.json)
[ "$n" -le 2 ] && ok "$n objects on mcdram (2 MiB)" || fail "$n objects on mcdram"
"$H" optimize ddr.hmt mcdram.hmt --capacity mcdram=2M --refine 1 > opt.txt 2>&1 && grep -q "^  refine:" opt.txt \
  && grep -qE "^ +1 +[0-9.]+ +[0-9.]+ " opt.txt && grep -q "^  returned: " opt.txt \
  && ok "human output has the round and what was returned" || fail "human output: $(cat opt.txt)"
# The placement returned (docs/optimizer.md, --refine): the best measured
# round, or the last search's unmeasured pick when its whole 95% interval
# is below that round's time. -o writes it; the predicted runtime is the
# calibrated model's estimate of it, and a measured round's is given too.
kept=$(jq -r .refine.returned.kept opt.json); k=$(jq -r .refine.returned.round opt.json)
if [ "$kept" = measured ]; then
  [ "$(jq -S . final.json)" = "$(jq -S . "$(jq -r ".refine.rounds[$k - 1].placement" opt.json)")" ] \
    && ok "-o wrote round $k's placement, the one returned" || fail "-o is not round $k's placement"
  near "$(jq -r .predicted_runtime_s opt.json)" "$(jq -r ".refine.rounds[$k - 1].calibrated_s" opt.json)" 1e-12 "the predicted runtime is the calibrated model's estimate of round $k's placement"
  near "$(jq -r .refine.returned.measured_s opt.json)" "$(jq -r ".refine.rounds[$k - 1].measured_s" opt.json)" 1e-12 "its measured time is given"
  near "$(jq -r .refine.returned.predicted_before_run_s opt.json)" "$(jq -r ".refine.rounds[$k - 1].predicted_s" opt.json)" 1e-12 "and its prediction before the run"
elif [ "$kept" = search ]; then
  jq -e '.refine.last_search.round == null and .refine.last_search.ci_s[1] < ([.refine.rounds[].measured_s] | min)' opt.json >/dev/null \
    && ok "the unmeasured pick returned lies below every measured round" || fail "search kept: $(jq -c .refine opt.json)"
else
  fail "refine.returned: $(jq -c .refine.returned opt.json)"
fi

# validate --calibrate 1: rows for 0 and 1 runs.
"$H" validate -m knl-mcdram --placements 2 --calibrate 1 -j 2 --json v.json -- "$S" "${ARGS[@]}" > v.txt 2> v.err \
  || fail "validate --calibrate: $(cat v.err)"
[ "$(jq '.calibration.default | length' v.json)" = 2 ] && [ "$(jq '.calibration.runs | length' v.json)" = 1 ] \
  && ok "validate: error with 0 and 1 calibration runs" || fail "validate json: $(jq -c .calibration v.json)"
near "$(jq -r '.calibration.default[0].mean_abs_err_pct' v.json)" "$(jq -r .summary.default.mean_abs_err_pct v.json)" 1e-9 "validate: 0 runs is the uncalibrated error"
[ "$(jq -r '.calibration.default[0].mix' v.json)" = 0 ] && jq -e '.calibration.default[1].mix | type == "number"' v.json >/dev/null \
  && ok "validate: the mix coefficient per number of runs (0 without)" || fail "validate mix: $(jq -c .calibration.default v.json)"
jq -e '[.rows[].placement] | index(input.calibration.runs[0].placement) == null' v.json v.json >/dev/null \
  && ok "validate: the calibration run is not a scored placement" || fail "validate: calibration run among the scored"

# Bad input: one line, exit 2 (usage) or 1 (runtime).
bad() { # EXPECTED_RC PATTERN ARGS...
  local want=$1 pat=$2; shift 2
  local out rc
  out=$("$H" "$@" 2>&1 >/dev/null); rc=$?
  if [ "$rc" = "$want" ] && [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && [[ "$out" == *"$pat"* ]]; then ok "refused: $pat"
  else fail "expected exit $want and one line with '$pat', got $rc: $out"; fi
}
"$H" estimate ddr.hmt mcdram.hmt --placement "$pf" --save-summary sum.json >/dev/null
bad 2 "--refine: '0' is not an integer from 1 to 100" optimize ddr.hmt mcdram.hmt --capacity mcdram=2M --refine 0
bad 2 "needs the traces" optimize --summary sum.json --capacity mcdram=2M --refine 1
bad 1 "TRACE=PLACEMENT" estimate ddr.hmt mcdram.hmt --placement "$pf" --calibrate "$tr"
bad 1 "$pf.nope" estimate ddr.hmt mcdram.hmt --placement "$pf" --calibrate "$tr=$pf.nope"
"$H" sim -m knl-mcdram --placement "$pf" -o other.hmt -- "$S" --n 65536 --iters 4 >/dev/null || fail "sim of another command"
bad 1 "not a run of the device traces' command" estimate ddr.hmt mcdram.hmt --placement "$pf" --calibrate "other.hmt=$pf"
bad 2 "--calibrate: '0' is not an integer from 1 to 100" validate -m knl-mcdram --calibrate 0 -- "$S"

[ $FAILS = 0 ] && echo "all passed" && exit 0
echo "$FAILS failed"
exit 1
