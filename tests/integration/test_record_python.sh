#!/usr/bin/env bash
# hetmem.record (python/hetmem/record.py, ctypes over libhetmem's recording
# API) records a small program: the counts, its exit code, the trace it
# wrote, a runtime message hook, and an error raised before anything runs;
# then runs it with a placement (hetmem.record.run) and checks each object's
# device, the devices' totals and the unmatched rule.
set -u
lib="$HETMEM_BUILD/lib/libhetmem.so"
child="$HETMEM_BUILD/tests/record_api_child"
[ -x /usr/bin/python3 ] || { echo "skip: no /usr/bin/python3"; exit 77; }
[ -e "$lib" ] && [ -x "$child" ] || { echo "skip: $lib or $child not built"; exit 77; }
if grep -q '^HETMEM_SANITIZE:STRING=.' "$HETMEM_BUILD/CMakeCache.txt" 2>/dev/null; then
  echo "skip: a sanitized libhetmem cannot be loaded into python"; exit 77
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
PYTHONPATH="$HETMEM_SRC/python" HETMEM_LIB="$lib" HETMEM_PRELOAD="$HETMEM_BUILD/lib/libhetmem_preload.so" \
  /usr/bin/python3 - "$child" "$HETMEM_BIN/hetmem" <<'PY'
import subprocess, sys
import hetmem.record
from hetmem.estimate import HetmemError
child, hetmem_bin = sys.argv[1], sys.argv[2]
fails = 0
def check(cond, what):
    global fails
    print(("ok: " if cond else "FAIL: ") + what)
    fails += not cond
# The placement flags are HM_PLACED_* of hetmem/record.h, copied by value:
# the same names (phase_rule is HM_PLACED_PHASE) and values, none missing.
import os, re
hdr = open(os.path.join(os.environ["HETMEM_SRC"], "include/hetmem/record.h")).read()
cflags = {m.group(1): int(m.group(2)) for m in re.finditer(r"\bHM_PLACED_([A-Z]+) = (\d+)", hdr)}
pyflags = {("PHASE" if k == "phase_rule" else k.upper()): v for k, v in hetmem.record._FLAGS}
check(len(cflags) >= 5 and cflags == pyflags, "placement flags as in record.h: %r, python %r" % (cflags, pyflags))
res = hetmem.record.record([child, "now"], "t.hmt", backend="none", min_size=1 << 20)
check(res["exit_code"] == 3, "exit code %d of the recorded program" % res["exit_code"])
check(res["allocs"] >= 1 and res["frees"] >= 1, "allocations %d, frees %d" % (res["allocs"], res["frees"]))
check(res["processes"] == 1 and res["backend"] == "none", "one process, backend %s" % res["backend"])
info = subprocess.run([hetmem_bin, "trace", "objects", "t.hmt"], capture_output=True, text=True)
check(info.returncode == 0 and " 8.0 MiB " in info.stdout, "trace objects shows the 8 MiB block: %r" % info.stdout[:300])
try:
    hetmem.record.record([child], "u.hmt", backend="foo")
    check(False, "unknown backend accepted")
except HetmemError as e:
    check("unknown backend 'foo'" in str(e), "unknown backend refused: %s" % e)
try:
    hetmem.record.record([child], "nodir/u.hmt", backend="none")
    check(False, "output in a missing folder accepted")
except HetmemError as e:
    check("No such file" in str(e), "output in a missing folder refused: %s" % e)
# A placement run: node0 holds 4 MiB, so the 8 MiB block spills to "0".
with open("p.json", "w") as f:
    f.write('{"default": "0", "rules": [{"min_size": "1M", "device": "node0"}, {"name": "nothing", "device": "0"}]}')
res = hetmem.record.run([child, "now"], "p.json", capacity={"node0": 4 << 20}, min_size=1 << 20)
big = [p for p in res["placements"] if p["size"] == 8 << 20]
check(res["exit_code"] == 3, "placement run: exit code %d" % res["exit_code"])
check(len(big) == 1 and big[0]["requested"] == "node0" and big[0]["device"] == "0" and big[0]["spilled"]
      and big[0]["nodes"] == [0], "placement run: the 8 MiB block spilled to 0: %r" % big)
check([d["capacity"] for d in res["devices"] if d["name"] == "node0"] == [4 << 20],
      "placement run: node0's capacity: %r" % res["devices"])
check(len(res["unmatched_rules"]) == 1 and '"nothing"' in res["unmatched_rules"][0],
      "placement run: unmatched %r" % res["unmatched_rules"])
try:
    hetmem.record.run([child], "p.json", capacity={"hbm": 1 << 30})
    check(False, "a capacity for a device not in the placement accepted")
except HetmemError as e:
    check("hbm is not a device of" in str(e), "capacity for hbm refused: %s" % e)
sys.exit(1 if fails else 0)
PY
