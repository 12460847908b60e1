#!/usr/bin/env bash
# hetmem.gym.PlacementEnv (Python, over libhetmem.so): pytest on synthetic
# summaries with known runtimes (python/tests), then the PyTorch DQN example
# in its smoke mode, which must reach a feasible placement no slower than
# all-on-fallback. Debian's torch belongs to /usr/bin/python3.
set -u
PY=${HETMEM_PYTHON:-/usr/bin/python3}
lib="$HETMEM_BUILD/lib/libhetmem.so"
[ -e "$lib" ] || { echo "FAIL: $lib not built"; exit 1; }
if grep -q '^HETMEM_SANITIZE:STRING=.' "$HETMEM_BUILD/CMakeCache.txt" 2>/dev/null; then
  echo "skip: a sanitized libhetmem cannot be loaded into an uninstrumented Python"; exit 77
fi
"$PY" -c "import pytest, numpy" 2>/dev/null || { echo "skip: $PY lacks pytest or numpy (python3-pytest python3-numpy)"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
# As from a clone, with no settings: python/tests/conftest.py and the example
# put python/ on the path, and the package finds build/lib by itself. Only a
# build folder other than the source tree's build/ is named.
unset PYTHONPATH HETMEM_LIB
export PYTHONDONTWRITEBYTECODE=1
if [ "$(cd "$HETMEM_BUILD" && pwd -P)" != "$(cd "$HETMEM_SRC" && pwd -P)/build" ]; then
  export HETMEM_LIB="$lib"
fi
# The timeouts are hang guards under ctest's own (600 s), not speed checks:
# torch jobs take up to 30 times their CPU time on a loaded 2-core machine.
(cd "$T" && timeout 250 "$PY" -m pytest -q -p no:cacheprovider "$HETMEM_SRC/python/tests") || { echo "FAIL: pytest"; exit 1; }

if ! "$PY" -c "import torch" 2>/dev/null; then
  echo "skip: DQN example ($PY lacks torch: python3-torch)"; exit 0
fi
(cd "$HETMEM_SRC/python/tests" && "$PY" -c 'import synth; print(synth.summary(synth.instance(10, 3, 42)))') > "$T/s.json" || { echo "FAIL: synthetic summary"; exit 1; }
foot=$(jq '[.objects[].size] | add' "$T/s.json")
mid_cap=$(awk -v t="$foot" 'BEGIN { printf "%d", int(0.30 * t) }')
fast_cap=$(awk -v t="$foot" 'BEGIN { printf "%d", int(0.15 * t) }')
timeout 250 "$PY" "$HETMEM_SRC/python/examples/dqn_placement.py" --summary "$T/s.json" --model linear \
  --capacity mid=$mid_cap --capacity fast=$fast_cap --smoke --json > "$T/out.json" || { echo "FAIL: dqn example"; exit 1; }
fails=0
check() { if jq -e "$1" "$T/out.json" >/dev/null; then echo "ok: $2"; else echo "FAIL: $2: $(jq -c "$3" "$T/out.json")"; fails=$((fails + 1)); fi; }
check '.episodes == 20 and .units == 10' "smoke run of 20 episodes over 10 units" '{episodes, units}'
check '.dqn_policy_s <= .all_fallback_s * (1 + 1e-12)' "learnt policy no slower than all on the fallback" '{dqn_policy_s, all_fallback_s}'
check '.exhaustive_s <= .greedy_s * (1 + 1e-12) and .exhaustive_s <= .dqn_best_episode_s * (1 + 1e-12)' \
  "exhaustive is the optimum of the comparison" '{exhaustive_s, greedy_s, dqn_best_episode_s}'
# the placement it wrote stays within the capacities (sizes from the summary)
jq --argjson s "$(cat "$T/s.json")" '[.placement.rules[] | .name as $n | {d: .device, b: ($s.objects[] | select(.name == $n) | .size)}]
  | group_by(.d) | map({(.[0].d): (map(.b) | add)}) | add // {}' "$T/out.json" > "$T/used.json"
mid=$(jq '.mid // 0' "$T/used.json"); fast=$(jq '.fast // 0' "$T/used.json")
if awk -v m="$mid" -v f="$fast" -v t="$foot" 'BEGIN { exit !(m <= int(0.30 * t) && f <= int(0.15 * t)) }'; then
  echo "ok: placement within capacities (mid $mid, fast $fast of $foot)"
else
  echo "FAIL: placement over capacity (mid $mid, fast $fast of $foot)"; fails=$((fails + 1))
fi
"$PY" "$HETMEM_SRC/python/examples/dqn_placement.py" --summary "$T/s.json" --capacity nosuch=1M --smoke 2> "$T/err" && fails=$((fails + 1))
grep -q "^dqn_placement: .*not a device" "$T/err" && echo "ok: unknown device refused in one line" || { echo "FAIL: $(cat "$T/err")"; fails=$((fails + 1)); }
# Capacities as the CLI takes them: no percentages, no unitless size below a page.
for bad in "mid=25%:a percentage is not a size" "mid=64:64 bytes is smaller than a page; did you mean 64M?"; do
  "$PY" "$HETMEM_SRC/python/examples/dqn_placement.py" --summary "$T/s.json" --capacity "${bad%%:*}" --smoke 2> "$T/err" &&
    { echo "FAIL: --capacity ${bad%%:*} accepted"; fails=$((fails + 1)); continue; }
  grep -qF "${bad#*:}" "$T/err" && echo "ok: --capacity ${bad%%:*} refused" ||
    { echo "FAIL: --capacity ${bad%%:*}: $(cat "$T/err")"; fails=$((fails + 1)); }
done
[ $fails = 0 ] && echo "all passed" && exit 0
exit 1
