#!/usr/bin/env bash
# hetmem optimize on hand-written estimator summaries: every algorithm,
# --json fields, capacities, reproducibility, placement files that the
# estimator accepts, and one-line refusals of bad input.
set -u
H="$HETMEM_BIN/hetmem"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
command -v jq >/dev/null || { echo "jq not installed"; exit 77; }
FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
ok() { echo "ok: $*"; }

# summary N FILE: N objects, each alone in its own window; object i is
# (i % 5 + 1) MiB and saves (7 * i % 11 + 1) ms of 20 ms on "hbm".
summary() {
  awk -v n="$1" 'BEGIN {
    printf "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0, \"core_ghz\": 1, \"devices\": [";
    printf "{\"name\": \"ddr\", \"runtime_ns\": %d, \"period\": 1000, \"capacity\": 17179869184, \"bandwidth_gbs\": 5, \"read_latency_ns\": 130},", n * 20e6;
    fast = 0; for (i = 0; i < n; i++) fast += 20e6 - (7 * i % 11 + 1) * 1e6;
    printf "{\"name\": \"hbm\", \"runtime_ns\": %d, \"period\": 1000, \"capacity\": 268435456, \"bandwidth_gbs\": 20, \"read_latency_ns\": 150}],", fast;
    printf "\"phases\": [\"(no phase)\"], \"objects\": [";
    for (i = 0; i < n; i++) printf "%s{\"site\": \"0x%x\", \"name\": \"o%d\", \"size\": %d, \"allocations\": 1}", i ? ", " : "", 4096 + i, i, (i % 5 + 1) * 1048576;
    printf "], \"windows\": [";
    for (i = 0; i < n; i++) printf "%s{\"phase\": 0, \"instructions\": 1000000, \"t_ns\": [20000000, %d], \"stats\": [[%d, 0, 1000, 180000, 1000], [%d, 1, 1000, 210000, 1000]]}", i ? ", " : "", 20e6 - (7 * i % 11 + 1) * 1e6, i, i;
    printf "]}\n" }' > "$2"
}
summary 10 "$T/s10.json"
summary 30 "$T/s30.json"

declare -A rt
for a in exhaustive greedy anneal random rl; do
  if ! "$H" optimize --summary "$T/s10.json" --capacity hbm=8M --model linear --algo "$a" --budget 4000 \
      --json -o "$T/p.$a.json" > "$T/$a.json" 2> "$T/err"; then
    fail "$a: exit $? ($(cat "$T/err"))"; continue
  fi
  [ "$(jq -r .algo "$T/$a.json")" = "$a" ] && ok "$a: algo field" || fail "$a: algo field"
  jq -e '(.ci_s | length == 2) and .ci_s[0] <= .predicted_runtime_s and .predicted_runtime_s <= .ci_s[1]
         and .estimator_calls > 0 and .wall_s >= 0 and (.placement.default == "ddr")' "$T/$a.json" >/dev/null \
    && ok "$a: json fields" || fail "$a: json fields: $(head -c 400 "$T/$a.json")"
  jq -e '.placement == input' "$T/$a.json" "$T/p.$a.json" >/dev/null && ok "$a: -o file is the placement" \
    || fail "$a: -o file differs from the json placement"
  # capacity: object i of the summary is (i % 5 + 1) MiB
  used=$(jq '[.placement.rules[] | select(.device == "hbm") | .name[1:] | tonumber | (. % 5 + 1)] | add // 0' "$T/$a.json")
  [ "$used" -le 8 ] && ok "$a: $used MiB on hbm <= 8" || fail "$a: $used MiB on hbm > 8"
  # the estimator accepts the file and agrees on its runtime
  est=$("$H" estimate --summary "$T/s10.json" --model linear --placement "$T/p.$a.json" --json 2>"$T/err" | jq -r '.. | .runtime_s? // empty' | head -1)
  pred=$(jq -r .predicted_runtime_s "$T/$a.json")
  awk -v a="$est" -v b="$pred" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-6 * b) }' \
    && ok "$a: hetmem estimate gives $est s" || fail "$a: hetmem estimate gives '$est', optimize predicted $pred ($(cat "$T/err"))"
  rt[$a]=$pred
done
for a in greedy anneal random rl; do
  awk -v o="${rt[exhaustive]:-0}" -v x="${rt[$a]:-0}" 'BEGIN { exit !(o > 0 && o <= x * (1 + 1e-9)) }' \
    && ok "exhaustive ${rt[exhaustive]:-?} <= $a ${rt[$a]:-?}" || fail "exhaustive ${rt[exhaustive]:-?} > $a ${rt[$a]:-?}"
