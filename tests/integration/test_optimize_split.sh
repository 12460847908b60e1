#!/usr/bin/env bash
# Page splits chosen for bandwidth (docs/optimizer.md, "Page splits"): on
# the cxl preset a small stream is bound by DDR's channels; with --split the
# search puts part of each array's pages on CXL, and that placement
# simulates faster than the best whole-object placement (all on DDR),
# within a few percent of its prediction; --phases splits too; the file
# is one hetmem sim, hetmem estimate and hetmem run accept; bad split
# options are refused in one line.
set -u
H="$HETMEM_BIN/hetmem"
S="$HETMEM_BUILD/miniapps/stream.sim"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
command -v jq >/dev/null || { echo "jq not installed"; exit 77; }
[ -x "$S" ] || { echo "stream.sim not built"; exit 77; }
FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
ok() { echo "ok: $*"; }
lt() { # A B WHAT: A < B
  if awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && b != "" && a < b) }'; then ok "$3: $1 < $2"; else fail "$3: $1 >= $2"; fi
}
near() { # A B REL WHAT
  if awk -v a="$1" -v b="$2" -v r="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; m = (b < 0 ? -b : b) * r; exit !(a != "" && d <= m) }'; then
    ok "$4: $1 ~ $2"; else fail "$4: $1 not within $3 of $2"; fi
}
ARGS=(--n 131072 --iters 4) # four arrays of 1 MiB
cd "$T" || exit 1
for d in ddr cxl; do
  "$H" sim -m cxl --device $d -o $d.hmt --json $d.json -- "$S" "${ARGS[@]}" >/dev/null || fail "sim --device $d"
done
tddr=$(jq .runtime_s ddr.json); tcxl=$(jq .runtime_s cxl.json)

# simopt NAME OPTIONS...: optimizes, simulates the pick; sets pred and meas.
simopt() {
  local n=$1; shift
  if ! "$H" optimize ddr.hmt cxl.hmt --capacity ddr=1G "$@" --json -o $n.pl.json > $n.json 2> $n.err; then
    fail "optimize $*: $(cat $n.err)"; pred=; meas=; return
  fi
  "$H" sim -m cxl --placement $n.pl.json --json $n.sim.json -- "$S" "${ARGS[@]}" >/dev/null 2> $n.serr \
    || fail "sim --placement $n: $(cat $n.serr)"
  pred=$(jq .predicted_runtime_s $n.json); meas=$(jq .runtime_s $n.sim.json)
  echo "  $n: predicted $pred s, simulated $meas s: $(jq -c .placement.rules $n.json)"
}

# The best whole-object placement by the model (exhaustive): all on DDR or
# one array moved, within a few percent of its simulation. The splits
# below must beat the faster of it and all on DDR.
simopt whole --algo exhaustive
near "$pred" "$meas" 0.05 "whole objects: predicted vs simulated"
wmeas=$(awk -v a="$meas" -v b="$tddr" 'BEGIN { print (a < b ? a : b) }')
for a in exhaustive anneal; do
  simopt split-$a --algo $a --split --budget 3000
  [ "$(jq '[.placement.rules[] | select(.pages_percent != null and .pages_percent < 100)] | length' split-$a.json)" -gt 0 ] \
    && ok "$a --split: a pages_percent rule" || fail "$a --split: no split in $(jq -c .placement split-$a.json)"
  lt "$pred" "$tddr" "$a --split: predicted faster than all on DDR"
  lt "$meas" "$(awk -v w="$wmeas" 'BEGIN { print 0.97 * w }')" "$a --split: simulated 3% faster than the whole-object pick"
  near "$pred" "$meas" 0.05 "$a --split: predicted vs simulated"
  est=$("$H" estimate ddr.hmt cxl.hmt --placement split-$a.pl.json --json | jq -r '.models.default.runtime_s')
  near "$est" "$pred" 1e-6 "$a --split: hetmem estimate of the file"
done

# --phases splits: the file holds its phases, and the pick beats whole objects.
simopt phases --algo greedy --phases --split
jq -e '.phases | type == "object"' phases.pl.json >/dev/null && ok "--phases --split: phases in the file" \
  || fail "--phases --split: no phases in $(cat phases.pl.json)"
lt "$meas" "$(awk -v w="$wmeas" 'BEGIN { print 0.97 * w }')" "--phases --split: simulated 3% faster than the whole-object pick"

# hetmem run takes the same file (devices renamed to this machine's node 0):
# every rule matches an array of a native build, made here without the
# build's sanitizers (the preload and ASan both want to own malloc).
N="$T/stream"
if cc -O2 -I"$HETMEM_SRC/include" -o "$N" "$HETMEM_SRC/miniapps/stream/stream.c" "$HETMEM_SRC/miniapps/common/miniapp.c" -lm 2> cc.err; then
  jq '(.rules[].device) = "0" | .default = "0"' split-exhaustive.pl.json > run.json
  if "$H" run --strict --placement run.json --report run.rep.json -- "$N" "${ARGS[@]}" > run.out 2> run.err; then
    [ "$(jq '.unmatched_rules | length' run.rep.json)" = 0 ] && grep -q PASSED run.out \
      && ok "hetmem run: the split placement binds, every rule matched" || fail "hetmem run: $(jq -c .unmatched_rules run.rep.json)"
  else
    fail "hetmem run --placement: $(cat run.err)"
  fi
else
  fail "cc stream.c: $(cat cc.err)"
fi

# Without --split nothing changes; bad split steps are refused in one line.
"$H" optimize ddr.hmt cxl.hmt --capacity ddr=1G --algo anneal --budget 3000 -o a1.json >/dev/null 2>&1
"$H" optimize ddr.hmt cxl.hmt --capacity ddr=1G --algo anneal --budget 3000 -o a2.json >/dev/null 2>&1
cmp -s a1.json a2.json && ! grep -q pages_percent a1.json && ok "no --split: whole objects" || fail "no --split: $(cat a1.json)"
for st in 0 101 x; do
  "$H" optimize ddr.hmt cxl.hmt --capacity ddr=1G --split-step $st > /dev/null 2> bad.err
  rc=$?
  [ $rc = 2 ] && [ "$(wc -l < bad.err)" = 1 ] && grep -q "^hetmem: optimize: --split-step" bad.err \
    && ok "--split-step $st refused: $(cat bad.err)" || fail "--split-step $st: exit $rc, '$(cat bad.err)'"
done

[ $FAILS = 0 ] && echo "all passed" && exit 0
echo "$FAILS failed"
exit 1
