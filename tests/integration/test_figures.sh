#!/usr/bin/env bash
# Device figures as an input, end to end on soft-sampler traces recorded
# here: record writes the machine's identity and its --machine (or HMAT)
# figures into the header; estimate and optimize use them (a phased
# placement's migration cost is bytes over bandwidth), take --machine over
# them, say in one line which figures lack, and refuse runs of different
# machines. This machine has one memory node: the runs bound to "ddr" and
# to "node0" hold their data in the same memory, and the machine file makes
# them two devices for the estimator; what is checked is the plumbing of
# the figures, not the accuracy of the estimate.
set -u
. "$HETMEM_SRC/tests/integration/record_lib.sh"
command -v jq >/dev/null || { echo "jq not installed"; exit 77; }
cc_prog phases2 || { echo "cannot compile"; exit 1; }
P="$WORK/phases2"
FIX="$HETMEM_FIXTURES/sysfs/hmat-ddr-cxl"

# A machine whose devices are named as --bind names them here; cores 1, so
# that the traced thread's share of a device is the device's figure.
jq '.name = "rec-test" | .cores = 1 | .devices = [
      {"name": "ddr", "read_latency_ns": 90, "read_bandwidth_gbs": 20, "capacity": "1T"},
      {"name": "node0", "read_latency_ns": 250, "read_bandwidth_gbs": 4, "capacity": "1T"}]' \
  "$HETMEM_SRC/tests/sim-kernels/machines/two.json" > "$WORK/m.json"
jq '.devices |= map(.read_bandwidth_gbs *= 2)' "$WORK/m.json" > "$WORK/m2.json"
jq '.name = "other-names" | .devices |= map(.name = "x" + .name)' "$WORK/m.json" > "$WORK/none.json"
cat > "$WORK/ph.json" <<'EOF'
{"default": "ddr", "phases": {"pa": {"rules": [{"name": "A", "device": "node0"}]},
                              "pb": {"rules": [{"name": "B", "device": "node0"}]}}}
EOF

rec() { # rec OUT DEVICE [record options...]
  local out=$1 dev=$2; shift 2
  "$H" record -b soft -F 2000 --bind "$dev" "$@" -o "$WORK/$out.hmt" -- "$P" 4 > /dev/null 2> "$WORK/$out.err" \
    || { bad "record $out: $(cat "$WORK/$out.err")"; return 1; }
}
est() { # est NAME ARGS... : default-model estimate as JSON into $WORK/NAME.json, stderr into NAME.est.err
  local n=$1; shift
  "$H" estimate --json "$@" --placement "$WORK/ph.json" > "$WORK/$n.json" 2> "$WORK/$n.est.err" \
    || bad "estimate $n: $(cat "$WORK/$n.est.err")"
}
jv() { jq -r "$2" "$WORK/$1.json"; }
jc() { jq -c "$2" "$WORK/$1.json"; }

# --- record --machine: identity and figures in the header.
rec f-ddr ddr --machine "$WORK/m.json" && rec f-node0 node0 --machine "$WORK/m.json" || exit 1
"$H" trace info --json "$WORK/f-ddr.hmt" > "$WORK/hdr.json"
[ "$(jv hdr .header.machine.name)" = rec-test ] && ok "header machine from --machine" || bad "header machine: $(jv hdr .header.machine)"
[ "$(jv hdr '.header.host.figures')" = "machine file $WORK/m.json" ] && ok "header says where the figures come from" \
  || bad "host.figures: $(jv hdr .header.host.figures)"
[ "$(jv hdr '.header.host.bound_nodes | index(0) != null')" = true ] && ok "header names the bound node" \
  || bad "bound_nodes: $(jv hdr .header.host.bound_nodes)"
[ "$(jv hdr '.header.host.nodes[0].name')" = node0 ] && [ -n "$(jv hdr '.header.host.cpu')" ] \
  && ok "header identity: CPU '$(jv hdr .header.host.cpu)', nodes $(jv hdr '[.header.host.nodes[].name] | join(",")')" \
  || bad "host identity: $(jv hdr .header.host)"
! grep -q "no device figures" "$WORK/f-ddr.err" && ok "no figures note with --machine" || bad "note with --machine"

# --- estimate with the traces' figures: the phased placement pays for
# moving A and B at each phase boundary, bytes over the devices' bandwidth.
# By hand: 4 rounds, each with 4 moves of a 16 MiB object between ddr and
# node0 (A in at pa's begin and out at its end, B likewise for pb); a move
# goes at the slower of the source's read and the destination's write
# bandwidth, node0's 4 GB/s = 4 B/ns (cores 1): 16 x 2^24 / 4 ns = 0.067108864 s.
near() { awk -v a="$1" -v b="$2" 'BEGIN{d = a / b - 1; exit !(d < 1e-9 && d > -1e-9)}'; }
est with "$WORK/f-ddr.hmt" "$WORK/f-node0.hmt"
mig=$(jv with .models.default.migration_s); t_with=$(jv with .models.default.runtime_s)
near "$mig" 0.067108864 && ok "migration cost from the figures: $mig s (16 moves x 16 MiB / 4 GB/s)" || bad "migration cost $mig, want 0.067108864"
[ "$(jv with '.figures.lacking | length')" = 0 ] && [ "$(jv with .figures.source)" = traces ] && [ ! -s "$WORK/with.est.err" ] \
  && ok "no figure lacks, nothing on stderr" || bad "figures: $(jv with .figures) / $(cat "$WORK/with.est.err")"
