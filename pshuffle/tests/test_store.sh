#!/usr/bin/env bash
# A directory store in a directory other users can write to, and two jobs
# on one store. Every mpirun is under `timeout`.
set -u
W="$PS_WORK/store.d"
rm -rf "$W" && mkdir -p "$W"
fail() { echo "FAIL: $*"; exit 1; }
job() { timeout 120 $PS_MPIRUN $PS_MPI_FLAGS -n 2 "$PS_EPOCHS" --samples 50 "$@"; }
# The job must fail, with one line from the library naming the directory.
refused() {
  local name=$1 pattern=$2; shift 2
  if job "$@" > "$W/$name.log" 2>&1; then cat "$W/$name.log"; fail "$name: the job ran"; fi
  local n; n=$(grep -cE "rank 0: open: .*$pattern" "$W/$name.log")
  [ "$n" = 1 ] || { cat "$W/$name.log"; fail "$name: want one line matching '$pattern', got $n"; }
  grep -E "rank 0: open: " "$W/$name.log"
}
root=$(id -u)
as_other() { [ "$root" = 0 ] && chown -h nobody "$@"; }

# The attack: the store's parent is a sticky world-writable directory (as
# /tmp); another user made rank-00000 (mode 777) and planted the names of
# the manifests' temporary files as links to a private file of this user.
mkdir -m 1777 "$W/shared"
victim="$W/victim"
echo secret > "$victim" && chmod 600 "$victim"
S="$W/shared/store"
mkdir -p "$S/rank-00000" && chmod 777 "$S/rank-00000"
for e in 0 1 2 3; do ln -s "$victim" "$S/rank-00000/.tmp.manifest.$(printf %010d $e)"; done
as_other "$S/rank-00000" "$S"/rank-00000/.tmp.*
if [ "$root" = 0 ]; then
  refused attack "store directory $S/rank-00000 is owned by uid [0-9]+, not by this user" --dir "$S" --epochs 3
else
  refused attack "store directory $S/rank-00000 is writable by group or others \(mode 0777\)" --dir "$S" --epochs 3
fi
[ "$(cat "$victim")" = secret ] || fail "the victim file was overwritten"
[ -e "$S/rank-00001/manifest.0000000000" ] && fail "rank 1 wrote its store although rank 0 refused"

# The same directory made by this user but left writable by others.
as_other() { :; }
rm -rf "$S" && mkdir -p "$S/rank-00000" && chmod 775 "$S/rank-00000"
refused groupw "store directory $S/rank-00000 is writable by group or others \(mode 0775\)" --dir "$S" --epochs 2
# The store directory itself another user's.
if [ "$root" = 0 ]; then
  rm -rf "$S" && mkdir -m 755 "$S" && chown nobody "$S"
  refused otherroot "store directory $S is owned by uid" --dir "$S" --epochs 2
fi
# rank-00000 a link to a directory elsewhere.
rm -rf "$S" && mkdir -p "$S" "$W/elsewhere" && ln -s "$W/elsewhere" "$S/rank-00000"
refused link "store directory $S/rank-00000 is a symbolic link" --dir "$S" --epochs 2
[ -z "$(ls -A "$W/elsewhere")" ] || fail "files written through the link"

# A fresh store: private directories, and it works.
rm -rf "$S"
job --dir "$S" --epochs 2 > "$W/fresh.log" 2>&1 || { cat "$W/fresh.log"; fail "fresh store"; }
for d in "$S" "$S/rank-00000" "$S/rank-00001"; do
  m=$(stat -c %a "$d"); [ "$m" = 700 ] || fail "$d has mode $m, want 700"
done

# Two jobs on one store: the second refuses to start while the first runs,
# naming the holder; the first is undisturbed; the lock goes with the job.
# The first job waits after ps_open, its locks taken, until the file
# $hold exists (--hold), so it is alive while the second tries whatever
# the load; kill -0 of it and of the pids its locks name, before and after,
# shows it. Any exit from here on creates $hold, so that the first job
# never waits for its timeout.
S2="$W/two"
hold="$W/hold"
rm -f "$hold"
trap 'touch "$hold"' EXIT
job --dir "$S2" --samples 50 --epochs 5 --hold "$hold" > "$W/first.log" 2>&1 &
first=$!
# Held, it cannot end before it has taken both locks: the wait ends with
# the locks, or with the job (at the latest its timeout).
until [ -s "$S2/rank-00000/lock" ] && [ -s "$S2/rank-00001/lock" ]; do
  kill -0 $first 2> /dev/null || break
  sleep 0.1
done
holder=$(cat "$S2/rank-00000/lock" 2> /dev/null)
[ -n "$holder" ] || { cat "$W/first.log"; fail "the first job ended without taking the locks"; }
echo "lock: $holder"
pids=$(sed -n 's/^pid \([0-9][0-9]*\) on host .*/\1/p' "$S2"/rank-0000[01]/lock)
[ "$(echo $pids | wc -w)" = 2 ] || fail "lock files name no pids: $(cat "$S2"/rank-0000[01]/lock)"
kill -0 $first $pids || { cat "$W/first.log"; fail "the first job (pids $pids) is not running while it holds the store"; }
refused second "store $S2 is in use by another job: $holder holds the lock rank-00000/lock" --dir "$S2" --epochs 5
kill -0 $first $pids || { cat "$W/first.log"; fail "the first job (pids $pids) ended while held"; }
touch "$hold"
wait $first || { cat "$W/first.log"; fail "the first job failed"; }
"$PSHUFFLE" verify "$S2" > "$W/verify.log" 2>&1 || { cat "$W/verify.log"; fail "verify after two jobs"; }
grep -qE "^epoch +5$" "$W/verify.log" || { cat "$W/verify.log"; fail "the store is not the first job's epoch 5"; }
job --dir "$S2" --epochs 6 > "$W/third.log" 2>&1 || { cat "$W/third.log"; fail "resume after the first job ended"; }

# verify on a store holding a FIFO where a segment file should be: refused
# at once, not blocked waiting for a writer.
f=$(ls "$S2/rank-00000/"seg.* | head -1)
rm "$f" && mkfifo "$f"
# A blocked open never returns, so the limit only has to exceed what
# verify needs on this small store, under any load; how long verify took
# is not checked (wall time on a loaded machine says nothing about
# blocking).
timeout 60 "$PSHUFFLE" verify "$S2" > "$W/fifo.log" 2>&1
rc=$?
[ $rc -ne 124 ] || { cat "$W/fifo.log"; fail "verify still running after 60 s on a FIFO (blocked in open)"; }
[ $rc -ne 0 ] || { cat "$W/fifo.log"; fail "verify passed a FIFO"; }
grep -q "not a regular file" "$W/fifo.log" || { cat "$W/fifo.log"; fail "verify: FIFO not named"; }
echo "verify with a FIFO: refused (rc $rc)"
echo "pshuffle_store: ok"
