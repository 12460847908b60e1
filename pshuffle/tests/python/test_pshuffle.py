"""pshuffle's Python layer under mpirun: exchange invariants, set_epoch
determinism, DataLoader with forked workers, directory store resume,
torch.distributed (gloo) next to MPI, and refused bad input."""
import os
import pickle
import socket
import struct

import pytest
import torch
import torch.distributed as dist
from mpi4py import MPI

import pshuffle
from pshuffle.torch import (PartialShuffleDataset, PartialShuffleSampler, decode_item, ingest, ingest_dir,
                            make_loader)

N_PER = 48


def payload(i):
    # id, then a pattern that depends on it: content checkable anywhere
    return struct.pack("<Q", i) + bytes((i * 7 + k) % 251 for k in range(i % 40))


def make(comm, seed=5, q=0.25, extra=0, **kw):
    """N_PER samples per rank; rank 0 gets `extra` more (ids after the rest)."""
    sh = pshuffle.Shuffler(comm, seed=seed, q=q, **kw)
    if not sh.resumed:
        ids = list(range(comm.rank * N_PER, (comm.rank + 1) * N_PER))
        if comm.rank == 0:
            ids += list(range(N_PER * comm.size, N_PER * comm.size + extra))
        for i in ids:
            sh.add(i, i % 5, payload(i))
    sh.start()
    return sh


def held(sh):
    return [sh.info(i)[0] for i in range(len(sh))]


def decode(blob, label):
    i = struct.unpack("<Q", blob[:8])[0]
    assert blob == payload(i), f"content of sample {i} is wrong"
    return i


def test_exchange_invariants(comm):
    sh = make(comm, q=0.25)
    k = pshuffle.plan_count(0.25, N_PER)
    for e in range(4):
        sh.exchange(e)
        st = sh.stats()
        assert st["samples_sent"] + st["samples_kept"] == k  # the pool: moved or landed back here
        sent = comm.allgather((st["samples_sent"], st["samples_recv"]))
        assert sum(a for a, _ in sent) == sum(b for _, b in sent)
        assert st["peak_samples"] <= N_PER + st["samples_recv"]
        assert len(sh) == N_PER
        ids = sorted(i for part in comm.allgather(held(sh)) for i in part)
        assert ids == list(range(N_PER * comm.size))
    assert sh.epoch == 4
    assert len(sh.history) == 4
    sh.close()


def test_progress_thread(comm):
    if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        pytest.skip("MPI not initialised with MPI_THREAD_MULTIPLE")
    a = make(comm, q=0.5, progress_thread=True)
    b = make(comm, q=0.5, progress_thread=False)
    for e in range(3):
        for sh in (a, b):
            sampler_order = sh.order()
            sh.exchange_begin(e)
            for i in sampler_order:
                sh.read(i)
            sh.exchange_end()
    assert held(a) == held(b)  # same plan, same result, whoever progresses
    assert a.stats()["samples_recv"] == b.stats()["samples_recv"]
    a.close()
    b.close()


def test_window(comm):
    """A 1 KiB window cuts the exchange into rounds; the result is the same
    as with the default window, within the window's memory bound."""
    a = make(comm, q=1.0, window_bytes=1024)
    b = make(comm, q=1.0)
    for e in range(2):
        before = sum(a.info(i)[2] for i in range(len(a)))
        a.exchange(e)
        b.exchange(e)
        st = a.stats()
        assert held(a) == held(b)
        assert st["rounds"] == max(comm.allgather(st["rounds"]))
        if comm.size > 1:
            assert st["rounds"] > b.stats()["rounds"]
        assert before + st["bytes_recv"] <= st["peak_bytes"] <= before + st["bytes_recv"] + 1024
        for i in range(len(a)):
            decode(a.read(i), None)
    a.close()
    b.close()


def test_set_epoch_determinism(comm):
    def run(seed):
        sh = make(comm, seed=seed, q=0.5)
        sampler = PartialShuffleSampler(sh)
        seen = []
        for e in range(3):
            sampler.set_epoch(e)
            sampler.set_epoch(e)  # idempotent
            seen.append([sh.info(i)[0] for _, i in sampler])
        sampler.finish()
        seen.append(held(sh))
        sh.close()
        return seen

    a, b, c = run(11), run(11), run(12)
    assert a == b
    assert a != c
    # every epoch visits each held sample once
    for order in a[:3]:
        assert len(order) == len(set(order)) == N_PER


