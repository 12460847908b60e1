#!/usr/bin/env bash
# pshuffle: 4 ranks (oversubscribed) shuffle a class-sorted dataset with
# Q=0.3 for 4 epochs on a directory store, then the store is verified and
# the plan for a large job is printed without MPI; then 2 ranks train on
# their own ImageFolder-style trees with fresh augmentation every epoch.
set -euo pipefail
bin="$HETMEM_BUILD/bin"
if [ ! -x "$bin/pshuffle-epochs" ]; then
  echo "pshuffle not built (no MPI?): skipped"
  echo "pshuffle: skipped (not built)" >> "$DEMO_SUMMARY"
  exit 0
fi
store="$DEMO_WORK/pshuffle-store"
flags=(--oversubscribe --mca btl self,vader --mca mpi_yield_when_idle 1 --bind-to none)
[ "$(id -u)" = 0 ] && flags=(--allow-run-as-root "${flags[@]}")
echo "\$ mpirun -n 4 pshuffle-epochs --q 0.3 --epochs 4 --samples 300 --dir STORE"
timeout 50 mpirun "${flags[@]}" -n 4 "$bin/pshuffle-epochs" --q 0.3 --epochs 4 --samples 300 \
  --dir "$store" | tee "$DEMO_WORK/pshuffle.out"
echo
echo "\$ pshuffle verify STORE"
"$bin/pshuffle" verify "$store" | tee "$DEMO_WORK/pshuffle.verify"
echo
echo "\$ pshuffle plan --ranks 1024 --samples 1281167 --q 0.1 --epochs 5"
"$bin/pshuffle" plan --ranks 1024 --samples 1281167 --q 0.1 --epochs 5 | tee "$DEMO_WORK/pshuffle.plan"
sent=$(awk '$1 == "3" {print $3}' "$DEMO_WORK/pshuffle.out")
samples=$(awk '$1 == "samples" {print $2}' "$DEMO_WORK/pshuffle.verify")
mixed=$(awk '$1 == "4" {print $NF}' "$DEMO_WORK/pshuffle.plan")
echo "pshuffle: 4 ranks x 300 samples, partial Q=0.3: $sent pooled samples dealt to other ranks per rank in epoch 3; store verified ($samples samples, no loss or duplicate)" >> "$DEMO_SUMMARY"
echo "pshuffle: plan for 1024 ranks, ImageNet-sized, Q=0.1: $mixed of samples off their first rank after 5 epochs" >> "$DEMO_SUMMARY"

py=/usr/bin/python3
if "$py" -c "import torch, mpi4py, numpy" 2> /dev/null; then
  echo
  echo "\$ mpirun -n 2 python3 pshuffle/examples/imagefolder.py --make-data DIR --epochs 3"
  PYTHONPATH="$HETMEM_SRC/pshuffle/python" PSHUFFLE_LIB="$HETMEM_BUILD/lib/libpshuffle.so" timeout 120 \
    mpirun "${flags[@]}" -n 2 "$py" -W ignore::UserWarning "$HETMEM_SRC/pshuffle/examples/imagefolder.py" \
    --make-data "$DEMO_WORK/pshuffle-trees" --epochs 3 --workers 1 | tee "$DEMO_WORK/pshuffle-if.out"
  views=$(awk '$1 == "epoch" {v = $4} END {print v}' "$DEMO_WORK/pshuffle-if.out")
  echo "pshuffle: 2 ranks train on their own ImageFolder-style trees (files exchanged between the trees every epoch): one sample seen in $views distinct augmented views over 3 epochs" >> "$DEMO_SUMMARY"
else
  echo "pshuffle imagefolder example: skipped (/usr/bin/python3 lacks torch, mpi4py or numpy)"
fi
