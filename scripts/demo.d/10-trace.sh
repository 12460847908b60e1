#!/usr/bin/env bash
# Demo stage: write a small synthetic trace (a sampled stream over six
# objects), read it back with `hetmem trace info` and `hetmem trace objects`.
set -euo pipefail
trace="$DEMO_WORK/synthetic.hmt"
bench_trace_io --synth "$trace" --samples 200000
echo "\$ hetmem trace info $(basename "$trace")"
hetmem trace info "$trace"
echo
echo "\$ hetmem trace objects $(basename "$trace") | head -5"
hetmem trace objects "$trace" > "$DEMO_WORK/objects.txt"
head -5 "$DEMO_WORK/objects.txt"
hetmem trace info --json "$trace" > "$DEMO_WORK/info.json"
python3 - "$trace" "$DEMO_WORK/info.json" >> "$DEMO_SUMMARY" <<'PY'
import json, os, sys
d = json.load(open(sys.argv[2]))
size = os.path.getsize(sys.argv[1])
print(f"trace: wrote and read back {d['samples']} samples, {d['allocs']} allocations, "
      f"{len(d['phases'])} phases in {size/1024:.0f} KiB ({size/d['samples']:.2f} bytes/sample)")
PY