# Twice the bandwidth halves it: a bandwidth term.
est bw2 --machine "$WORK/m2.json" "$WORK/f-ddr.hmt" "$WORK/f-node0.hmt"
awk -v a="$(jv bw2 .models.default.migration_s)" -v b="$mig" 'BEGIN{d = a / b - 0.5; exit !(d < 1e-9 && d > -1e-9)}' \
  && ok "--machine with twice the bandwidth: migration $(jv bw2 .models.default.migration_s) s, half" \
  || bad "migration with twice the bandwidth: $(jv bw2 .models.default.migration_s) against $mig"
[ "$(jv bw2 .figures.source)" = "--machine $WORK/m2.json" ] && ok "JSON names --machine as the source" || bad "source: $(jv bw2 .figures.source)"

# --- without figures (a --machine naming other devices): no bandwidth
# terms, one line naming what lacks, the same in the JSON.
est without --machine "$WORK/none.json" "$WORK/f-ddr.hmt" "$WORK/f-node0.hmt"
[ "$(jv without .models.default.migration_s)" = 0 ] && ok "no migration cost without figures" \
  || bad "migration without figures: $(jv without .models.default.migration_s)"
awk -v a="$t_with" -v b="$(jv without .models.default.runtime_s)" -v m="$mig" 'BEGIN{exit !(a - b >= 0.99 * m)}' \
  && ok "the estimate with figures is longer by at least the migration ($t_with against $(jv without .models.default.runtime_s))" \
  || bad "estimate with figures $t_with, without $(jv without .models.default.runtime_s), migration $mig"
if [ "$(wc -l < "$WORK/without.est.err")" = 1 ] && grep -q "^hetmem: estimate: device figures lacking: read bandwidth of ddr, node0; read latency of ddr, node0: " "$WORK/without.est.err"; then
  ok "one line: $(cat "$WORK/without.est.err")"
else bad "note: $(cat "$WORK/without.est.err")"; fi
[ "$(jv without '[.figures.lacking[].device] | join(",")')" = "ddr,node0" ] && [ "$(jv without '.figures.note | startswith("device figures lacking")')" = true ] \
  && ok "JSON lacking: $(jc without .figures.lacking)" || bad "JSON figures: $(jv without .figures)"

# --- traces recorded without --machine: the kernel's figures, when it has
# HMAT; here it has none, so record and estimate say so, and --machine
# gives the same estimate as traces recorded with it.
rec n-ddr ddr && rec n-node0 node0 || exit 1
if [ "$(jq -r .header.host.figures < <("$H" trace info --json "$WORK/n-ddr.hmt"))" = none ]; then
  grep -q "^hetmem: record: no device figures here" "$WORK/n-ddr.err" && ok "record says it has no figures" || bad "record note: $(cat "$WORK/n-ddr.err")"
  est plain "$WORK/n-ddr.hmt" "$WORK/n-node0.hmt"
  grep -q "device figures lacking" "$WORK/plain.est.err" && [ "$(jv plain .models.default.migration_s)" = 0 ] \
    && ok "no figures in the traces: noted, no migration cost" || bad "plain: $(cat "$WORK/plain.est.err")"
else
  echo "note: this kernel gives HMAT figures; the no-figures recording is not checked here"
fi
est over --machine "$WORK/m.json" "$WORK/n-ddr.hmt" "$WORK/n-node0.hmt"
awk -v a="$(jv over .models.default.migration_s)" -v b="$mig" 'BEGIN{exit !(a == b)}' \
  && ok "--machine on traces without figures: migration $(jv over .models.default.migration_s) s as recorded with them" \
  || bad "override migration $(jv over .models.default.migration_s) against $mig"

# optimize: the note, and --machine.
"$H" optimize --algo greedy --phases --capacity node0=64M --json --machine "$WORK/none.json" "$WORK/f-ddr.hmt" "$WORK/f-node0.hmt" \
  > "$WORK/opt.json" 2> "$WORK/opt.err" || bad "optimize: $(cat "$WORK/opt.err")"
grep -q "^hetmem: optimize: device figures lacking" "$WORK/opt.err" && [ "$(jq -r '.figures_note | startswith("device")' "$WORK/opt.json")" = true ] \
  && ok "optimize notes the lacking figures" || bad "optimize note: $(cat "$WORK/opt.err")"

