#!/usr/bin/env bash
# The runtimes read their settings with secure_getenv: a hetmem-cc program
# with file capabilities, run by an unprivileged user (secure-execution
# mode), ignores HETMEM_SIM_* and writes no report where the caller said.
# Needs root (setcap, setpriv); skips otherwise.
set -u
: "${HETMEM_BIN:?}" "${HETMEM_BUILD:?}" "${HETMEM_SRC:?}"
K="$HETMEM_BUILD/tests/sim-kernels"
[ "$(id -u)" = 0 ] || { echo "skip: needs root for setcap and setpriv"; exit 77; }
command -v setcap > /dev/null && command -v setpriv > /dev/null || { echo "skip: setcap/setpriv missing"; exit 77; }
[ -x "$K/nops.sim" ] || { echo "skip: sim kernels not built"; exit 77; }
W=$(mktemp -d /tmp/hetmem-secure.XXXXXX)
trap 'rm -rf "$W"' EXIT
chmod 1777 "$W"
cp "$K/nops.sim" "$W/nops.sim"
fail=0
run_as_nobody() {
  HETMEM_SIM_MACHINE="$HETMEM_SRC/share/machines/ddr5.json" HETMEM_SIM_RESULT="$W/$1.json" \
    setpriv --reuid=nobody --regid=nogroup --clear-groups "$W/nops.sim" 1 1000 > /dev/null 2>&1
}
# Control: without capabilities the runtime runs and writes its report.
run_as_nobody plain
[ -s "$W/plain.json" ] && echo "ok: runtime active in an ordinary process" \
  || { echo "FAIL: no report from the ordinary run"; fail=1; }
if ! setcap cap_net_bind_service+ep "$W/nops.sim" 2> /dev/null; then
  echo "skip: setcap not supported on this file system"; exit 77
fi
run_as_nobody secure
[ ! -e "$W/secure.json" ] && echo "ok: secure-execution process ignores HETMEM_SIM_*" \
  || { echo "FAIL: the capability-raised program wrote $W/secure.json"; fail=1; }
exit $fail
