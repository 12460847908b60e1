#!/usr/bin/env bash
# hetmem doctor on captured sysfs trees (key assertions) and on this machine.
set -u
H="$HETMEM_BIN/hetmem"; F="$HETMEM_FIXTURES/sysfs"
fail=0
check() { # check NAME CONDITION-RESULT MESSAGE
  if [ "$1" != 0 ]; then echo "FAIL: $2"; fail=1; fi
}
has() { grep -qF -- "$2" <<<"$1"; check $? "expected '$2' in output of $3"; }
jq_py() { python3 -c "import json,sys; d=json.load(sys.stdin); $1"; }

# Xeon Max flat mode: 2 DDR + 2 CPU-less HBM nodes, PEBS with the SPR aux leader.
out=$(HETMEM_SYSFS_ROOT=$F/xeonmax-flat-hbm "$H" doctor --json) || { echo "FAIL: doctor xeonmax rc"; fail=1; }
r=$(jq_py 'n=d["nodes"]; print(len(n), [x["kind"] for x in n], [x["cpus"]==0 for x in n], d["auto"], d["nodes"][2]["access0"]["read_bandwidth_mbs"], d["cpu"]["model_number"])' <<<"$out")
[ "$r" = "4 ['ddr', 'ddr', 'hbm', 'hbm'] [False, False, True, True] pebs 410000 143" ]; check $? "xeonmax json: got '$r'"
txt=$(HETMEM_SYSFS_ROOT=$F/xeonmax-flat-hbm "$H" doctor)
has "$txt" "CPU-less nodes: node2, node3" xeonmax
has "$txt" "all nodes share one memory tier" xeonmax

# Genoa + CXL: IBS, CXL node in a lower tier, kmem DAX device.
out=$(HETMEM_SYSFS_ROOT=$F/genoa-cxl "$H" doctor --json)
r=$(jq_py 'print(d["auto"], [x["kind"] for x in d["nodes"]], [t["name"] for t in d["tiers"]], d["dax"][0]["mode"], d["dax"][0]["target_node"], d["nodes"][1]["access0"]["read_latency_ns"])' <<<"$out")
[ "$r" = "ibs ['ddr', 'cxl'] ['tier4', 'tier22'] system-ram 1 250" ]; check $? "genoa json: got '$r'"

# 2-socket DDR: PEBS without HMAT; remedy for HMAT and no CPU-less node.
txt=$(HETMEM_SYSFS_ROOT=$F/skx-2s-ddr "$H" doctor)
has "$txt" "pebs   yes  mem-loads:ldlat=30,mem-stores" skx
has "$txt" "no CPU-less NUMA node" skx
has "$txt" "no HMAT latency/bandwidth" skx
has "$txt" "clock    unknown" skx

# The nominal core clock record writes (cpuinfo "cpu MHz" 2100.000 here).
r=$(HETMEM_SYSFS_ROOT=$F/hmat-ddr-cxl "$H" doctor --json | jq_py 'print(d["cpu"]["core_ghz"])')
[ "$r" = "2.1" ]; check $? "hmat-ddr-cxl core_ghz: got '$r'"
has "$(HETMEM_SYSFS_ROOT=$F/hmat-ddr-cxl "$H" doctor)" "clock    2.1 GHz nominal" hmat-ddr-cxl

# Arm with SPE but paranoid 3: SPE refused with the sysctl remedy; soft is x86-only.
txt=$(HETMEM_SYSFS_ROOT=$F/graviton3-spe "$H" doctor)
has "$txt" "spe    no   kernel.perf_event_paranoid is 3 (needs <= 1)" graviton
has "$txt" "sudo sysctl kernel.perf_event_paranoid=1" graviton
has "$txt" "auto -> none" graviton

# This machine: no PMU, one node. Whatever the hardware, doctor must report it
# consistently with sysfs and always offer the soft backend on x86-64.
out=$("$H" doctor --json) || { echo "FAIL: live doctor rc"; fail=1; }
nn=$(ls -d /sys/devices/system/node/node[0-9]* | wc -l)
r=$(jq_py 'print(len(d["nodes"]), [b["name"] for b in d["backends"] if b["available"]][-1])' <<<"$out")
[ "$r" = "$nn soft" ]; check $? "live json: got '$r', expected '$nn soft'"
if [ ! -e /sys/bus/event_source/devices/cpu ] && [ ! -e /sys/bus/event_source/devices/ibs_op ]; then
  r=$(jq_py 'print(d["auto"], all(b["remedy"] for b in d["backends"] if not b["available"]))' <<<"$out")
  [ "$r" = "soft True" ]; check $? "no-PMU machine: auto/remedies '$r'"
fi
if [ "$nn" = 1 ]; then has "$("$H" doctor)" "only one NUMA node" live; fi

# Bad input.
"$H" doctor --bogus >/dev/null 2>&1; [ $? = 2 ]; check $? "unknown option must exit 2"
"$H" doctor extra >/dev/null 2>&1; [ $? = 2 ]; check $? "operand must exit 2"
HETMEM_SYSFS_ROOT=/nonexistent "$H" doctor >/dev/null; check $? "empty root must still report"
exit $fail
