#!/usr/bin/env bash
# An MPI program run as one rank is simulated: tests/sim-kernels/mpi.c built
# with HETMEM_CC=mpicc hetmem-cc, started on its own (MPI's singleton
# start) and under mpirun -n 1. MPI's threads run no instrumented code, so
# they are allowed; the two arrays are objects named by their lines.
. "$HETMEM_SRC/tests/integration/sim_lib.sh"
command -v mpicc >/dev/null || { echo "mpicc not installed"; exit 77; }
cp "$HETMEM_SRC/tests/sim-kernels/mpi.c" "$T/mpi.c"
(cd "$T" && HETMEM_CC=mpicc "$HETMEM_BIN/hetmem-cc" -O2 -o mpi.sim mpi.c) > "$T/cc.log" 2>&1 \
  || { fail "hetmem-cc with mpicc: $(tail -1 "$T/cc.log")"; done_tests; }

check() { # check WHAT OUT JSON
  grep -qx "rank 0 of 1 sum 65536" "$2" && ok "$1: the program's own result" || fail "$1: output '$(head -1 "$2")'"
  local want src rd
  for want in "1048576 mpi.c:16" "262144 mpi.c:17"; do
    local size=${want% *} line=${want#* }
    src=$(j "$3" ".objects[] | select(.bytes_allocated == $size) | .source | split(\" \")[0]")
    rd=$(j "$3" ".objects[] | select(.bytes_allocated == $size) | .bytes_read")
    [ "$src" = "$line" ] && [ "${rd:-0}" -ge "$size" ] && ok "$1: $size bytes at $src, read $rd" \
      || fail "$1: $size bytes: source '$src', read '${rd:-none}' (want $line, >= $size)"
  done
}

if "$H" sim -m "$M" --json "$T/s.json" -- "$T/mpi.sim" > "$T/s.out" 2> "$T/s.err"; then
  check "singleton" "$T/s.out" "$T/s.json"
else
  fail "singleton MPI run refused: $(tail -1 "$T/s.err")"
fi

if command -v mpirun >/dev/null; then
  flags=(--oversubscribe --mca btl self,vader)
  [ "$(id -u)" = 0 ] && flags=(--allow-run-as-root "${flags[@]}")
  if timeout 120 mpirun "${flags[@]}" -n 1 "$H" sim -m "$M" --json "$T/m.json" -- "$T/mpi.sim" > "$T/m.out" 2> "$T/m.err"; then
    check "mpirun -n 1" "$T/m.out" "$T/m.json"
    # The same program, the same simulated time either way.
    near "$(j "$T/m.json" .runtime_s)" "$(j "$T/s.json" .runtime_s)" 0.02 "mpirun -n 1 and singleton runtimes"
  else
    fail "mpirun -n 1 hetmem sim: $(tail -1 "$T/m.err")"
  fi
fi
done_tests
