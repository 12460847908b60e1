"""pshuffle's Python layer under mpirun: exchange invariants, set_epoch
determinism, DataLoader with forked workers, directory store resume,
torch.distributed (gloo) next to MPI, and refused bad input."""
import pickle
import socket
import struct

import pytest
import torch
import torch.distributed as dist
from mpi4py import MPI

import pshuffle
from pshuffle.torch import PartialShuffleDataset, PartialShuffleSampler

N_PER = 48


def payload(i):
    # id, then a pattern that depends on it: content checkable anywhere
    return struct.pack("<Q", i) + bytes((i * 7 + k) % 251 for k in range(i % 40))


def make(comm, seed=5, q=0.25, **kw):
    sh = pshuffle.Shuffler(comm, seed=seed, q=q, **kw)
    if not sh.resumed:
        for i in range(comm.rank * N_PER, (comm.rank + 1) * N_PER):
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
    k = pshuffle.plan_count(0.25, N_PER) if comm.size > 1 else 0
    for e in range(4):
        sh.exchange(e)
        st = sh.stats()
        assert (st["samples_sent"], st["samples_recv"]) == (k, k)
        assert st["peak_samples"] <= N_PER + k
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
    b = make(comm, q=0.5)
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


def test_set_epoch_determinism(comm):
    def run(seed):
        sh = make(comm, seed=seed, q=0.5)
        sampler = PartialShuffleSampler(sh)
        seen = []
        for e in range(3):
            sampler.set_epoch(e)
            seen.append([sh.info(i)[0] for i in sampler])
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
        expect = [sh.info(i)[0] for i in sampler._order]
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
    with pytest.raises(ValueError, match="store is at epoch 0"):
        sampler.set_epoch(3)
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(sh)
    sh.close()
