"""PartialShuffleSampler (strategy='global') against torch's
DistributedSampler on M = 1, 2, 3 and 4 ranks (sub-communicators of one
4-rank mpirun job): for N in {3, 10, 4096, 4097},
shuffled or not, padded or drop_last, epochs 0, 1, 2, 1, 0 (back and
forth). Checks the same lengths on every rank, the same number of samples
seen 0, 1 or 2 times in an epoch (padding and dropping), exactly
DistributedSampler's per-rank lists without shuffling, the same samples in
the same order when an epoch comes back, an epoch 0 that is not the
contiguous start, and that every index reads the user's own dataset."""
import collections
import sys

import torch
import torch.utils.data as tud
from mpi4py import MPI

import pshuffle
from pshuffle.torch import PartialShuffleSampler, ShuffledDataset

world = MPI.COMM_WORLD
fails = 0
r = world.rank


def check(cond, what):
    global fails
    if not cond:
        fails += 1
        print(f"[rank {r}] FAIL: {what}", file=sys.stderr, flush=True)


def hist(lists):
    c = collections.Counter(x for part in lists for x in part)
    return sorted(collections.Counter(c.values()).items())


def run(comm):
    M, r = comm.size, comm.rank
    cases = 0
    for N in (3, 10, 4096, 4097):
        data = tud.TensorDataset(torch.arange(N), torch.arange(N) % 10)
        for shuffle in (True, False):
            for drop_last in (False, True):
                sh = pshuffle.Shuffler(comm, seed=11, strategy="global")
                ds = ShuffledDataset(data, sh)
                start = set(int(k) for k in sh.ids())
                sampler = PartialShuffleSampler(ds, shuffle=shuffle, drop_last=drop_last)
                seen = {}
                for e in (0, 1, 2, 1, 0):
                    cases += 1
                    tag = f"N={N} M={M} shuffle={shuffle} drop_last={drop_last} epoch {e}"
                    sampler.set_epoch(e)
                    idx = list(sampler)
                    held = sh.ids()
                    # The user's dataset, through a plain index (the padding
                    # sample, index len(held), read through it always; others
                    # sampled, their ids from the store).
                    ids = [int(held[i]) if i < len(held) else int(ds[i][0]) for i in idx]
                    check(all(int(ds[i][0]) == ids[k] and int(ds[i][1]) == ids[k] % 10
                              for k, i in enumerate(idx) if k % 17 == 0 or i >= len(held)), f"{tag}: items")
                    ref = tud.DistributedSampler(range(N), num_replicas=M, rank=r, shuffle=shuffle, seed=11,
                                                 drop_last=drop_last)
                    ref.set_epoch(e)
                    want = list(ref)
                    check(len(idx) == len(sampler) == len(ref) == len(want),
                          f"{tag}: length {len(idx)} (len {len(sampler)}), DistributedSampler {len(want)}")
                    mine, theirs = comm.allgather(ids), comm.allgather(want)
                    check(hist(mine) == hist(theirs), f"{tag}: multiplicities {hist(mine)}, DistributedSampler "
                                                      f"{hist(theirs)}")
                    if not drop_last:
                        check(set(x for p in mine for x in p) == set(range(N)), f"{tag}: not every sample")
                    if not shuffle:
                        check(ids == want, f"{tag}: {ids[:8]} != DistributedSampler's {want[:8]}")
                    if e in seen:
                        check(ids == seen[e], f"{tag}: the epoch came back with other samples")
                    seen[e] = ids
                if shuffle and N >= 10 and M > 1:
                    moved = comm.allreduce(int(set(seen[0]) - start != set()))
                    check(moved > 0, f"N={N} M={M}: epoch 0 is the contiguous start")
                    check(seen[0] != seen[1], f"N={N}: epochs 0 and 1 alike")
                sampler.finish()
                sh.close()
    return cases


for M in (1, 2, 3, 4):
    if M > world.size:
        continue
    sub = world.Split(0 if r < M else MPI.UNDEFINED, r)
    if sub != MPI.COMM_NULL:
        cases = run(sub)
        if sub.rank == 0:
            print(f"{cases} epochs compared with DistributedSampler on {M} ranks", flush=True)
        sub.Free()
    world.Barrier()

total = world.allreduce(fails)
if r == 0:
    print(f"{'FAIL' if total else 'PASS'} ({total} failed checks)", flush=True)
sys.exit(1 if total else 0)