# validate --real --machine FILE: the file's devices, and its figures in
# the device runs and the estimates.
# -j asks for runs side by side, which --real does not do: said, not dropped.
"$H" validate --real -j 4 --machine "$WORK/m.json" --placements 1 --keep "$WORK/val" -- "$P" 2 > "$WORK/val.out" 2> "$WORK/val.err" \
  || bad "validate --real --machine: $(cat "$WORK/val.err")"
grep -q "^hetmem: warning: --jobs 4 ignored with --real" "$WORK/val.err" && ok "validate --real says it ignores -j 4" \
  || bad "validate --real -j 4: $(cat "$WORK/val.err")"
[ "$(jq -r .header.host.figures < <("$H" trace info --json "$WORK/val/dev-node0.hmt"))" = "machine file $WORK/m.json" ] \
  && ! grep -q "figures lacking" "$WORK/val.err" && ok "validate --real --machine: device runs carry the file's figures" \
  || bad "validate --real --machine: $(cat "$WORK/val.err")"

# --- HMAT figures (captured tree): record reads them into the header, and
# the estimator finds each run's through the node it was bound to.
for d in ddr node0; do
  HETMEM_SYSFS_ROOT="$FIX" rec h-$d $d || exit 1
done
"$H" trace info --json "$WORK/h-ddr.hmt" > "$WORK/hh.json"
[ "$(jv hh .header.host.figures)" = hmat ] && [ "$(jv hh .header.host.name)" = cxl-lab-07 ] \
  && [ "$(jc hh '[.header.machine.devices[] | [.name, .read_bandwidth_gbs, .read_latency_ns]]')" = '[["node0",262.144,96],["node2",52,271]]' ] \
  && ok "HMAT figures in the header: $(jc hh '.header.machine.devices | map({name, read_bandwidth_gbs, read_latency_ns})')" \
  || bad "HMAT header: $(jc hh .header)"
est hmat "$WORK/h-ddr.hmt" "$WORK/h-node0.hmt"
# Both runs are bound to node 0 of the captured tree ("ddr" is its node
# with CPUs): per thread (32 CPUs) 262.144/32 GB/s read, 196.608/32 write;
# a move goes at the write share, 6.144 B/ns: 16 x 2^24 / 6.144 ns.
near "$(jv hmat .models.default.migration_s)" "$(awk 'BEGIN{printf "%.15g", 16 * 16777216 / 6.144e9}')" && [ ! -s "$WORK/hmat.est.err" ] \
  && ok "HMAT traces: migration cost $(jv hmat .models.default.migration_s) s (16 moves x 16 MiB / 6.144 GB/s), no note" \
  || bad "HMAT estimate: $(cat "$WORK/hmat.est.err") $(jc hmat .models.default)"

# --- runs of different machines: this host and the captured one.
out=$("$H" estimate "$WORK/f-ddr.hmt" "$WORK/h-node0.hmt" --placement "$WORK/ph.json" 2>&1 >/dev/null); rc=$?
if [ $rc = 1 ] && [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && [[ "$out" == *"runs of different machines"* ]] \
   && [[ "$out" == *"f-ddr.hmt"* ]] && [[ "$out" == *"h-node0.hmt"* ]] && [[ "$out" == *"host cxl-lab-07"* ]]; then
  ok "estimate refuses: $out"
else bad "estimate of mixed machines: rc $rc: $out"; fi
out=$("$H" optimize "$WORK/f-ddr.hmt" "$WORK/h-node0.hmt" --capacity node0=1G 2>&1 >/dev/null); rc=$?
[ $rc = 1 ] && [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && [[ "$out" == *"runs of different machines"* ]] \
  && ok "optimize refuses mixed machines" || bad "optimize of mixed machines: rc $rc: $out"

# --- bad input: one line each.
expect() { # expect RC PATTERN ARGS...
  local want=$1 pat=$2; shift 2
  local o r
  o=$("$H" "$@" 2>&1 >/dev/null); r=$?
  if [ "$r" = "$want" ] && [ "$(printf '%s\n' "$o" | wc -l)" = 1 ] && [[ "$o" == *"$pat"* ]]; then ok "refused: $o"
  else bad "expected exit $want and one line with '$pat', got $r: $o"; fi
}
expect 1 "has no device 'node0'" record -b soft --bind node0 --machine "$WORK/none.json" -o "$WORK/no.hmt" -- true
[ ! -e "$WORK/no.hmt" ] && ok "no trace left" || bad "a trace was left after a bad --machine"
expect 1 "nosuch.json" estimate --machine "$WORK/nosuch.json" "$WORK/f-ddr.hmt" "$WORK/f-node0.hmt" --placement "$WORK/ph.json"
expect 2 "a summary carries its own device figures" estimate --machine "$WORK/m.json" --summary "$WORK/x.json" --placement "$WORK/ph.json"

[ $fail = 0 ] && echo "all passed"
exit $fail
