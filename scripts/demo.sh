#!/usr/bin/env bash
# make demo: runs every stage of the pipeline that exists, in order, and
# prints a summary. Each stage is a script in scripts/demo.d/.
set -euo pipefail
build=${1:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
export HETMEM_BUILD="$top/$build" HETMEM_SRC="$top"
export PATH="$HETMEM_BUILD/bin:$PATH"
work=$(mktemp -d "${TMPDIR:-/tmp}/hetmem-demo.XXXXXX")
trap 'rm -rf "$work"' EXIT
export DEMO_WORK="$work"
summary="$work/summary.txt"
: > "$summary"
export DEMO_SUMMARY="$summary"
start=$(date +%s)
for stage in "$top"/scripts/demo.d/*.sh; do
  [ -e "$stage" ] || continue
  name=$(basename "$stage" .sh)
  printf '\n=== %s ===\n' "${name#*-}"
  t0=$(date +%s)
  bash "$stage"
  printf '%-28s ok (%ds)\n' "${name#*-}" "$(( $(date +%s) - t0 ))" >> "$summary.stages"
done
printf '\n=== summary (%ds) ===\n' "$(( $(date +%s) - start ))"
cat "$summary.stages"
[ -s "$summary" ] && { echo; cat "$summary"; }
exit 0
