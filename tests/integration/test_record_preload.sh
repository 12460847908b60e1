#!/usr/bin/env bash
# The preload (with the soft sampler at 2 kHz) must not change what programs
# do: OpenMP + pthreads, fork + exec, C++, python3 with numpy, sort.
# Each runs plain and under `hetmem record`; outputs must match, and the
# recorded trace must hold the expected events.
# In a sanitizer build the preload has UBSan but not ASan (both want to
# own malloc), and the CLI has both.
set -u
. "$HETMEM_SRC/tests/integration/record_lib.sh"
build_attr || exit 1
cc_prog threads -fopenmp -pthread || exit 1
cc_prog forkexec || exit 1
c++ -O2 -o "$WORK/cxx" "$PROGS/cxx.cc" || exit 1

# The preload exports the interposed functions and hm_rt_* only (the core
# linked into it, hm_backend_* for one, used to leak into every program).
lib="$HETMEM_BUILD/lib/libhetmem_preload.so"
extra=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v -x -E \
  'hm_rt_[a-z_]+|malloc|calloc|realloc|free|cfree|posix_memalign|aligned_alloc|memalign|valloc|pvalloc|malloc_usable_size|mmap|munmap|pthread_create|exec[lv]p?e?|_exit|_Exit|sleep|usleep|nanosleep|clock_nanosleep|poll|ppoll|select|pselect|epoll_wait|epoll_pwait|pause|sigsuspend' | tr '\n' ' ')
[ -z "$extra" ] && ok "preload exports only its interface" || bad "preload exports more: $extra"

same() { # same NAME -- CMD...: plain vs recorded output, with a timeout against deadlocks
  local name=$1; shift 2
  timeout 60 "$@" > "$WORK/$name.plain" 2>&1; local prc=$?
  timeout 60 "$H" record -b soft -F 2000 -o "$WORK/$name.hmt" -- "$@" > "$WORK/$name.rec" 2> "$WORK/$name.err"; local rrc=$?
  if [ $rrc = 124 ]; then bad "$name: timed out (deadlock?)"; return 1; fi
  if [ $prc != $rrc ]; then bad "$name: exit $rrc under record, $prc plain"; return 1; fi
  if ! cmp -s "$WORK/$name.plain" "$WORK/$name.rec"; then
    bad "$name: output changed"; diff "$WORK/$name.plain" "$WORK/$name.rec" | head -5; return 1
  fi
  "$WORK/trace_attr" "$WORK/$name.hmt" > "$WORK/$name.attr" || { bad "$name: trace unreadable"; return 1; }
  ok "$name: same output and exit $prc; $(tail -1 "$WORK/$name.err" | sed 's/.*: \([0-9]* samples\)/\1/')"
}
same threads -- "$WORK/threads"
allocs=$(awk '/^allocs/ {print $2}' "$WORK/threads.attr")
[ "${allocs:-0}" -ge 64 ] && ok "threads: $allocs allocations tracked" || bad "threads: only ${allocs:-0} allocations tracked"
OMP_NUM_THREADS=4 same threads4 -- "$WORK/threads"

same forkexec -- "$WORK/forkexec"
# 50 tracked allocations each in the parent, the exec'd image and the
# fork-only child (which leaves through _exit): 150 in the one trace.
grep -q " 150 allocs, 150 frees," "$WORK/forkexec.err" && grep -q " 4 processes" "$WORK/forkexec.err" \
  && ok "forkexec: parent, exec'd image and _exit'ing child all recorded" \
  || bad "forkexec: $(tail -1 "$WORK/forkexec.err")"

same cxx -- "$WORK/cxx"
# C++ sites are told apart by the program's own frame, not operator new's,
# and that frame is named from the program's symbol table (main is not
# exported, so dladdr alone leaves it nameless).
"$H" trace objects "$WORK/cxx.hmt" > "$WORK/cxx.obj" 2>&1 || bad "cxx: trace objects failed"
rows=$(grep -c '^0x' "$WORK/cxx.obj")
newrows=$(grep '^0x' "$WORK/cxx.obj" | grep -c '_Zn[wa]\|libstdc++')
own=$(grep '^0x' "$WORK/cxx.obj" | grep -c ' cxx+0x[0-9a-f]* main$')
[ "$rows" -ge 2 ] && [ "$newrows" = 0 ] && [ "$own" = "$rows" ] \
  && ok "cxx: $rows sites, each named by main, the program's own frame" \
  || { bad "cxx: $rows sites, $newrows named by operator new, $own by the program"; grep '^0x' "$WORK/cxx.obj" | head -5; }
same numpy -- /usr/bin/python3 -c 'import numpy as np; a = np.arange(3_000_000, dtype=np.float64); b = np.sqrt(a) @ np.ones_like(a); print(round(float(b), 3), np.linalg.inv(np.eye(50) * 2)[0, 0])'

# Python's subprocess spawns through vfork + execve: the child must not
# touch the parent's collector or spool.
same pysub -- /usr/bin/python3 -c 'import subprocess; print(subprocess.run(["echo", "hi"], capture_output=True).stdout, subprocess.run(["sh", "-c", "exit 2"]).returncode)'

# sort on a ~10 MB file: a stock Debian tool with its own memory management.
/usr/bin/python3 -c 'import random; random.seed(1); print("\n".join(str(random.random()) for _ in range(500_000)))' > "$WORK/in.txt"
same sort -- sort "$WORK/in.txt"

# LD_PRELOAD alone (no recording): the interposer passes everything through.
LD_PRELOAD="$HETMEM_BUILD/lib/libhetmem_preload.so" "$WORK/threads" > "$WORK/pl.out" 2>&1 && cmp -s "$WORK/pl.out" "$WORK/threads.plain" \
  && ok "plain LD_PRELOAD: same output" || bad "plain LD_PRELOAD changed output"
exit $fail
