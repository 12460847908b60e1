#!/usr/bin/env bash
# Bad input is refused on every rank with a clear message, never a hang:
# every mpirun is under `timeout`.
set -u
W="$PS_WORK/bad.d"
mountpoint -q "$W/tiny" 2> /dev/null && umount "$W/tiny"
rm -rf "$W" && mkdir -p "$W"
fail() { echo "FAIL: $*"; exit 1; }
run() { local n=$1; shift; timeout 60 $PS_MPIRUN $PS_MPI_FLAGS -n "$n" "$PS_BIN/mpi_bad" "$@"; }
step() { local log="$W/$1.log"; shift; if ! "$@" > "$log" 2>&1; then cat "$log"; fail "$*"; fi; grep '^\[rank 0\]' "$log" | head -2; }

for m in seed q qrange qrange1 window env epoch dup state dupx loneend; do step "$m" run 3 "$m"; done
step allocbegin env PSHUFFLE_TEST_FAIL_ALLOC=1:begin timeout 30 $PS_MPIRUN $PS_MPI_FLAGS -x PSHUFFLE_TEST_FAIL_ALLOC \
  -n 3 "$PS_BIN/mpi_bad" allocbegin

# Failures that leave no way to finish the exchange end the whole job,
# with a message naming the rank and the error. A job that is not ended
# would run until `timeout` (nothing in it ends by itself: the stalled
# rank of `stall` waits an hour, mpi_bad.c), so its limit only tells an
# abort from a hang and can be far above the library's timeouts (3 and
# 10 s) however slow a loaded machine makes the abort; -k: mpirun and its
# ranks are killed if they outlive the TERM.
expect_abort() {
  local mode=$1 words=$2 n=$3; shift 3
  local log="$W/$mode.log" t0=$SECONDS
  env PSHUFFLE_TEST_CORRUPT= "$@" timeout -k 10 120 $PS_MPIRUN $PS_MPI_FLAGS -x PSHUFFLE_TEST_FAIL_ALLOC -x PSHUFFLE_TIMEOUT -x PSHUFFLE_TEST_CORRUPT -n "$n" \
    "$PS_BIN/mpi_bad" "$mode" > "$log" 2>&1
  local rc=$?
  [ $rc -ne 0 ] || { cat "$log"; fail "$mode: the job succeeded"; }
  # 124: ended by timeout's TERM; 137: by its KILL (the library aborts with 70).
  [ $rc -ne 124 ] && [ $rc -ne 137 ] || { cat "$log"; fail "$mode: still running after 120 s (a hang, rc $rc)"; }
  grep -q "$words" "$log" || { cat "$log"; fail "$mode: no message with '$words'"; }
  grep -q "the job was not aborted" "$log" && { cat "$log"; fail "$mode: a rank went on"; }
  echo "$mode: aborted after $((SECONDS - t0)) s: $(grep -m1 -o "pshuffle: rank [0-9]*: .*" "$log" | cut -c1-150)"
}
expect_abort allocchunk "pshuffle: rank 1: exchange: Cannot allocate memory.*aborting the job" 3 \
  PSHUFFLE_TEST_FAIL_ALLOC=1:chunk PSHUFFLE_TIMEOUT=10
# A damaged header (a sample announced as 2 GiB) ends the job on the
# receiving rank, before it posts a receive for that payload.
expect_abort badheader "headers from rank 1: sample size over 1 GiB; aborting the job" 3 \
  PSHUFFLE_TEST_FAIL_ALLOC= PSHUFFLE_TIMEOUT=10 PSHUFFLE_TEST_CORRUPT=1:header
expect_abort closemid "ps_close during an exchange.*aborting the job" 3 PSHUFFLE_TEST_FAIL_ALLOC= PSHUFFLE_TIMEOUT=10
expect_abort stall "from the other ranks within 3 s (PSHUFFLE_TIMEOUT).*aborting the job" 3 PSHUFFLE_TEST_FAIL_ALLOC= \
  PSHUFFLE_TIMEOUT=3

# A store written by 3 ranks, reopened by 2 and by 4 ranks (another seed
# refused before anything is rewritten), and with another seed or Q.
step create run 3 create "$W/store3"
step reopen2 run 2 reopen "$W/store3"
step reopen4 run 4 reopen "$W/store3"
step reseed run 3 reseed "$W/store3"
"$PSHUFFLE" verify "$W/store3" > /dev/null || fail "store damaged by the refused reopenings"

# A corrupt sample file: the exchange fails everywhere, the epoch stays,
# and the verifier names the file.
step corrupt run 3 corrupt "$W/corrupt"
if "$PSHUFFLE" verify "$W/corrupt" > "$W/corrupt.verify" 2>&1; then fail "verify accepted a corrupt store"; fi
grep -q "checksum mismatch" "$W/corrupt.verify" || { cat "$W/corrupt.verify"; fail "verify did not name the problem"; }

# A full disk: a small tmpfs when we may mount one, else the write-budget
# knob of the library. The exchange must fail with no partial commit.
mnt="$W/tiny"
mkdir -p "$mnt"
# 2 ranks x 40 samples of 1000 bytes, one segment of 10 pages per rank,
# plus manifests (22 of 25 pages): the initial store fits; the segments of
# the 20 samples per rank that Q=0.5 moves (5 pages each) do not.
if mount -t tmpfs -o size=100k tmpfs "$mnt" 2> /dev/null; then
  trap 'umount "$mnt" 2>/dev/null' EXIT INT TERM
  how="tmpfs of 100 KiB"
  step enospc run 2 enospc "$mnt/store"
  store="$mnt/store"
else
  how="simulated only (mount not permitted here)"
  store=""
fi
# The library's simulated full disk, always (the fallback where no tmpfs can be mounted).
step enospc-sim env PSHUFFLE_TEST_ENOSPC_AFTER=50000 timeout 60 $PS_MPIRUN $PS_MPI_FLAGS -x PSHUFFLE_TEST_ENOSPC_AFTER \
  -n 2 "$PS_BIN/mpi_bad" enospc "$W/enospc-sim"
for s in $store "$W/enospc-sim"; do
  "$PSHUFFLE" verify --json "$s" > "$W/enospc.verify" || { cat "$W/enospc.verify"; fail "store $s damaged by the full disk"; }
  grep -q '"epoch": 0, "samples": 80' "$W/enospc.verify" || { cat "$W/enospc.verify"; fail "full disk: not all samples at epoch 0 in $s"; }
done
echo "full disk ($how, and simulated): refused, store intact at epoch 0"
echo PASS
