#!/usr/bin/env bash
# python/semantics.py in a job of $1 ranks: PartialShuffleSampler against
# DistributedSampler (lengths, padding, duplicates, back and forth).
#
# Its limit is CPU time, not wall time: the job needs about 14 s of CPU (all
# ranks together, measured), but on a loaded machine its wall time is
# mostly waits for the scheduler at each of its collective steps (500 s
# at nice 10 beside an 8-rank training job, with 14 s of CPU). So the job
# is stopped when its processes have used PS_CPU_BUDGET seconds of CPU
# (default 60), which a spinning hang reaches whatever the load; ctest's
# TIMEOUT stays as the guard against a hang that sleeps.
set -u
PY=${PSHUFFLE_PYTHON:-/usr/bin/python3}
if ! "$PY" -c "import torch, mpi4py, numpy" 2> /dev/null; then
  echo "skip: $PY lacks torch, mpi4py or numpy"
  exit 77
fi
export PYTHONPATH="$PS_SRC/pshuffle/python${PYTHONPATH:+:$PYTHONPATH}" PSHUFFLE_LIB PYTHONDONTWRITEBYTECODE=1
budget=${PS_CPU_BUDGET:-60}
. "$PS_SRC/pshuffle/tests/tcommon.sh" # tree_cpu
$PS_MPIRUN $PS_MPI_FLAGS -n "$1" "$PY" "$PS_SRC/pshuffle/tests/python/semantics.py" &
job=$!
while kill -0 $job 2> /dev/null; do
  used=$(tree_cpu $job)
  if [ "$used" -gt "$budget" ]; then
    kill $job
    wait $job
    echo "FAIL: the job used ${used} s of CPU, over its budget of ${budget} s (PS_CPU_BUDGET)"
    exit 1
  fi
  sleep 1
done
wait $job