done

# the same seed gives the same placement
"$H" optimize --summary "$T/s30.json" --capacity hbm=20M --seed 9 --budget 3000 -o "$T/r1.json" >/dev/null
"$H" optimize --summary "$T/s30.json" --capacity hbm=20M --seed 9 --budget 3000 -o "$T/r2.json" >/dev/null
cmp -s "$T/r1.json" "$T/r2.json" && ok "rl: same seed, same placement" || fail "rl: same seed, different placements"

# --phases: two objects, each hot in one phase, room for one: the phased
# placement moves them at the boundary and beats every static one
cat > "$T/ph.json" <<'J'
{"format": "hetmem-estimate-summary", "version": 1, "default": 0, "core_ghz": 1,
 "devices": [{"name": "ddr", "runtime_ns": 82000000, "period": 1000, "capacity": 17179869184, "bandwidth_gbs": 5, "read_latency_ns": 130},
             {"name": "hbm", "runtime_ns": 22000000, "period": 1000, "capacity": 268435456, "bandwidth_gbs": 20, "read_latency_ns": 150}],
 "phases": ["(no phase)", "one", "two"],
 "objects": [{"site": "0x1000", "name": "x", "size": 1048576, "allocations": 1},
             {"site": "0x1001", "name": "y", "size": 1048576, "allocations": 1}],
 "windows": [{"phase": 1, "instructions": 1000000, "t_ns": [40000000, 10000000], "stats": [[0, 0, 1000, 180000, 1000], [0, 1, 1000, 210000, 1000]]},
             {"phase": 1, "instructions": 1000000, "t_ns": [1000000, 1000000], "stats": [[1, 0, 10, 1800, 10], [1, 1, 10, 2100, 10]]},
             {"phase": 2, "instructions": 1000000, "t_ns": [40000000, 10000000], "stats": [[1, 0, 1000, 180000, 1000], [1, 1, 1000, 210000, 1000]]},
             {"phase": 2, "instructions": 1000000, "t_ns": [1000000, 1000000], "stats": [[0, 0, 10, 1800, 10], [0, 1, 10, 2100, 10]]}]}
J
"$H" optimize --summary "$T/ph.json" --capacity hbm=1M --model linear --algo exhaustive --json > "$T/st.json" 2>"$T/err" || fail "static: $(cat "$T/err")"
"$H" optimize --summary "$T/ph.json" --capacity hbm=1M --model linear --algo rl --phases --json -o "$T/ph.place.json" > "$T/ph.out.json" 2>"$T/err" \
  || fail "phased: $(cat "$T/err")"
jq -e '.phased == true and .migration_s > 0 and (.placement.phases | length) >= 1' "$T/ph.out.json" >/dev/null \
  && ok "phased: per-phase rules with migration" || fail "phased: $(head -c 400 "$T/ph.out.json")"
awk -v p="$(jq -r .predicted_runtime_s "$T/ph.out.json")" -v s="$(jq -r .predicted_runtime_s "$T/st.json")" 'BEGIN { exit !(p < s) }' \
  && ok "phased beats the static optimum" || fail "phased $(jq -r .predicted_runtime_s "$T/ph.out.json") >= static $(jq -r .predicted_runtime_s "$T/st.json")"

# the per-phase file means what the search meant: the estimator agrees
est=$("$H" estimate --summary "$T/ph.json" --model linear --placement "$T/ph.place.json" --json 2>"$T/err" | jq -r '.. | .runtime_s? // empty' | head -1)
awk -v a="$est" -v b="$(jq -r .predicted_runtime_s "$T/ph.out.json")" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-6 * b) }' \
  && ok "phased: hetmem estimate agrees ($est s)" || fail "phased: hetmem estimate gives '$est' ($(cat "$T/err"))"

# human output: the comparison lines
"$H" optimize --summary "$T/s10.json" --capacity hbm=8M --algo greedy > "$T/human" 2>&1
for w in "predicted runtime" "all in ddr (default)" "first touch" "gap closed"; do
  grep -q "$w" "$T/human" && ok "human output: $w" || fail "human output lacks '$w'"
done

