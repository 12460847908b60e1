#!/usr/bin/env bash
# make bench: runs every benchmark in bench/ (executable files other than
# this one); each prints a table and writes docs/results/<name>.md.
set -euo pipefail
build=${1:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
export HETMEM_BUILD="$top/$build" HETMEM_SRC="$top" PATH="$top/$build/bin:$PATH"
# The benches that read bench/optimizer's kept runs (optimizer-pick,
# optimizer-split) get its folder, made afresh for this run (its
# simulations are reused from the folder, so an older one would give the
# older simulator's times). bench/estimator keeps its runs in
# build/bench-estimator, where estimator-interval, -objects and -splits
# read them by default.
work="$top/$build/bench-optimizer"
rm -rf "$work"
mkdir -p "$work"
for b in "$top"/bench/*; do
  [ -f "$b" ] && [ -x "$b" ] && [ "$(basename "$b")" != run-all.sh ] || continue
  args=()
  case "$(basename "$b")" in
    optimizer | optimizer-pick | optimizer-split) args=(--work "$work") ;;
  esac
  echo "=== $(basename "$b") ${args[*]:-} ==="
  "$b" "${args[@]}"
done
