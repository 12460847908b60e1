#!/usr/bin/env bash
# pshuffle accuracy, quick: 8 ranks (oversubscribed) train a small CNN with
# per-rank BatchNorm on 4000 Fashion-MNIST images sorted by label, 3 epochs,
# with global, local and partial (Q=0.3) shuffling, and print the test
# accuracy of each (bench/pshuffle-accuracy --quick).
set -euo pipefail
if [ ! -f "$HETMEM_BUILD/lib/libpshuffle.so" ]; then
  echo "pshuffle not built (no MPI?): skipped"
  echo "pshuffle accuracy: skipped (not built)" >> "$DEMO_SUMMARY"
  exit 0
fi
echo "\$ bench/pshuffle-accuracy --quick"
timeout 400 "$HETMEM_SRC/bench/pshuffle-accuracy" --quick | tee "$DEMO_WORK/pshuffle-acc.out"
# Final accuracy per strategy, from the table's rows "| BN | sorted | STRATEGY | seeds | FINAL | ...".
acc() { awk -F'|' -v s="$1" '$4 ~ "^ *"s" *$" {gsub(/ /, "", $6); print $6}' "$DEMO_WORK/pshuffle-acc.out"; }
g=$(acc global) l=$(acc local) p=$(acc 'Q=0.3')
if [ -n "$g" ]; then
  echo "pshuffle accuracy (8 ranks, label-sorted start, BatchNorm, 3 epochs): global ${g}%, local ${l}%, partial Q=0.3 ${p}%" >> "$DEMO_SUMMARY"
else
  echo "pshuffle accuracy: skipped ($(tail -1 "$DEMO_WORK/pshuffle-acc.out"))" >> "$DEMO_SUMMARY"
fi
