#!/usr/bin/env bash
# usage: tests/fuzz/run.sh BUILD_DIR SECONDS
# Runs every libFuzzer target in BUILD_DIR/fuzz for SECONDS each, starting
# from the seed corpus in tests/fuzz/corpus/<name>/ (new inputs go to
# BUILD_DIR/fuzz-corpus/<name>, never into the source tree). Fails when a
# target reports a crash, leak, timeout or out-of-memory; the reproducer is
# left in BUILD_DIR/fuzz-artifacts/.
set -euo pipefail
build=${1:?usage: run.sh BUILD_DIR SECONDS}
secs=${2:?usage: run.sh BUILD_DIR SECONDS}
here=$(cd "$(dirname "$0")" && pwd)
shopt -s nullglob
targets=("$build"/fuzz/fuzz_*)
if [ ${#targets[@]} -eq 0 ]; then
  echo "run.sh: no fuzz targets in $build/fuzz (configure with -DHETMEM_FUZZ=ON and CC=clang)" >&2
  exit 1
fi
status=0
for t in "${targets[@]}"; do
  name=$(basename "$t"); short=${name#fuzz_}
  work="$build/fuzz-corpus/$short"; art="$build/fuzz-artifacts/$short/"
  mkdir -p "$work" "$art"
  echo "=== $name: ${secs}s ==="
  if "$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$art" "$work" "$here/corpus/$short" 2>"$build/fuzz-$short.log"; then
    tail -n 12 "$build/fuzz-$short.log" | grep -E "stat::number_of_executed_units|stat::peak_rss_mb|Done" || true
    echo "$name: no crash in ${secs}s"
  else
    status=1
    tail -n 40 "$build/fuzz-$short.log" >&2
    echo "$name: FAILED (reproducer in $art)" >&2
  fi
done
exit $status