def test_dataloader_workers(comm):
    sh = make(comm, q=0.5)
    sampler = PartialShuffleSampler(sh, progress_every=4)
    loader = torch.utils.data.DataLoader(PartialShuffleDataset(sh, decode), batch_size=5,
                                         sampler=sampler, num_workers=2)
    for e in range(3):
        sampler.set_epoch(e)
        expect = [sh.info(i)[0] for _, i in sampler._order]
        got = [int(x) for batch in loader for x in batch]
        assert got == expect, f"epoch {e}: the loader did not follow the sampler"
    sampler.finish()
    assert sh.epoch == 3
    ids = sorted(i for part in comm.allgather(held(sh)) for i in part)
    assert ids == list(range(N_PER * comm.size))
    sh.close()


def test_directory_store_resume(comm, shared_tmp):
    sh = make(comm, q=0.5, store_dir=shared_tmp, fsync=False)
    sh.exchange(0)
    sh.exchange(1)
    before = held(sh)
    sh.close()
    sh = make(comm, q=0.5, store_dir=shared_tmp, fsync=False)
    assert sh.resumed and sh.epoch == 2
    assert held(sh) == before
    loader = torch.utils.data.DataLoader(PartialShuffleDataset(sh, decode), batch_size=8,
                                         sampler=None, num_workers=2)
    assert sorted(int(x) for b in loader for x in b) == sorted(before)
    sh.close()
    with pytest.raises(pshuffle.PShuffleError) as ei:
        pshuffle.Shuffler(comm, seed=6, q=0.5, store_dir=shared_tmp)
    assert ei.value.name == "PS_EMISMATCH" and "seed 5" in str(ei.value)


def test_gloo_next_to_mpi(comm):
    port = None
    if comm.rank == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    port = comm.bcast(port, root=0)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=comm.rank,
                            world_size=comm.size)
    try:
        sh = make(comm, q=0.3)
        feats = lambda blob, label: (torch.tensor([len(blob), blob[0]], dtype=torch.float32), label)
        if comm.size > 1:
            # A communicator whose ranks are in another order than torch.distributed's.
            rev = comm.Split(0, comm.size - 1 - comm.rank)
            other = make(rev, q=0.3)
            with pytest.raises(ValueError, match="torch.distributed has rank"):
                PartialShuffleSampler(other)
            other.close()
            rev.Free()
        sampler = PartialShuffleSampler(sh)
        loader = torch.utils.data.DataLoader(PartialShuffleDataset(sh, feats), batch_size=8,
                                             sampler=sampler, num_workers=2)
        torch.manual_seed(0)
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 5))
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        for e in range(2):
            sampler.set_epoch(e)
            for x, y in loader:
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
        sampler.finish()
        w = torch.cat([p.detach().flatten() for p in model.parameters()])
        ws = comm.allgather(w.numpy().tolist())
        assert all(x == ws[0] for x in ws), "DDP replicas diverged"
        t = torch.ones(1) * (comm.rank + 1)
        dist.all_reduce(t)
        assert t.item() == comm.size * (comm.size + 1) / 2
        assert sh.epoch == 2 and len(sh) == N_PER
        sh.close()
    finally:
        dist.destroy_process_group()


def test_bad_input(comm):
    with pytest.raises(pshuffle.PShuffleError) as ei:
        pshuffle.Shuffler(comm, q=1.5)
    assert ei.value.name == "PS_EINVAL" and "outside [0, 1]" in str(ei.value)
    # Q differing on one rank: refused on every rank
    with pytest.raises(pshuffle.PShuffleError) as ei:
        pshuffle.Shuffler(comm, q=0.1 if comm.rank == 0 else 0.2)
    if comm.size > 1:
        assert ei.value.name == "PS_EMISMATCH"
    else:
        pytest.fail("a single rank cannot mismatch")  # pragma: no cover
    sh = make(comm)
    sampler = PartialShuffleSampler(sh)
    sampler.set_epoch(3)  # skipping epochs runs the skipped exchanges
    assert sh.epoch == 3
    with pytest.raises(ValueError, match="cannot go back"):
        sampler.set_epoch(1)
    sampler.finish()
    with pytest.raises(ValueError, match="pass the seed to pshuffle.Shuffler"):
        PartialShuffleSampler(sh, seed=99)
    with pytest.raises(ValueError, match="communicator has"):
        PartialShuffleSampler(sh, num_replicas=comm.size + 1)
    with pytest.raises(ValueError, match="strategy 'wide'"):
        pshuffle.Shuffler(comm, strategy="wide")
    with pytest.raises(ValueError, match="takes no q"):
        pshuffle.Shuffler(comm, strategy="global", q=0.5)
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(sh)
    sh.close()


