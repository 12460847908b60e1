#!/usr/bin/env bash
# Python tests (pytest on each of 2 ranks under mpirun). Debian's torch and
# mpi4py belong to /usr/bin/python3, which may not be the first python3 on PATH.
set -u
PY=${PSHUFFLE_PYTHON:-/usr/bin/python3}
if ! "$PY" -c "import torch, mpi4py, pytest, numpy" 2> /dev/null; then
  echo "skip: $PY lacks torch, mpi4py, pytest or numpy (install python3-torch python3-mpi4py python3-pytest)"
  exit 77
fi
export PYTHONPATH="$PS_SRC/pshuffle/python${PYTHONPATH:+:$PYTHONPATH}"
export PSHUFFLE_LIB PYTHONDONTWRITEBYTECODE=1
exec timeout 450 $PS_MPIRUN $PS_MPI_FLAGS -n 2 "$PY" "$PS_SRC/pshuffle/tests/python/run.py" -W ignore::UserWarning
