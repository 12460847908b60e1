#!/usr/bin/env bash
# Same program, same input: bit-identical JSON report and sampled trace.
source "$(dirname "$0")/sim_lib.sh"
echo '{"default": "slow", "rules": [{"name": "chain", "pages_percent": 30, "device": "fast"}]}' > "$T/p.json"
for i in 1 2; do
  "$H" sim -m "$M" --placement "$T/p.json" -o "$T/t$i.trace" --sample-period 97 --json "$T/j$i.json" \
    -- "$K/chase.sim" 4194304 50000 > "$T/o$i.txt" || fail "run $i failed"
done
cmp -s "$T/j1.json" "$T/j2.json" && ok "JSON reports identical" || fail "JSON reports differ"
cmp -s "$T/t1.trace" "$T/t2.trace" && ok "traces identical ($(stat -c %s "$T/t1.trace") bytes)" || fail "traces differ"
cmp -s "$T/o1.txt" "$T/o2.txt" && ok "summaries identical" || fail "summaries differ"
[ -s "$T/t1.trace" ] || fail "empty trace"
done_tests
