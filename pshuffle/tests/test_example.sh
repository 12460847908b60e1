#!/usr/bin/env bash
# pshuffle/examples/train.py end to end: 2 ranks, 2 epochs, DataLoader
# workers, DDP over gloo next to MPI, on a directory store.
set -u
PY=${PSHUFFLE_PYTHON:-/usr/bin/python3}
if ! "$PY" -c "import torch, mpi4py, numpy" 2> /dev/null; then
  echo "skip: $PY lacks torch, mpi4py or numpy"
  exit 77
fi
export PYTHONPATH="$PS_SRC/pshuffle/python${PYTHONPATH:+:$PYTHONPATH}" PSHUFFLE_LIB PYTHONDONTWRITEBYTECODE=1
W="$PS_WORK/example.d"
rm -rf "$W" && mkdir -p "$W"
timeout 150 $PS_MPIRUN $PS_MPI_FLAGS -n 2 "$PY" "$PS_SRC/pshuffle/examples/train.py" --epochs 2 --samples 1024 \
  --workers 1 --store "$W/store" > "$W/out" 2>&1 || { cat "$W/out"; echo "FAIL: train.py"; exit 1; }
cat "$W/out"
# 1024/2 = 512 per rank, Q = 0.3: a pool of 154 per rank, of which the
# samples dealt to the other rank move; what one sends the other receives.
/usr/bin/python3 - "$W/out" <<'EOF' || { echo "FAIL: exchange counts"; exit 1; }
import re, sys
m = re.search(r"last exchange: sent \[(\d+), (\d+)\] received \[(\d+), (\d+)\]", open(sys.argv[1]).read())
s0, s1, r0, r1 = map(int, m.groups())
assert (s0, s1) == (r1, r0) and 40 <= s0 <= 114, m.group(0)
EOF
"$PSHUFFLE" verify "$W/store" > /dev/null || { echo "FAIL: verify"; exit 1; }
# 4097 samples on 4 ranks (one rank has one more): every rank runs the same
# number of steps, padded or with --drop-last, so DDP does not hang.
for dl in "" --drop-last; do
  timeout 120 $PS_MPIRUN $PS_MPI_FLAGS -n 4 "$PY" "$PS_SRC/pshuffle/examples/train.py" --epochs 2 --samples 4097 \
    --workers 0 --strategy global $dl > "$W/out4" 2>&1 || { cat "$W/out4"; echo "FAIL: train.py on 4 ranks, 4097 samples $dl"; exit 1; }
  want=17; [ -n "$dl" ] && want=16   # ceil(4097/4) = 1025 -> 17 batches of 64; floor -> 1024 -> 16
  n=$(grep -c "steps per rank \[$want, $want, $want, $want\]" "$W/out4")
  [ "$n" -eq 2 ] || { cat "$W/out4"; echo "FAIL: unequal or unexpected step counts $dl"; exit 1; }
done
echo PASS
