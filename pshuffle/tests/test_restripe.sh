#!/usr/bin/env bash
# A directory store resumed on another number of ranks (2 -> 3 -> 1 -> 4 -> 2):
# every sample exactly once after each resume and the exchange that
# follows, `pshuffle verify` sound, no staging directory left; SIGKILL of
# rank 0 before and after the swap of the rewritten store; a rank
# directory missing on this node refused with one line, the store untouched.
set -u
W="$PS_WORK/restripe.d"
rm -rf "$W" && mkdir -p "$W"
N=101
run() { local m=$1; shift; timeout 60 $PS_MPIRUN $PS_MPI_FLAGS -n "$m" "$PS_BIN/mpi_restripe" --n $N "$@"; }
fail() { echo "FAIL: $*"; exit 1; }
ranks() { ls -d "$1"/rank-* 2> /dev/null | wc -l; }
sound() { "$PSHUFFLE" verify "$1" > "$1.verify" 2>&1 || { cat "$1.verify"; fail "$2: store damaged"; }; }

S="$W/s"
run 2 --dir "$S" --make --epochs 3 > "$W/make.log" 2>&1 || { cat "$W/make.log"; fail "making the 2-rank store"; }
sound "$S" "made"
e=3
for m in 3 1 4 2; do
  run "$m" --dir "$S" --epoch $e > "$W/r$m.log" 2>&1 || { cat "$W/r$m.log"; fail "resume on $m ranks"; }
  grep -q "resumed at epoch $e: $m ranks hold $N samples" "$W/r$m.log" || { cat "$W/r$m.log"; fail "$m ranks: holdings"; }
  grep -q "after the exchange of epoch $e: $m ranks hold $N samples" "$W/r$m.log" || fail "$m ranks: after the exchange"
  sound "$S" "$m ranks"
  [ "$(ranks "$S")" -eq "$m" ] || { ls "$S"; fail "$m ranks: $(ranks "$S") rank directories"; }
  [ ! -e "$W/.s.pshuffle-restripe" ] || fail "$m ranks: the staging directory was left"
  grep "resumed at epoch" "$W/r$m.log"
  e=$((e + 1))
done

# SIGKILL of rank 0 with the rewritten store staged (9) or swapped in (10):
# the store is whole, old or new; the next open finishes the job's resume.
for p in 9 10; do
  S2="$W/c$p"
  run 2 --dir "$S2" --make --epochs 1 > "$S2.log" 2>&1 || { cat "$S2.log"; fail "making c$p"; }
  run 3 --dir "$S2" --crash $p > "$S2.crash.log" 2>&1 && fail "point $p: the run with a crash exited 0"
  grep -q "crashing at point $p" "$S2.crash.log" || { cat "$S2.crash.log"; fail "point $p not reached"; }
  [ -d "$W/.c$p.pshuffle-restripe" ] || fail "point $p: no staging directory (the crash came too late)"
  sound "$S2" "crash at point $p"
  want=$([ $p = 9 ] && echo 2 || echo 3)
  [ "$(ranks "$S2")" -eq "$want" ] || fail "point $p: $(ranks "$S2") rank directories, expected $want"
  run 3 --dir "$S2" --epoch 1 > "$S2.log2" 2>&1 || { cat "$S2.log2"; fail "point $p: resume after the crash"; }
  grep -q "resumed at epoch 1: 3 ranks hold $N samples" "$S2.log2" || { cat "$S2.log2"; fail "point $p: holdings"; }
  [ ! -e "$W/.c$p.pshuffle-restripe" ] || fail "point $p: the staging directory was left after the resume"
  sound "$S2" "point $p, resumed"
  echo "crash at point $p: store whole ($want rank directories), resumed on 3 ranks, every sample once"
done

# A rank directory that is not on this node (as on another node's disk):
# refused with one line saying what to do, nothing changed.
S3="$W/gone"
run 3 --dir "$S3" --make --epochs 1 > "$S3.log" 2>&1 || { cat "$S3.log"; fail "making the 3-rank store"; }
mv "$S3/rank-00002" "$W/rank-00002.away"
before=$(cd "$S3" && find . -type f ! -name lock | sort | xargs md5sum)
run 2 --dir "$S3" > "$S3.log2" 2>&1 && fail "a store with a rank directory missing was resumed on 2 ranks"
grep -q "store $S3 was written by 3 ranks and $S3/rank-00002 is not on this node (.*, rank 0): resuming on 2 ranks needs every rank directory in one filesystem; gather them there, or run with 3 ranks" "$S3.log2" ||
  { cat "$S3.log2"; fail "missing rank directory: unclear error"; }
after=$(cd "$S3" && find . -type f ! -name lock | sort | xargs md5sum)
[ "$before" = "$after" ] || fail "the refused resume changed the store"
mv "$W/rank-00002.away" "$S3/rank-00002"
run 2 --dir "$S3" --epoch 1 > "$S3.log3" 2>&1 || { cat "$S3.log3"; fail "resume once the directory is back"; }
echo "rank directory missing: refused with one line, store unchanged; resumed once it was back"
echo PASS