# gap closed is measured against references found without the result:
# the better of greedy and first touch (first touch alone for greedy). On
# s10 at 8M the exhaustive optimum beats greedy, so it closes more than 100%
# of that gap (counting the result among the references gave 100.0%).
"$H" optimize --summary "$T/s10.json" --capacity hbm=8M --model linear --algo exhaustive --json > "$T/gx.json"
jq -e '.predicted_runtime_s < .references.greedy_s and .gap_closed > 1.0001 and
       ((.gap_closed - (.references.all_slowest_s - .predicted_runtime_s) /
         (.references.all_slowest_s - ([.references.greedy_s, .references.first_touch_s] | min))) | fabs) < 1e-9' \
  "$T/gx.json" >/dev/null && ok "exhaustive: gap closed $(jq .gap_closed "$T/gx.json") of all-slowest -> better of greedy, first touch" \
  || fail "exhaustive: gap closed against the wrong reference: $(jq -c '[.predicted_runtime_s, .references, .gap_closed]' "$T/gx.json")"
"$H" optimize --summary "$T/s10.json" --capacity hbm=8M --model linear --algo greedy --json > "$T/gg.json"
jq -e '((.gap_closed - (.references.all_slowest_s - .predicted_runtime_s) /
         (.references.all_slowest_s - .references.first_touch_s)) | fabs) < 1e-9 and .gap_closed > 1.0001' \
  "$T/gg.json" >/dev/null && ok "greedy: gap closed $(jq .gap_closed "$T/gg.json") of all-slowest -> first touch" \
  || fail "greedy: gap closed against the wrong reference: $(jq -c '[.predicted_runtime_s, .references, .gap_closed]' "$T/gg.json")"
"$H" optimize --summary "$T/s10.json" --capacity hbm=8M --model linear --algo exhaustive > "$T/gx.txt"
grep -q "gap closed .*107.4% of all-slowest -> best of greedy and first touch" "$T/gx.txt" \
  && ok "human output: $(grep 'gap closed' "$T/gx.txt" | sed 's/  */ /g')" || fail "human output: $(grep 'gap closed' "$T/gx.txt")"

# --pick upper: of the search's placement and greedy's, the one whose 95%
# interval ends lower. Three objects, each alone in its window (linear
# model: an object's gain is its window's ddr - hbm time, its variance
# gain^2 / its sampled misses): a 5 MiB saving 10 ms (10000 misses), and two
# of 4 MiB saving 7 ms each (4 misses each, or 10000 in the second file).
# With 8 MiB of hbm, greedy takes a (its best gain per byte; b no longer
# fits): 60 - 10 = 50 ms, +- 1.96 x 10 / sqrt(10000) = 0.196 ms. The search
# (exhaustive) takes b and c: 60 - 14 = 46 ms, +- 1.96 x sqrt(2 x 7^2 / 4)
# = 9.70 ms with 4 misses each (up to 55.70 ms: greedy's ends lower), or
# +- 1.96 x sqrt(2 x 0.07^2) = 0.194 ms with 10000 (up to 46.19 ms: the
# search's does).
pick_summary() {
  cat > "$2" <<J
{"format": "hetmem-estimate-summary", "version": 1, "default": 0, "core_ghz": 1,
 "devices": [{"name": "ddr", "runtime_ns": 60000000, "period": 1000, "capacity": 17179869184, "bandwidth_gbs": 5, "read_latency_ns": 130},
             {"name": "hbm", "runtime_ns": 36000000, "period": 1000, "capacity": 268435456, "bandwidth_gbs": 20, "read_latency_ns": 150}],
 "phases": ["(no phase)"],
 "objects": [{"site": "0xa", "name": "a", "size": 5242880, "allocations": 1},
             {"site": "0xb", "name": "b", "size": 4194304, "allocations": 1},
             {"site": "0xc", "name": "c", "size": 4194304, "allocations": 1}],
 "windows": [{"phase": 0, "instructions": 1000000, "t_ns": [20000000, 10000000], "stats": [[0, 0, 10000, 1800000, 10000], [0, 1, 10000, 2100000, 10000]]},
             {"phase": 0, "instructions": 1000000, "t_ns": [20000000, 13000000], "stats": [[1, 0, $1, 720, $1], [1, 1, $1, 840, $1]]},
             {"phase": 0, "instructions": 1000000, "t_ns": [20000000, 13000000], "stats": [[2, 0, $1, 720, $1], [2, 1, $1, 840, $1]]}]}
J
}
pick_summary 4 "$T/pick4.json"
pick_summary 10000 "$T/pick10k.json"
pick() { "$H" optimize --summary "$1" --capacity hbm=8M --model linear --algo exhaustive "${@:2}" --json 2>"$T/err"; }
pick "$T/pick4.json" | jq -e '([.placement.rules[].name] | sort) == ["b", "c"] and (.predicted_runtime_s - 0.046 | fabs) < 1e-9
  and has("pick") | not' >/dev/null && ok "pick: by default the search's placement (b, c: 46 ms)"   || fail "pick: default: $(pick "$T/pick4.json" | head -c 300) $(cat "$T/err")"
