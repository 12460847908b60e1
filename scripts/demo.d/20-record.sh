#!/usr/bin/env bash
# Demo stage: what this machine offers, a soft-sampled trace of a mini-app
# with its data bound to node 0, and the same app run under a placement.
set -euo pipefail
w="$DEMO_WORK/record"
mkdir -p "$w"
app="$HETMEM_BUILD/miniapps/stream"
[ -x "$app" ] || app="$HETMEM_BUILD/miniapps/cg"
hetmem doctor | sed -n '1,3p;/^sampling/,/auto ->/p'
echo
hetmem record -b soft -F 1000 --bind 0 -o "$w/stream.node0.hmt" -- "$app" --size tiny 2> "$w/record.err" > /dev/null
cat "$w/record.err"
cat > "$w/place.json" <<'J'
{ "default": "node0", "rules": [ {"min_size": "1M", "device": "0"} ] }
J
hetmem run --placement "$w/place.json" --report "$w/report.json" -- "$app" --size tiny > /dev/null 2> "$w/run.err"
cat "$w/run.err"
auto=$(hetmem doctor --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["auto"])')
summary=$(sed -n 's/.*: \([0-9]* samples ([0-9.]*% with an address[^)]*)\).*/\1/p' "$w/record.err")
echo "record: doctor picks '$auto'; soft-sampled stream bound to node 0: $summary" >> "$DEMO_SUMMARY"
echo "run: $(sed -n 's/^hetmem: run: //p' "$w/run.err")" >> "$DEMO_SUMMARY"
