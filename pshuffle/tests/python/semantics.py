"""PartialShuffleSampler (strategy='global') against torch's
DistributedSampler on M = 1, 2, 3 and 4 ranks (sub-communicators of one
4-rank mpirun job), and a state saved mid-epoch resumed on another number
of ranks: for N in {3, 10, 4096, 4097},
shuffled or not, padded or drop_last, epochs 0, 1, 2, 1, 0 (back and
forth). Checks the same lengths on every rank, the same number of samples
seen 0, 1 or 2 times in an epoch (padding and dropping), exactly
DistributedSampler's per-rank lists without shuffling, the same samples in
the same order when an epoch comes back, an epoch 0 that is not the
contiguous start, and that every index reads the user's own dataset."""
import collections
import resource
import sys
import time

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


def idle_barrier():
    """A barrier of the whole job that waits asleep: the ranks outside the
    sub-communicator at work wait here, and Open MPI's blocking barrier
    would spin, taking the cores the working ranks need (2 cores, 4 ranks)."""
    req = world.Ibarrier()
    while not req.Test():
        time.sleep(0.002)


T0 = time.monotonic()
_mark = [0.0, T0]  # CPU and wall time at the last report


def cpu_report(what):
    """One line from rank 0: the CPU time all ranks received for `what`
    (since the last report) and its wall time, so that a slow run shows
    whether it lacked CPU or used more of it."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    now = ru.ru_utime + ru.ru_stime
    total = world.allreduce(now - _mark[0])
    wall = time.monotonic() - _mark[1]
    _mark[0], _mark[1] = now, time.monotonic()
    if r == 0:
        print(f"  {what}: {total:.1f} s CPU (all ranks), {wall:.1f} s wall", flush=True)


def hist(lists):
    c = collections.Counter(x for part in lists for x in part)
    return sorted(collections.Counter(c.values()).items())


def run(comm):
    """One allgather per configuration (not per epoch): under load every
    collective step waits for the scheduler to run each rank, and that, not
    CPU time, is what made this test slow; DistributedSampler's lists of the
    other ranks are computed here rather than gathered."""
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
                seen, visits, epochs = {}, [], (0, 1, 2, 1, 0)  # visits: (ids, DistributedSampler's lists)
                for e in epochs:
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
                    refs = []
                    for q in range(M):
                        ref = tud.DistributedSampler(range(N), num_replicas=M, rank=q, shuffle=shuffle, seed=11,
                                                     drop_last=drop_last)
                        ref.set_epoch(e)
                        refs.append(list(ref))
                    want = refs[r]
                    check(len(idx) == len(sampler) == len(want),
                          f"{tag}: length {len(idx)} (len {len(sampler)}), DistributedSampler {len(want)}")
                    if not shuffle:
                        check(ids == want, f"{tag}: {ids[:8]} != DistributedSampler's {want[:8]}")
                    if e in seen:
                        check(ids == seen[e], f"{tag}: the epoch came back with other samples")
                    seen.setdefault(e, ids)
                    visits.append((ids, refs))
                moved = int(set(seen[0]) - start != set())
                every = comm.allgather(([v[0] for v in visits], moved))
                for k, e in enumerate(epochs):
                    tag = f"N={N} M={M} shuffle={shuffle} drop_last={drop_last} epoch {e} (visit {k})"
                    mine, theirs = [ev[0][k] for ev in every], visits[k][1]
                    check(hist(mine) == hist(theirs), f"{tag}: multiplicities {hist(mine)}, DistributedSampler "
                                                      f"{hist(theirs)}")
                    if not drop_last:
                        check(set(x for p in mine for x in p) == set(range(N)), f"{tag}: not every sample")
                if shuffle and N >= 10 and M > 1:
                    check(sum(ev[1] for ev in every) > 0, f"N={N} M={M}: epoch 0 is the contiguous start")
                    check(seen[0] != seen[1], f"N={N}: epochs 0 and 1 alike")
                sampler.finish()
                sh.close()
    return cases


def restripe(m_old, m_new, N, drop_last, store=None):
    """Epoch 1 stopped halfway on m_old ranks, resumed on m_new (with a
    directory store: the same store, reopened by m_new ranks): the rest
    of the epoch is exactly what was not consumed (padded: nothing lost, at
    most m_new - 1 repeats; drop_last: cut to a multiple of m_new, nothing
    repeated), lengths equal, and the next epoch is DistributedSampler's
    for m_new ranks."""
    data = tud.TensorDataset(torch.arange(N))
    tag = f"restripe {m_old}->{m_new} N={N} drop_last={drop_last} store={'directory' if store else 'memory'}"
    state, full, consumed = None, [], []
    sub = world.Split(0 if r < m_old else MPI.UNDEFINED, r)
    if sub != MPI.COMM_NULL:
        sh = pshuffle.Shuffler(sub, seed=5, strategy="global", store_dir=store, fsync=False, resume=False)
        ds = ShuffledDataset(data, sh)
        s = PartialShuffleSampler(ds, drop_last=drop_last)
        s.set_epoch(0)
        s.set_epoch(1)
        ids = [int(ds[i][0]) for i in s]
        it = iter(s)
        half = len(s) // 2  # the same on every rank
        for _ in range(half):
            next(it)
        st = s.state_dict()
        full = sub.allgather(ids)
        consumed = [f[:half] for f in full]
        state = st if sub.rank == 0 else None
        s.finish()
        sh.close()
        sub.Free()
    idle_barrier()
    state, full, consumed = world.bcast((state, full, consumed), root=0)
    check(state["nranks"] == m_old and state["position"] == len(consumed[0]), f"{tag}: state {state}")
    sub = world.Split(0 if r < m_new else MPI.UNDEFINED, r)
    if sub != MPI.COMM_NULL:
        sh = pshuffle.Shuffler(sub, seed=5, strategy="global", store_dir=store, fsync=False)
        check(sh.resumed == bool(store), f"{tag}: resumed {sh.resumed}")
        # A resumed store is read, not the dataset: a dataset that is not
        # the store's would show as wrong ids below.
        ds = ShuffledDataset(tud.TensorDataset(torch.zeros(N, dtype=torch.int64)) if store else data, sh)
        s = PartialShuffleSampler(ds, drop_last=drop_last)
        s.load_state_dict(state)
        check(s.start_epoch == 1, f"{tag}: start_epoch {s.start_epoch}")
        s.set_epoch(1)
        got = [int(ds[i][0]) for i in s]
        check(len(got) == len(s), f"{tag}: {len(got)} indices, len {len(s)}")
        s.set_epoch(2)
        both = sub.allgather((got, [int(ds[i][0]) for i in s]))  # one collective for both epochs
        every, nxt = [b[0] for b in both], [b[1] for b in both]
        check(len(set(len(g) for g in every)) == 1, f"{tag}: unequal lengths {[len(g) for g in every]}")
        rest = collections.Counter(x for g in full for x in g) - collections.Counter(x for g in consumed for x in g)
        seen = collections.Counter(x for g in every for x in g)
        lost, extra = sum((rest - seen).values()), sum((seen - rest).values())
        if drop_last:  # the rest is cut to a multiple of m_new, as DistributedSampler cuts a list
            check(lost < m_new and extra == 0,
                  f"{tag}: {lost} lost, {extra} extra")
            check(lost == sum(rest.values()) % m_new, f"{tag}: {lost} lost of {sum(rest.values())}")
        else:
            check(lost == 0, f"{tag}: samples of the epoch lost: {sorted((rest - seen).elements())[:8]}")
            check(extra < m_new and set(seen - rest) <= set(rest), f"{tag}: {extra} extra visits")
        ref = []
        for q in range(m_new):
            d = tud.DistributedSampler(range(N), num_replicas=m_new, rank=q, drop_last=drop_last)
            ref.append(list(d))
        check(hist(nxt) == hist(ref), f"{tag}: epoch 2 multiplicities {hist(nxt)}, DistributedSampler {hist(ref)}")
        s.finish()
        sh.close()
        sub.Free()
    idle_barrier()


if world.size >= 4:
    for m_old, m_new in ((3, 4), (4, 2), (2, 3), (4, 1)):
        for N in (41, 10):
            for drop_last in (False, True):
                restripe(m_old, m_new, N, drop_last)
    if r == 0:
        print("resume on another number of ranks: 3->4, 4->2, 2->3, 4->1", flush=True)
    cpu_report("start-up and resume, memory store")
    # The same with a directory store reopened by the new ranks (rewritten
    # by the library for their count).
    import shutil
    import tempfile
    tmp = world.bcast(tempfile.mkdtemp(prefix="pshuffle-sem-") if r == 0 else None, root=0)
    for m_old, m_new in ((2, 3), (3, 2), (4, 1)):
        for drop_last in (False, True):
            restripe(m_old, m_new, 41, drop_last, store=f"{tmp}/s{m_old}{m_new}{int(drop_last)}")
    if r == 0:
        shutil.rmtree(tmp)
        print("directory store resumed on another number of ranks: 2->3, 3->2, 4->1", flush=True)
    cpu_report("resume, directory store")

for M in (1, 2, 3, 4):
    if M > world.size:
        continue
    sub = world.Split(0 if r < M else MPI.UNDEFINED, r)
    if sub != MPI.COMM_NULL:
        cases = run(sub)
        if sub.rank == 0:
            print(f"{cases} epochs compared with DistributedSampler on {M} ranks", flush=True)
        sub.Free()
    idle_barrier()
    cpu_report(f"against DistributedSampler on {M} ranks")

total = world.allreduce(fails)
if r == 0:
    print(f"{'FAIL' if total else 'PASS'} ({total} failed checks)", flush=True)
sys.exit(1 if total else 0)