pick "$T/pick4.json" --pick upper | jq -e '[.placement.rules[].name] == ["a"] and (.predicted_runtime_s - 0.05 | fabs) < 1e-9
  and .pick.picked == "greedy" and (.pick.search_s - 0.046 | fabs) < 1e-9 and (.pick.search_ci_s[1] - 0.0557015 | fabs) < 1e-6
  and (.pick.greedy_ci_s[1] - 0.050196 | fabs) < 1e-6 and (.references.greedy_s - 0.05 | fabs) < 1e-9' >/dev/null \
  && ok "pick upper: greedy's placement (a: 50 ms, up to 50.196 ms, below the search's 55.70 ms)" \
  || fail "pick upper: $(pick "$T/pick4.json" --pick upper | head -c 600) $(cat "$T/err")"
pick "$T/pick10k.json" --pick upper | jq -e '([.placement.rules[].name] | sort) == ["b", "c"] and .pick.picked == "search"
  and ((.pick.search_ci_s[1] - 0.046194) | fabs) < 1e-6' >/dev/null \
  && ok "pick upper: the search's placement where its interval ends lower (46.194 ms)" \
  || fail "pick upper, 10000 misses: $(pick "$T/pick10k.json" --pick upper | head -c 600) $(cat "$T/err")"
"$H" optimize --summary "$T/pick4.json" --capacity hbm=8M --model linear --algo exhaustive --pick upper > "$T/pick.txt" 2>&1
grep -q "greedy's placement: its 95% interval ends at 0.050196 s, below exhaustive's 0.055702 s" "$T/pick.txt" \
  && ok "pick upper: the table says which and why" || fail "pick upper table: $(cat "$T/pick.txt")"

# expect RC PATTERN ARGS...: exit status and one stderr line, nothing else
expect() {
  local rc=$1 pat=$2; shift 2
  "$H" optimize "$@" >"$T/out" 2>"$T/err"
  local got=$?
  if [ $got != "$rc" ]; then fail "optimize $* -> exit $got, want $rc ($(head -c 300 "$T/err"))"; return; fi
  if [ "$(wc -l < "$T/err")" != 1 ] || ! grep -q -- "$pat" "$T/err"; then
    fail "optimize $* -> stderr: $(cat "$T/err")"; return
  fi
  [ -s "$T/out" ] && { fail "optimize $* -> wrote to stdout"; return; }
  ok "$(cat "$T/err")"
}
S="$T/s10.json"
expect 1 "larger than the device" --summary "$S" --capacity hbm=1G
expect 1 "unknown memory device" --summary "$S" --capacity mcdram=1G
expect 2 "budget" --summary "$S" --capacity hbm=8M --budget 0
expect 2 "unknown algorithm 'dqn'" --summary "$S" --capacity hbm=8M --algo dqn
expect 1 "exhaustive search over 30 movable objects is refused" --summary "$T/s30.json" --capacity hbm=8M --algo exhaustive
expect 2 "capacity DEV=SIZE is required" --summary "$S"
expect 2 "expected DEV=SIZE" --summary "$S" --capacity hbm
expect 2 "time" --summary "$S" --capacity hbm=8M --time -1
expect 2 "at least 2" "$S" --capacity hbm=8M
expect 1 "nosuch.json" --summary "$T/nosuch.json" --capacity hbm=8M
expect 1 "hold the footprint" --summary "$S" --capacity ddr=1M --capacity hbm=8M
expect 2 "need --algo rl" --summary "$S" --capacity hbm=8M --algo greedy --policy "$T/x"
expect 2 "expected estimate or upper, got 'lowest'" --summary "$S" --capacity hbm=8M --pick lowest
expect 2 "--refine returns a measured round" "$T/a.hmt" "$T/b.hmt" --capacity hbm=8M --pick upper --refine 1
# Two objects of 8388608T (2^63 bytes each) used to wrap to 0 bytes and be
# placed on a 256 MiB device.
jq '.objects[0].size = "8388608T" | .objects[1].size = "8388608T"' "$S" > "$T/huge.json"
expect 1 "sizes add up past 64 PiB" --summary "$T/huge.json" --capacity hbm=8M
echo "hetmem-rl-policy 1 2 2" > "$T/bad.policy"
expect 1 "bad.policy" --summary "$S" --capacity hbm=8M --policy "$T/bad.policy"
[ $FAILS = 0 ] && echo "all passed" && exit 0
echo "$FAILS failed"; exit 1
