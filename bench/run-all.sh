#!/usr/bin/env bash
# make bench: runs every benchmark in bench/ (executable files other than
# this one); each prints a table and writes docs/results/<name>.md.
set -euo pipefail
build=${1:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
export HETMEM_BUILD="$top/$build" HETMEM_SRC="$top" PATH="$top/$build/bin:$PATH"
for b in "$top"/bench/*; do
  [ -f "$b" ] && [ -x "$b" ] && [ "$(basename "$b")" != run-all.sh ] || continue
  echo "=== $(basename "$b") ==="
  "$b"
done