@pytest.mark.parametrize("drop_last", [False, True])
def test_sampler_equal_lengths(comm, drop_last):
    """Uneven start (rank 0 has 7 more): every rank yields the same number
    of indices, as DistributedSampler; after one exchange the counts are
    within one of each other."""
    sh = make(comm, q=0.1, extra=7, strategy="partial")
    n_tot = N_PER * comm.size + 7
    sampler = PartialShuffleSampler(sh, drop_last=drop_last)
    want = n_tot // comm.size if drop_last else -(-n_tot // comm.size)
    for e in range(3):
        sampler.set_epoch(e)
        got = list(sampler)
        assert len(got) == len(sampler) == want
        assert comm.allgather(len(got)) == [want] * comm.size
        held_now = set(range(len(sh)))
        assert {i for _, i in got} <= held_now
        if not drop_last and len(sh) >= want:
            assert len({i for _, i in got}) == want  # no padding where none is needed
    sampler.finish()
    sizes = comm.allgather(len(sh))
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == n_tot
    sh.close()


def test_global_strategy_and_warmup(comm):
    sh = make(comm, strategy="global", q=None)
    sampler = PartialShuffleSampler(sh, warmup=True)
    assert sh.epoch == 1 and sampler.start_epoch == 0  # one exchange before epoch 0
    sampler.set_epoch(0)
    sampler.finish()
    assert sh.epoch == 2
    ids = sorted(i for part in comm.allgather(held(sh)) for i in part)
    assert ids == list(range(N_PER * comm.size))
    if comm.size > 1:
        st = comm.allgather(sh.stats())
        assert sum(s["samples_sent"] for s in st) > 0
        assert sum(s["samples_kept"] for s in st) > 0  # fixed points: some samples stay
    sh.close()


def test_persistent_workers_refused(comm):
    sh = make(comm, q=0.5)
    ds = PartialShuffleDataset(sh, decode)
    sampler = PartialShuffleSampler(sh)
    with pytest.raises(ValueError, match="persistent_workers=True is not supported"):
        make_loader(ds, batch_size=4, sampler=sampler, num_workers=1, persistent_workers=True)
    # A plain DataLoader with persistent workers: the stale worker refuses
    # to serve the second epoch instead of returning old samples.
    loader = torch.utils.data.DataLoader(ds, batch_size=4, sampler=sampler, num_workers=1,
                                         persistent_workers=True)
    sampler.set_epoch(0)
    assert len([b for b in loader]) > 0
    sampler.set_epoch(1)
    with pytest.raises(RuntimeError, match="persistent_workers=True is not supported"):
        for _ in loader:
            pass
    del loader
    sampler.finish()
    sh.close()


def test_worker_error_keeps_message(comm):
    sh = make(comm, q=0.0)
    loader = torch.utils.data.DataLoader(PartialShuffleDataset(sh), batch_size=1, sampler=[10**6],
                                         num_workers=1)
    with pytest.raises(pshuffle.PShuffleError, match="sample index 1000000"):
        list(loader)
    sh.close()


class _Squares(torch.utils.data.Dataset):
    def __len__(self):
        return 37

    def __getitem__(self, i):
        return torch.full((3,), float(i * i)), i % 4


def test_ingest_dataset_and_dir(comm, shared_tmp):
    sh = pshuffle.Shuffler(comm, seed=3, strategy="global")
    ingest(sh, _Squares())
    sh.exchange(0)
    got = {}
    for i in range(len(sh)):
        sid, label, _ = sh.info(i)
        x, y = decode_item(sh.read(i), label)
        assert torch.equal(x, torch.full((3,), float(sid * sid))) and y == sid % 4
        got[sid] = y
    ids = sorted(i for part in comm.allgather(sorted(got)) for i in part)
    assert ids == list(range(37))
    sh.close()
    # A directory in ImageFolder layout: labels from the class folders.
    if comm.rank == 0:
        for c in ("cat", "dog"):
            os.makedirs(os.path.join(shared_tmp, "imgs", c))
            for k in range(5):
                with open(os.path.join(shared_tmp, "imgs", c, f"{k}.bin"), "wb") as f:
                    f.write(f"{c}{k}".encode())
    comm.Barrier()
    sh = pshuffle.Shuffler(comm, seed=3, strategy="global")
    paths, classes = ingest_dir(sh, os.path.join(shared_tmp, "imgs"))
    assert classes == ["cat", "dog"] and len(paths) == 10
    sh.exchange(0)
    for i in range(len(sh)):
        sid, label, _ = sh.info(i)
        assert sh.read(i) == open(paths[sid], "rb").read() and classes[label] in paths[sid]
    assert comm.allreduce(len(sh)) == 10
    sh.close()
