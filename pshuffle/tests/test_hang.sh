#!/usr/bin/env bash
# No hang in a training step: one rank of examples/train.py is stopped
# (SIGSTOP) while the job trains; the whole job must end with a clear
# message within the configured timeouts (gloo's --timeout 10 s and
# PSHUFFLE_TIMEOUT=10), not wait forever.
set -u
PY=${PSHUFFLE_PYTHON:-/usr/bin/python3}
if ! "$PY" -c "import torch, mpi4py, numpy" 2> /dev/null; then
  echo "skip: $PY lacks torch, mpi4py or numpy"
  exit 77
fi
export PYTHONPATH="$PS_SRC/pshuffle/python${PYTHONPATH:+:$PYTHONPATH}" PSHUFFLE_LIB PYTHONDONTWRITEBYTECODE=1
W="$PS_WORK/hang.d"
rm -rf "$W" && mkdir -p "$W"
stopped=
cleanup() { [ -n "$stopped" ] && kill -CONT "$stopped" 2> /dev/null && kill -KILL "$stopped" 2> /dev/null; }
trap cleanup EXIT
for strategy in global partial; do
  rm -f "$W"/rank*.pid
  PSHUFFLE_TIMEOUT=10 timeout 200 $PS_MPIRUN $PS_MPI_FLAGS -x PSHUFFLE_TIMEOUT -n 2 "$PY" \
    "$PS_SRC/pshuffle/examples/train.py" --strategy $strategy --epochs 100000 --samples 4096 --workers 0 \
    --timeout 10 --pid-dir "$W" > "$W/out.$strategy" 2>&1 &
  job=$!
  for _ in $(seq 600); do grep -q "^epoch 1:" "$W/out.$strategy" && break; sleep 0.1; done
  grep -q "^epoch 1:" "$W/out.$strategy" || { cat "$W/out.$strategy"; echo "FAIL: $strategy: no training"; exit 1; }
  stopped=$(cat "$W/rank1.pid")
  kill -STOP "$stopped"
  t0=$SECONDS
  wait $job
  rc=$?
  took=$((SECONDS - t0))
  cleanup; stopped=
  line=$(grep -m1 -E "^(train.py|pshuffle): rank 0: " "$W/out.$strategy")
  [ $rc -ne 0 ] && [ $rc -ne 124 ] || { cat "$W/out.$strategy"; echo "FAIL: $strategy: rc $rc (124: a hang)"; exit 1; }
  [ -n "$line" ] || { cat "$W/out.$strategy"; echo "FAIL: $strategy: no one-line message from rank 0"; exit 1; }
  # 10 s configured; the rest is slack for a loaded machine and the abort.
  [ $took -le 90 ] || { cat "$W/out.$strategy"; echo "FAIL: $strategy: ended $took s after the stop"; exit 1; }
  echo "$strategy: rank 1 stopped; the job ended after $took s: $(echo "$line" | cut -c1-160)"
done
echo PASS
