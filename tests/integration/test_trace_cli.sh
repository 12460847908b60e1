#!/usr/bin/env bash
# hetmem trace info|dump|objects on a crafted valid trace and on every
# damaged variant: right output, exit codes, one-line errors, no hangs.
set -u
hetmem="$HETMEM_BIN/hetmem"
corpus="$HETMEM_BUILD/tests/trace_corpus"
[ -x "$corpus" ] || { echo "missing $corpus (build the tests)"; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/hm-trace-cli.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$corpus" "$work" || { echo "trace_corpus failed"; exit 1; }
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect CODE CMD...: exit code, and for errors exactly one stderr line
# starting with "hetmem: ".
expect() {
  local want=$1; shift
  timeout 20 "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  [ "$rc" -eq "$want" ] || { fail "$* -> exit $rc, want $want: $(head -c 300 "$work/err")"; return; }
  if [ "$want" -ne 0 ]; then
    local n; n=$(wc -l <"$work/err")
    [ "$n" -eq 1 ] || fail "$* -> $n stderr lines, want 1: $(cat "$work/err")"
    grep -q '^hetmem: ' "$work/err" || fail "$* -> stderr does not start with 'hetmem: ': $(cat "$work/err")"
  fi
}

good="$work/good.hmt"
# --- valid trace
expect 0 "$hetmem" trace info "$good"
grep -q '^samples *120 ' "$work/out" || fail "info: sample count: $(cat "$work/out")"
grep -q 'solve' "$work/out" || fail "info: phase solve missing"
expect 0 "$hetmem" trace info --json "$good"
python3 - "$work/out" <<'PY' || fail "info --json content"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["samples"] == 120, d["samples"]
assert d["allocs"] == 1 and d["frees"] == 1
assert [p["name"] for p in d["phases"]] == ["solve"], d["phases"]
assert abs(d["phases"][0]["time_s"] - 889e-9) < 1e-12, d["phases"]
assert abs(d["duration_s"] - 1e-6) < 1e-12, d["duration_s"]
assert d["header"]["device"] == "ddr" and d["header"]["argv"] == ["./app", "-n", "10"]
assert d["header"]["machine"]["name"] == "toy"
assert d["records"]["site"] == 1 and d["records"]["counter"] == 1
PY
expect 0 "$hetmem" trace dump "$good"
[ "$(wc -l <"$work/out")" -eq 128 ] || fail "dump: $(wc -l <"$work/out") lines, want 128"
expect 0 "$hetmem" trace dump --jsonl "$good"
python3 - "$work/out" <<'PY' || fail "dump --jsonl content"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert len(recs) == 127, len(recs)
kinds = [r["kind"] for r in recs]
assert kinds.count("sample") == 120
times = [r["time"] for r in recs if "time" in r]
assert times == sorted(times)
s = [r for r in recs if r["kind"] == "sample"][3]
assert s["addr"] == "0x100c0" and s["time"] == 41 and s["access"] == "store", s
assert [r for r in recs if r["kind"] == "site"][0]["frames"] == "app+0x10 main\napp+0x20 init"
PY
expect 0 "$hetmem" trace dump --csv "$good"
python3 - "$work/out" <<'PY' || fail "dump --csv content"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
assert len(rows) == 127, len(rows)
assert rows[0].keys() >= {"time", "kind", "addr", "name"}
assert sum(r["kind"] == "sample" for r in rows) == 120
assert [r["name"] for r in rows if r["kind"] == "name"] == ["matrix"]
PY
expect 0 "$hetmem" trace dump -n 5 "$good"
[ "$(wc -l <"$work/out")" -eq 6 ] || fail "dump -n 5: $(wc -l <"$work/out") lines"
expect 0 "$hetmem" trace objects "$good"
grep -Eq '^0x0000000012345678? |^0x000000001234abcd +matrix +1 .* 120 ' "$work/out" || fail "objects: $(cat "$work/out")"
grep -q 'app+0x10 main' "$work/out" || fail "objects: frames missing"
expect 0 "$hetmem" trace objects --json "$good"
python3 - "$work/out" <<'PY' || fail "objects --json content"
import json, sys
d = json.load(open(sys.argv[1]))
o = d["objects"]
assert len(o) == 1 and o[0]["site"] == "0x000000001234abcd" and o[0]["name"] == "matrix", o
assert o[0]["samples"] == 120 and o[0]["loads"] + o[0]["stores"] == 120 and o[0]["bytes"] == 4096
assert abs(o[0]["mean_lifetime_s"] - 892e-9) < 1e-12, o[0]
assert d["unattributed_samples"] == 0
PY

# --- attribution over many reused, out-of-order allocations, against a
# brute-force count made by the generator
"$corpus" --objects "$work/objects.hmt" > "$work/expect.json" || fail "trace_corpus --objects"
expect 0 "$hetmem" trace objects --json "$work/objects.hmt"
python3 - "$work/out" "$work/expect.json" <<'PY' || fail "objects attribution differs from brute force"
import json, sys
got = json.load(open(sys.argv[1])); want = json.load(open(sys.argv[2]))
assert got["samples"] == want["samples"], (got["samples"], want["samples"])
assert got["unattributed_samples"] == want["unattributed"], (got["unattributed_samples"], want["unattributed"])
by_site = {o["site"]: o["samples"] for o in got["objects"]}
for site, n in want["sites"].items():
    assert by_site.get(site, 0) == n, (site, by_site.get(site), n)
assert sum(by_site.values()) + got["unattributed_samples"] + got["no_address_samples"] == got["samples"]
PY

# --- usage errors: exit 2
expect 2 "$hetmem" trace
expect 2 "$hetmem" trace bogus "$good"
expect 2 "$hetmem" trace info
expect 2 "$hetmem" trace info "$good" extra
expect 2 "$hetmem" trace dump --csv --jsonl "$good"
expect 2 "$hetmem" trace dump --limit x "$good"
expect 2 "$hetmem" trace objects --frobnicate "$good"
expect 0 "$hetmem" trace --help
expect 0 "$hetmem" trace info --help
grep -q 'usage: hetmem trace info' "$work/out" || fail "info --help"

# --- runtime errors: exit 1, one line
expect 1 "$hetmem" trace info "$work/does-not-exist.hmt"
expect 1 "$hetmem" trace info "$work"
for c in $("$corpus" --list); do
  for sub in info dump objects; do
    expect 1 "$hetmem" trace $sub "$work/$c.hmt"
  done
done

[ "$fails" -eq 0 ] && echo "all trace CLI checks passed"
exit $((fails > 0))
