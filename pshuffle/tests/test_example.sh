#!/usr/bin/env bash
# pshuffle/examples/train.py end to end: 2 ranks, 2 epochs, DataLoader
# workers, DDP over gloo next to MPI, on a directory store; resume from a
# checkpoint; a changed dataset refused; 4097 samples on 4 ranks.
set -u
PY=${PSHUFFLE_PYTHON:-/usr/bin/python3}
if ! "$PY" -c "import torch, mpi4py, numpy" 2> /dev/null; then
  echo "skip: $PY lacks torch, mpi4py or numpy"
  exit 77
fi
export PYTHONPATH="$PS_SRC/pshuffle/python${PYTHONPATH:+:$PYTHONPATH}" PSHUFFLE_LIB PYTHONDONTWRITEBYTECODE=1
W="$PS_WORK/example.d"
rm -rf "$W" && mkdir -p "$W"
# (timeouts here are hang guards: torch jobs take many times their CPU time
# on a loaded machine)
run() { timeout 450 $PS_MPIRUN $PS_MPI_FLAGS -n "$1" "$PY" "$PS_SRC/pshuffle/examples/train.py" "${@:2}"; }
run 2 --epochs 2 --samples 1024 --workers 1 --store "$W/store" --checkpoint "$W/ckpt" > "$W/out" 2>&1 \
  || { cat "$W/out"; echo "FAIL: train.py"; exit 1; }
cat "$W/out"
# 1024/2 = 512 per rank, Q = 0.3: a pool of 154 per rank, of which the
# samples dealt to the other rank move; what one sends the other receives.
/usr/bin/python3 - "$W/out" <<'PYEOF' || { echo "FAIL: exchange counts"; exit 1; }
import re, sys
m = re.search(r"last exchange: sent \[(\d+), (\d+)\] received \[(\d+), (\d+)\]", open(sys.argv[1]).read())
s0, s1, r0, r1 = map(int, m.groups())
assert (s0, s1) == (r1, r0) and 40 <= s0 <= 114, m.group(0)
PYEOF
"$PSHUFFLE" verify "$W/store" > /dev/null || { echo "FAIL: verify"; exit 1; }
# Resume: the model, optimizer and sampler from the checkpoint, the data
# from the store; only epoch 2 runs.
run 2 --epochs 3 --samples 1024 --workers 1 --store "$W/store" --checkpoint "$W/ckpt" > "$W/out2" 2>&1 \
  || { cat "$W/out2"; echo "FAIL: resume"; exit 1; }
grep -q "^resumed at epoch 2" "$W/out2" && [ "$(grep -c '^epoch ' "$W/out2")" -eq 1 ] && grep -q "^epoch 2:" "$W/out2" \
  || { cat "$W/out2"; echo "FAIL: resume did not continue at epoch 2"; exit 1; }
"$PSHUFFLE" verify "$W/store" > /dev/null || { echo "FAIL: verify after resume"; exit 1; }
# A changed dataset: refused with one line on every rank, no hang.
run 2 --epochs 4 --samples 5000 --workers 0 --store "$W/store" --checkpoint "$W/ckpt" > "$W/out3" 2>&1 \
  && { cat "$W/out3"; echo "FAIL: a changed dataset was accepted"; exit 1; }
n=$(grep -c "^train.py: rank [01]: PShuffleError: pshuffle: rank 0: the store at .* holds 1024 samples, the dataset has 5000" "$W/out3")
[ "$n" -ge 1 ] || { cat "$W/out3"; echo "FAIL: no one-line refusal of the changed dataset"; exit 1; }
echo "changed dataset: $(grep -m1 '^train.py: rank' "$W/out3")"
# 4097 samples on 4 ranks (one rank has one more): every rank runs the same
# number of steps, padded or with --drop-last, so DDP does not hang.
for dl in "" --drop-last; do
  run 4 --epochs 2 --samples 4097 --workers 0 --strategy global $dl > "$W/out4" 2>&1 \
    || { cat "$W/out4"; echo "FAIL: train.py on 4 ranks, 4097 samples $dl"; exit 1; }
  want=17; [ -n "$dl" ] && want=16   # ceil(4097/4) = 1025 -> 17 batches of 64; floor -> 1024 -> 16
  n=$(grep -c "steps per rank \[$want, $want, $want, $want\]" "$W/out4")
  [ "$n" -eq 2 ] || { cat "$W/out4"; echo "FAIL: unequal or unexpected step counts $dl"; exit 1; }
done
# examples/imagefolder.py: the per-rank trees, 3 epochs, fresh augmentation:
# one sample seen in E+1 distinct views after epoch E; the trees then hold
# every sample once, and the store verifies.
timeout 450 $PS_MPIRUN $PS_MPI_FLAGS -n 2 "$PY" "$PS_SRC/pshuffle/examples/imagefolder.py" --make-data "$W/if" \
  --epochs 3 --workers 1 > "$W/if.out" 2>&1 || { cat "$W/if.out"; echo "FAIL: imagefolder.py"; exit 1; }
for e in 0 1 2; do
  grep -q "^epoch $e views $((e + 1)) " "$W/if.out" || { cat "$W/if.out"; echo "FAIL: imagefolder.py epoch $e views"; exit 1; }
done
n=$(find "$W/if/rank0" "$W/if/rank1" -name 'img*.raw' | sed 's|.*/||' | sort -u | wc -l)
t=$(find "$W/if/rank0" "$W/if/rank1" -name 'img*.raw' | wc -l)
[ "$n" -eq 192 ] && [ "$t" -eq 192 ] || { echo "FAIL: the trees hold $t files, $n distinct (192 expected)"; exit 1; }
"$PSHUFFLE" verify "$W/if/store" > /dev/null || { echo "FAIL: verify imagefolder store"; exit 1; }
grep '^epoch' "$W/if.out"
echo PASS
