#!/usr/bin/env bash
# Installs the build into temporary prefixes and uses them as a user would,
# in a clean environment that has only the module file's settings (Lmod):
# no source or build tree on any path.
#   1. DESTDIR staging, then uninstall.sh removes every file it installed.
#   2. A prefix, loaded with the Lua module file: versions, man pages,
#      presets, hetmem-cc + hetmem sim, pkg-config and find_package builds,
#      the Python packages with /usr/bin/python3 and from a pip install into
#      a --system-site-packages venv, train.py on 2 MPI ranks.
#   3. The same prefix moved to another folder, loaded with the Tcl file.
set -u
B=$HETMEM_BUILD
S=$HETMEM_SRC
PY=/usr/bin/python3
skip() { echo "skip: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

if grep -q '^HETMEM_SANITIZE:STRING=..*' "$B/CMakeCache.txt" 2> /dev/null; then
  skip "sanitized build: its libraries cannot be loaded by the uninstrumented programs and Python of the checks"
fi
LMOD_INIT=/usr/share/lmod/lmod/init/bash
[ -f "$LMOD_INIT" ] || skip "Lmod is not installed (apt install lmod; make deps)"
[ -f "$B/man/man1/hetmem.1" ] || skip "no man pages in the build (help2man missing when it was configured)"
[ -x "$B/bin/hetmem-cc" ] || skip "hetmem-cc is not built (Zydis missing)"
[ -x "$B/bin/pshuffle" ] || skip "pshuffle is not built (MPI missing)"
for t in pkg-config cmake cc man mpirun; do
  command -v $t > /dev/null || skip "$t is not installed"
done
pyok=1
"$PY" -c "import torch, mpi4py, numpy, setuptools, wheel, venv" 2> /dev/null || pyok=0

ver=$(cat "$S/VERSION")
W=$(mktemp -d "${TMPDIR:-/tmp}/hetmem-install.XXXXXX")
# cmake --install and install.sh write their lists into the build tree:
# keep the user's.
for f in install_manifest.txt install_dirs.txt; do
  [ -f "$B/$f" ] && cp "$B/$f" "$W/user_$f"
done
cleanup() {
  for f in install_manifest.txt install_dirs.txt; do
    if [ -f "$W/user_$f" ]; then cp "$W/user_$f" "$B/$f"; else rm -f "$B/$f"; fi
  done
  rm -rf "$W"
}
trap cleanup EXIT

# -- 0. the source tree: the packages find build/lib by themselves ---------
# (README: PYTHONPATH=pshuffle/python mpirun -np 2 /usr/bin/python3 pshuffle/examples/train.py)
if [ $pyok = 1 ] && [ "$(cd "$B" && pwd -P)" = "$(cd "$S" && pwd -P)/build" ]; then
  (cd "$W" && env -u PSHUFFLE_LIB -u HETMEM_LIB PYTHONPATH="$S/pshuffle/python:$S/python" PYTHONDONTWRITEBYTECODE=1 \
    "$PY" -c "
import os, sys, hetmem._lib, pshuffle._lib
b = os.path.realpath(sys.argv[1])
assert os.path.realpath(pshuffle._lib._find()) == os.path.realpath(b + '/lib/libpshuffle.so'), pshuffle._lib._find()
assert os.path.realpath(hetmem._lib.find()) == os.path.realpath(b + '/lib/libhetmem.so'), hetmem._lib.find()
hetmem._lib.load()
" "$B") || fail "the packages in the source tree do not find $B/lib"
  echo "ok: source-tree packages find $B/lib"
fi

# -- 1. DESTDIR and uninstall -----------------------------------------------
# As make install does it (scripts/install.sh): /opt exists, /opt/hetmem not.
mkdir -p "$W/stage/opt"
DESTDIR="$W/stage" bash "$S/scripts/install.sh" "$B" /opt/hetmem > "$W/install.log" 2>&1 ||
  { cat "$W/install.log"; fail "install.sh with DESTDIR"; }
cp "$B/install_manifest.txt" "$W/stage.manifest"
cp "$B/install_dirs.txt" "$W/stage.dirs"
grep -qx /opt/hetmem "$W/stage.dirs" && ! grep -qx /opt "$W/stage.dirs" ||
  fail "install_dirs.txt lists the created prefix and not /opt: $(head -3 "$W/stage.dirs")"
for f in bin/hetmem bin/hetmem-cc bin/pshuffle lib/libhetmem.so "lib/libhetmem.so.${ver%%.*}" \
  lib/libhetmem_inst.a lib/libhetmem_preload.so lib/libpshuffle.so include/hetmem/trace.h include/pshuffle.h \
  lib/pkgconfig/hetmem.pc lib/pkgconfig/pshuffle.pc lib/cmake/hetmem/hetmemConfig.cmake \
  lib/cmake/pshuffle/pshuffleConfig.cmake share/hetmem/machines/knl-mcdram.json share/man/man1/hetmem.1 \
  share/man/man1/hetmem-sim.1 share/man/man1/hetmem-cc.1 share/man/man1/pshuffle.1 \
  "share/modulefiles/hetmem/$ver" "share/modulefiles/hetmem/$ver.lua" share/doc/hetmem/README.md; do
  [ -e "$W/stage/opt/hetmem/$f" ] || fail "DESTDIR install lacks $f"
done
grep -q "^/opt/hetmem/bin/hetmem$" "$W/stage.manifest" || fail "manifest does not list /opt/hetmem/bin/hetmem"
# Python writes byte-code beside the modules it imports.
if [ $pyok = 1 ]; then
  (cd "$W" && env -u PYTHONDONTWRITEBYTECODE PYTHONPATH="$(ls -d "$W"/stage/opt/hetmem/lib/python3*/dist-packages)" \
    "$PY" -c "import hetmem, hetmem.estimate, hetmem.optimize, pshuffle") || fail "import from the staged prefix"
  [ -n "$(find "$W/stage" -name '*.pyc' | head -1)" ] || fail "importing the staged packages wrote no byte-code"
fi
DESTDIR="$W/stage" bash "$S/scripts/uninstall.sh" "$W/stage.manifest" "$W/stage.dirs" > "$W/uninstall.log" ||
  fail "uninstall.sh: $(cat "$W/uninstall.log")"
left=$(find "$W/stage" ! -type d | head -3)
[ -z "$left" ] || fail "uninstall left files: $left"
left=$(find "$W/stage" -mindepth 1 | grep -vx "$W/stage/opt" | head -3)
[ -z "$left" ] || fail "uninstall left folders it created: $left"
[ -d "$W/stage/opt" ] || fail "uninstall removed /opt, which existed before the install"
echo "ok: DESTDIR install and uninstall ($(wc -l < "$W/stage.manifest") files, byte-code and the folders it created; $(cat "$W/uninstall.log"))"

# -- 2. a prefix ----------------------------------------------------------------
cmake --install "$B" --prefix "$W/a" > "$W/install.log" 2>&1 || { cat "$W/install.log"; fail "cmake --install"; }
readelf -d "$W/a/bin/pshuffle" | grep -q 'R.*PATH.*\$ORIGIN/\.\./lib' || fail "bin/pshuffle has no \$ORIGIN/../lib RPATH"
# A preset that exists only in the prefix: found from the binary's location.
cp "$W/a/share/hetmem/machines/knl-mcdram.json" "$W/a/share/hetmem/machines/prefix-only.json"

# The user's files, kept outside the prefix.
mkdir -p "$W/user"
cat > "$W/user/app.c" << 'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <hetmem/hetmem.h>
int main(void)
{
    size_t n = 1 << 16;
    double *v = malloc(n * sizeof *v), s = 0;
    if (!v) return 1;
    hetmem_name(v, "vec");
    for (size_t i = 0; i < n; i++) v[i] = (double)i;
    for (size_t i = 0; i < n; i++) s += v[i];
    printf("sum %.0f\n", s);
    free(v);
    return 0;
}
EOF
cat > "$W/user/ps.c" << 'EOF'
#include <stdio.h>
#include <pshuffle.h>
int main(void) { printf("%llu\n", (unsigned long long)ps_plan_count(0.3, 100)); return 0; }
EOF
cat > "$W/user/hm.c" << 'EOF'
#include <stdio.h>
#include <hetmem/error.h>
#include <hetmem/sim.h>
int main(void)
{
    hm_sim_machine_t *m = NULL;
    int rc = hm_sim_machine_load(&m, HETMEM_MACHINES_DIR "/knl-mcdram.json");
    if (rc < 0) { printf("error %s\n", hm_strerror(rc)); return 1; }
    printf("%s %d\n", hm_sim_machine_name(m), hm_sim_machine_ndevices(m));
    hm_sim_machine_close(m);
    return 0;
}
EOF
cat > "$W/user/CMakeLists.txt" << 'EOF'
cmake_minimum_required(VERSION 3.20)
project(user C)
find_package(hetmem REQUIRED)
find_package(pshuffle REQUIRED)
add_executable(hm hm.c)
target_link_libraries(hm PRIVATE hetmem::hetmem)
target_compile_definitions(hm PRIVATE HETMEM_MACHINES_DIR="${HETMEM_MACHINES_DIR}")
add_executable(ps ps.c)
target_link_libraries(ps PRIVATE pshuffle::pshuffle)
EOF

mpiflags="--oversubscribe --bind-to none --mca btl self,vader"
[ "$(id -u)" = 0 ] && mpiflags="--allow-run-as-root $mpiflags"

# The checks, run in a clean environment with the module loaded.
cat > "$W/checks.sh" << 'EOF'
set -u
P=$1 ver=$2 pyok=$3 mpiflags=$4 U=$5
fail() { echo "FAIL ($P): $*"; exit 1; }
[ "$HETMEM_ROOT" = "$P" ] || fail "HETMEM_ROOT=$HETMEM_ROOT"
[ "$(command -v hetmem)" = "$P/bin/hetmem" ] || fail "hetmem on PATH is $(command -v hetmem)"
[ "$(hetmem --version)" = "hetmem $ver" ] || fail "hetmem --version: $(hetmem --version)"
[ "$(hetmem-cc --version)" = "hetmem-cc $ver" ] || fail "hetmem-cc --version: $(hetmem-cc --version)"
[ "$(hetmem-c++ --version)" = "hetmem-c++ $ver" ] || fail "hetmem-c++ --version: $(hetmem-c++ --version 2>&1)"
[ "$(pshuffle --version)" = "pshuffle $ver" ] || fail "pshuffle --version: $(pshuffle --version 2>&1)"
ldd "$P/bin/pshuffle" | grep -q "libpshuffle.so.* => $P/bin/../lib/" || fail "pshuffle does not load $P/lib/libpshuffle.so"
man hetmem 2> /dev/null | grep -Eq "heterogeneous-memory +placement" || fail "man hetmem"
man hetmem-sim 2> /dev/null | grep -q -- "--placement" || fail "man hetmem-sim"
man pshuffle-plan 2> /dev/null | grep -q -- "--ranks" || fail "man pshuffle-plan"
manpath 2> /dev/null | tr : '\n' | grep -qx /usr/share/man || fail "the module hides the system's man pages (MANPATH=$MANPATH)"
echo "ok: versions, man pages"

cd "$U" || exit 1
rm -rf cm app.sim *.json ps hm
HETMEM_CC_VERBOSE=1 hetmem-cc -O1 app.c -o app.sim 2> cc.log || { cat cc.log; fail "hetmem-cc"; }
grep -q "$P/lib/libhetmem_inst.a" cc.log || fail "hetmem-cc did not link $P/lib/libhetmem_inst.a"
for m in knl-mcdram prefix-only; do
  hetmem sim -m $m --json $m.json -- ./app.sim > sim.out 2>&1 || { cat sim.out; fail "hetmem sim -m $m"; }
  grep -q "^sum 2147450880$" sim.out || fail "app.sim output: $(head -3 sim.out)"
  python3 - $m.json << 'PYEOF' || fail "hetmem sim -m $m: results"
import json, sys
r = json.load(open(sys.argv[1]))
vec = [o for o in r["objects"] if o["name"] == "vec"]
assert r["exit_status"] == 0 and r["loads"] > 0, r
assert vec and vec[0]["bytes_read"] >= 8 * 65536, vec
PYEOF
done
printf '%s\n' '#include <vector>' 'int main() { std::vector<double> v(1 << 16, 1.0); double s = 0;' \
  '  for (double x : v) s += x; return s == 65536 ? 0 : 1; }' > cxx.cc
hetmem-c++ -O1 cxx.cc -o cxx.sim 2> cxx.log || { cat cxx.log; fail "hetmem-c++"; }
hetmem sim -m knl-mcdram --json cxx.json -- ./cxx.sim > cxx.out 2>&1 || { cat cxx.out; fail "hetmem sim (C++)"; }
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert any(o["bytes_allocated"] == 8 << 16 and (o["source"] or "").startswith("cxx.cc:2") for o in r["objects"]), r["objects"]' cxx.json \
  || fail "hetmem-c++: the vector is not an object named cxx.cc:2"
rm -f cxx.cc cxx.sim cxx.json cxx.out cxx.log
echo "ok: hetmem-cc, hetmem-c++ and hetmem sim (presets from the prefix)"
# hetmem record finds libhetmem_preload.so next to itself.
hetmem record -b none -o rec.hmt -- /bin/true > rec.out 2>&1 || { cat rec.out; fail "hetmem record"; }
hetmem trace info rec.hmt | grep -q "producer *hetmem-record $ver" || fail "hetmem trace info"
echo "ok: hetmem record (preload library from the prefix)"

[ "$(pkg-config --modversion pshuffle)" = "$ver" ] || fail "pkg-config --modversion pshuffle"
[ "$(pkg-config --modversion hetmem)" = "$ver" ] || fail "pkg-config --modversion hetmem"
cc ps.c -o ps $(pkg-config --cflags --libs pshuffle) -Wl,-rpath,"$(pkg-config --variable=libdir pshuffle)" ||
  fail "cc with pkg-config pshuffle"
[ "$(./ps)" = 30 ] || fail "pkg-config pshuffle program: $(./ps 2>&1)"
cmake -S . -B cm > cm.log 2>&1 && cmake --build cm >> cm.log 2>&1 || { cat cm.log; fail "find_package(hetmem) build"; }
[ "$(./cm/hm)" = "knl-mcdram 2" ] || fail "find_package(hetmem) program: $(./cm/hm 2>&1)"
[ "$(./cm/ps)" = 30 ] || fail "find_package(pshuffle) program: $(./cm/ps 2>&1)"
echo "ok: pkg-config and find_package builds"

[ "$pyok" = 1 ] || { echo "skip: python checks ($PY lacks torch, mpi4py, numpy or setuptools)"; exit 0; }
/usr/bin/python3 - "$P" "$ver" << 'PYEOF' || fail "python packages"
import sys
P, ver = sys.argv[1], sys.argv[2]
import hetmem, hetmem._lib, pshuffle, pshuffle._lib
for mod in (hetmem, pshuffle):
    assert mod.__file__.startswith(P + "/lib/"), mod.__file__
    assert mod.__version__ == ver, mod.__version__
assert hetmem._lib.find().startswith(P + "/lib/libhetmem.so"), hetmem._lib.find()
assert hetmem._lib.load().hm_strerror is not None
assert pshuffle._lib._find().startswith(P + "/lib/libpshuffle.so"), pshuffle._lib._find()
assert pshuffle.plan_count(0.3, 100) == 30
PYEOF
echo "ok: /usr/bin/python3 imports hetmem and pshuffle from the prefix"
# (a hang guard: two torch ranks take many times their CPU time on a loaded machine)
timeout 300 mpirun $mpiflags -np 2 /usr/bin/python3 "$P/share/doc/hetmem/examples/pshuffle/train.py" \
  --epochs 2 --samples 512 --workers 0 > train.out 2>&1 || { cat train.out; fail "train.py"; }
grep -q "^epoch 1: loss" train.out || { cat train.out; fail "train.py did not train two epochs"; }
grep -Eq "^last exchange: sent \[([1-9][0-9]*), \1\] received \[\1, \1\]" train.out || { cat train.out; fail "train.py exchange"; }
echo "ok: mpirun -np 2 /usr/bin/python3 train.py (2 epochs)"
EOF

cat > "$W/venv-checks.sh" << 'EOF'
set -u
P=$1 ver=$2 V=$3
# The venv's own copies, not the prefix's through the module's PYTHONPATH.
unset PYTHONPATH
"$V/bin/python" - "$P" "$V" "$ver" << 'PYEOF' || { echo "FAIL: venv packages"; exit 1; }
import sys
P, V, ver = sys.argv[1:]
import hetmem, hetmem._lib, pshuffle, pshuffle._lib
from importlib.metadata import version
for mod in (hetmem, pshuffle):
    assert mod.__file__.startswith(V + "/lib/"), mod.__file__
    assert mod.__version__ == ver and version(mod.__name__) == ver, (mod.__version__, version(mod.__name__))
# Found next to the programs on PATH (the module's PREFIX/bin).
assert hetmem._lib.find().startswith(P + "/lib/libhetmem.so"), hetmem._lib.find()
assert pshuffle._lib._find().startswith(P + "/lib/libpshuffle.so"), pshuffle._lib._find()
hetmem._lib.load()
assert pshuffle.plan_count(0.3, 100) == 30
PYEOF
echo "ok: pip install into a --system-site-packages venv"
EOF

cat > "$W/clean.sh" << 'EOF'
# clean.sh LMOD_INIT PREFIX VERSION SRC BUILD CHECKS ARGS...: loads the
# module in this (clean) environment and runs CHECKS PREFIX VERSION ARGS...
set -u
lmod=$1 P=$2 ver=$3 src=$4 build=$5 checks=$6
shift 6
source "$lmod" || exit 1
module use "$P/share/modulefiles" && module load "hetmem/$ver" || { echo "FAIL: module load"; exit 1; }
for v in PATH MANPATH PKG_CONFIG_PATH CMAKE_PREFIX_PATH PYTHONPATH LD_LIBRARY_PATH; do
  case "${!v:-}" in *"$src"* | *"$build"*) echo "FAIL: $v names the source or build tree: ${!v}"; exit 1 ;; esac
done
bash "$checks" "$P" "$ver" "$@"
EOF

# run_clean PREFIX CHECKS ARGS...: CHECKS with only Lmod and the module's settings.
run_clean() {
  local p=$1 checks=$2
  shift 2
  env -i HOME="$W/home" USER="${USER:-user}" PATH=/usr/bin:/bin LANG=C.UTF-8 TMPDIR="$W" \
    bash --noprofile --norc "$W/clean.sh" "$LMOD_INIT" "$p" "$ver" "$S" "$B" "$checks" "$@" > "$W/run.log" 2>&1
  local rc=$?
  cat "$W/run.log"
  [ $rc = 0 ] && ! grep -q '^FAIL' "$W/run.log"
}
mkdir -p "$W/home"
run_clean "$W/a" "$W/checks.sh" "$pyok" "$mpiflags" "$W/user" || fail "installed prefix (Lua module file)"

# pip install of both packages (copies of the source folders: pip builds in
# the folder it is given) into a venv that sees Debian's torch and mpi4py.
if [ $pyok = 1 ]; then
  "$PY" -m venv --system-site-packages "$W/venv" || fail "python3 -m venv"
  cp -rL "$S/python" "$W/hetmem-py" && cp -rL "$S/pshuffle/python" "$W/pshuffle-py" || fail "copy packages"
  rm -rf "$W"/*-py/*/__pycache__ "$W"/*-py/build "$W"/*-py/*.egg-info
  "$W/venv/bin/pip" install -q --no-index --no-build-isolation --no-deps "$W/hetmem-py" "$W/pshuffle-py" \
    > "$W/pip.log" 2>&1 || { cat "$W/pip.log"; fail "pip install"; }
  run_clean "$W/a" "$W/venv-checks.sh" "$W/venv" || fail "pip-installed packages"
fi

# -- 3. the prefix moved elsewhere, loaded with the Tcl module file ----------
cp "$B/install_manifest.txt" "$W/a.manifest"
mv "$W/a" "$W/moved"
# Its manifest names the old prefix: uninstall says so and removes nothing.
if bash "$S/scripts/uninstall.sh" "$W/a.manifest" > "$W/uninstall.log" 2>&1; then
  fail "uninstall.sh with the manifest of a moved prefix succeeded: $(cat "$W/uninstall.log")"
fi
grep -q "^uninstall: $W/a: no such folder: .*moved or removed; nothing removed" "$W/uninstall.log" ||
  fail "uninstall.sh of a moved prefix: $(cat "$W/uninstall.log")"
[ -x "$W/moved/bin/hetmem" ] || fail "uninstall.sh of a moved prefix removed files"
echo "ok: uninstall of a moved prefix fails and says so"
rm "$W/moved/share/modulefiles/hetmem/$ver.lua"
run_clean "$W/moved" "$W/checks.sh" "$pyok" "$mpiflags" "$W/user" || fail "moved prefix (Tcl module file)"
echo PASS
