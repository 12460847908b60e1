#!/usr/bin/env bash
# python/semantics.py in a job of $1 ranks: PartialShuffleSampler against
# DistributedSampler (lengths, padding, duplicates, back and forth).
set -u
PY=${PSHUFFLE_PYTHON:-/usr/bin/python3}
if ! "$PY" -c "import torch, mpi4py, numpy" 2> /dev/null; then
  echo "skip: $PY lacks torch, mpi4py or numpy"
  exit 77
fi
export PYTHONPATH="$PS_SRC/pshuffle/python${PYTHONPATH:+:$PYTHONPATH}" PSHUFFLE_LIB PYTHONDONTWRITEBYTECODE=1
exec timeout 220 $PS_MPIRUN $PS_MPI_FLAGS -n "$1" "$PY" "$PS_SRC/pshuffle/tests/python/semantics.py"
