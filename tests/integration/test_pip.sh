#!/usr/bin/env bash
# The Python packages installed with pip as the README says, offline, into a
# venv that sees Debian's packages: they carry their own copy of the library
# and load it with no settings, from /, once the source tree is gone; the
# build leaves nothing untracked in the tree; HETMEM_LIB and PSHUFFLE_LIB
# still override.
set -u
B=$HETMEM_BUILD
S=$HETMEM_SRC
PY=/usr/bin/python3
skip() { echo "skip: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

if grep -q '^HETMEM_SANITIZE:STRING=..*' "$B/CMakeCache.txt" 2> /dev/null; then
  skip "sanitized build: its libraries cannot be loaded into an uninstrumented Python"
fi
[ -e "$B/lib/libpshuffle.so" ] || skip "pshuffle is not built (MPI missing)"
"$PY" -c "import venv, setuptools, wheel, mpi4py, numpy" 2> /dev/null ||
  skip "$PY lacks venv, setuptools, wheel, mpi4py or numpy (make deps)"
command -v git > /dev/null || skip "git is not installed"

W=$(mktemp -d "${TMPDIR:-/tmp}/hetmem-pip.XXXXXX")
trap 'rm -rf "$W"' EXIT
# A copy of the two package folders in a tree of their own (git, with the
# project's .gitignore) whose build/lib is this build's: pip builds in place,
# and the copy keeps the real tree untouched while other tests read it.
T=$W/tree
mkdir -p "$T/pshuffle" "$T/build"
cp "$S/.gitignore" "$T/"
cp -rL "$S/python" "$T/python" && cp -rL "$S/pshuffle/python" "$T/pshuffle/python" || fail "copy packages"
rm -rf "$T/python/build" "$T/pshuffle/python/build" "$T"/python/*.egg-info "$T"/pshuffle/python/*.egg-info
find "$T" -name __pycache__ -prune -exec rm -rf {} +
ln -s "$(cd "$B" && pwd -P)/lib" "$T/build/lib"
git -C "$T" init -q && git -C "$T" add -A && git -C "$T" -c user.name=t -c user.email=t@t commit -qm tree ||
  fail "git init of the copy"

"$PY" -m venv --system-site-packages "$W/venv" || fail "python3 -m venv --system-site-packages"
# The README's command (offline: the build uses Debian's setuptools and wheel).
(cd "$T" && "$W/venv/bin/pip" install -q --no-build-isolation ./python ./pshuffle/python) > "$W/pip.log" 2>&1 ||
  { cat "$W/pip.log"; fail "pip install --no-build-isolation ./python ./pshuffle/python"; }
echo "ok: pip install --no-build-isolation ./python ./pshuffle/python"
left=$(git -C "$T" status --porcelain)
[ -z "$left" ] || fail "pip install left untracked files in the tree: $left"
echo "ok: nothing untracked left in the tree"

rm -rf "$T"
V=$W/venv/lib/python3*/site-packages
# From /, no PATH (no hetmem or pshuffle program to follow), no overrides.
(cd / && env -i HOME="$W" LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1 "$W/venv/bin/python" -c '
import hetmem, pshuffle, hetmem._lib, pshuffle._lib, sys
V = sys.argv[1]
for mod, path in ((hetmem, hetmem._lib.find()), (pshuffle, pshuffle._lib._find())):
    assert mod.__file__.startswith(V + "/"), mod.__file__
    assert path.startswith(V + "/" + mod.__name__ + "/lib"), path
assert hetmem._lib.load().hm_strerror is not None
' $V) || fail "import hetmem, pshuffle from / with PATH, HETMEM_LIB and PSHUFFLE_LIB unset"
echo "ok: the installed packages find their own libraries with PATH unset"
# pshuffle's calls go through mpi4py, whose MPI_Init (Open MPI) needs a PATH.
out=$(cd / && env -i HOME="$W" LANG=C.UTF-8 PATH=/usr/bin:/bin PYTHONDONTWRITEBYTECODE=1 "$W/venv/bin/python" -c '
import pshuffle
print(pshuffle.plan_count(0.3, 100))' 2>&1) || fail "pshuffle.plan_count: $out"
[ "$out" = 30 ] || fail "pshuffle.plan_count(0.3, 100) = $out"
echo "ok: pshuffle.plan_count through the installed library"

# The variables still override the package's own copy.
out=$(cd / && env -i HOME="$W" HETMEM_LIB="$B/lib/libhetmem.so" PSHUFFLE_LIB="$B/lib/libpshuffle.so" \
  "$W/venv/bin/python" -c 'import hetmem._lib, pshuffle._lib; print(hetmem._lib.find()); print(pshuffle._lib._find())')
[ "$out" = "$B/lib/libhetmem.so
$B/lib/libpshuffle.so" ] || fail "HETMEM_LIB/PSHUFFLE_LIB do not override: $out"
err=$(cd / && env -i HOME="$W" HETMEM_LIB=/nonexistent/libhetmem.so "$W/venv/bin/python" -c 'import hetmem._lib; hetmem._lib.find()' 2>&1) &&
  fail "HETMEM_LIB=/nonexistent/libhetmem.so accepted"
echo "$err" | grep -q "HETMEM_LIB=/nonexistent/libhetmem.so: no such file" || fail "HETMEM_LIB error: $err"
echo "ok: HETMEM_LIB and PSHUFFLE_LIB override"
echo PASS
