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
# 1024/2 = 512 per rank, Q = 0.3: 154 sent and received per rank per epoch.
grep -q "last exchange: sent \[154, 154\] received \[154, 154\]" "$W/out" || { echo "FAIL: exchange counts"; exit 1; }
"$PSHUFFLE" verify "$W/store" > /dev/null || { echo "FAIL: verify"; exit 1; }
echo PASS
