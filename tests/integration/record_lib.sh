# Shared by the record/run integration tests: builds the test programs into
# $WORK with the system compiler, linking the helper against hetmem_core.
: "${HETMEM_BIN:?}" "${HETMEM_BUILD:?}" "${HETMEM_SRC:?}"
H="$HETMEM_BIN/hetmem"
PROGS="$HETMEM_SRC/tests/integration/progs"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/hetmem-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
# The test programs are built without sanitizers: LD_PRELOAD interposers and
# ASan both want to own malloc (the sanitizer build's preload has no ASan).
cc_prog() { # cc_prog NAME [extra flags]
  local n=$1; shift
  cc -O2 -g -fno-inline-functions -I"$HETMEM_SRC/include" -o "$WORK/$n" "$PROGS/$n.c" "$@"
}
core_libs() {
  echo "$HETMEM_BUILD/libhetmem_core.a -lzstd -ljansson -lxxhash -lZydis -lpfm -lnuma -lgcc_s -lpthread -lm -ldl"
}
# Under -DHETMEM_SANITIZE the preload library is built without ASan (an
# ASan runtime cannot be LD_PRELOADed into uninstrumented programs) but
# everything else is instrumented: helpers linked with the core take the
# build's sanitizer flags.
SAN=$(sed -n 's/^HETMEM_SANITIZE:STRING=//p' "$HETMEM_BUILD/CMakeCache.txt" 2>/dev/null)
SANFLAGS=${SAN:+-fsanitize=$SAN}
build_attr() {
  # shellcheck disable=SC2046
  cc -O1 $SANFLAGS -I"$HETMEM_SRC/include" -I"$HETMEM_SRC/src" -o "$WORK/trace_attr" "$PROGS/trace_attr.c" $(core_libs)
}
