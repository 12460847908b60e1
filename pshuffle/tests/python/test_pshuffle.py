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
from pshuffle.torch import (PartialShuffleDataset, PartialShuffleSampler, ShuffledDataset, ShuffledFolder,
                            make_loader)
from pshuffle.torch import decode as ps_decode, encode as ps_encode

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
    with pytest.raises(pshuffle.PShuffleError, match="cannot go back") as ei:
        sampler.set_epoch(1)
    assert len(set(comm.allgather(str(ei.value)))) == 1  # the same line on every rank
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
        assert set(got) <= held_now
        if not drop_last and len(sh) >= want:
            assert len(set(got)) == want  # no padding where none is needed
    sampler.finish()
    sizes = comm.allgather(len(sh))
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == n_tot
    sh.close()


def test_global_epoch0_shuffled_and_back(comm):
    """strategy='global': epoch 0 is already a uniform reshuffle (not the
    contiguous start), set_epoch goes forward and back (the same epoch gives
    the same samples in the same order), every sample once per epoch."""
    sh = make(comm, strategy="global", q=None)
    start = held(sh)
    sampler = PartialShuffleSampler(sh)
    seen = {}
    for e in (0, 1, 2, 1, 0, 5):
        sampler.set_epoch(e)
        ids = [sh.info(i)[0] for i in sampler]
        if e in seen:
            assert ids == seen[e], f"epoch {e} again gave other samples"
        seen[e] = ids
        every = sorted(i for part in comm.allgather(ids) for i in part)
        assert every == list(range(N_PER * comm.size))
    if comm.size > 1:
        assert comm.allreduce(int(sorted(seen[0]) != start)) > 0, "epoch 0 trained on the unshuffled start"
        assert seen[0] != seen[1]
    sampler.finish()
    sh.close()


def test_empty_rank_same_error_everywhere(comm):
    """partial strategy, rank 1 empty at epoch 0: the same one-line error on
    every rank, raised before any exchange (no rank left waiting)."""
    if comm.size < 2:
        pytest.skip("needs 2 ranks")
    sh = pshuffle.Shuffler(comm, seed=1, q=0.1)
    if comm.rank == 0:
        for i in range(10):
            sh.add(i, 0, payload(i))
    sh.start()
    sampler = PartialShuffleSampler(sh)
    with pytest.raises(pshuffle.PShuffleError) as ei:
        sampler.set_epoch(0)
    msg = str(ei.value)
    assert "rank 1 holds no samples" in msg and "\n" not in msg
    assert len(set(comm.allgather(msg))) == 1, "ranks raised different messages"
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
    with pytest.raises(IndexError, match="index 1000000 outside"):
        list(loader)
    sh.close()


class _Squares(torch.utils.data.Dataset):
    def __len__(self):
        return 37

    def __getitem__(self, i):
        return torch.full((3,), float(i * i)), i % 4


def test_encoder_round_trip():
    import numpy as np
    items = [(torch.arange(784, dtype=torch.uint8).view(28, 28), 3), (torch.zeros(0, 5), 1),
             (torch.tensor([1.5, -2.0], dtype=torch.bfloat16), 0), (np.arange(12, dtype=np.float32).reshape(3, 4), 7),
             (torch.ones(2, dtype=torch.bool), 2), b"raw", (torch.ones(2), "text label"), ({"a": 1}, 5),
             (torch.ones(3), torch.tensor(9)), (torch.ones(3), -1)]
    for item in items:
        blob, label = ps_encode(item)
        got = ps_decode(bytearray(blob), label)
        want = item if not (isinstance(item, tuple) and torch.is_tensor(item[1])) else (item[0], int(item[1]))
        assert type(got) is type(want)
        if isinstance(want, tuple):
            for a, b in zip(got, want):
                if torch.is_tensor(b):
                    assert torch.equal(a, b) and a.dtype == b.dtype
                elif isinstance(b, np.ndarray):
                    assert np.array_equal(a, b) and a.dtype == b.dtype
                else:
                    assert a == b
        else:
            assert got == want
    # A 784-byte item costs at most 5% more than its raw bytes (torch.save: about 2x).
    blob, label = ps_encode((torch.zeros(28, 28, dtype=torch.uint8), 3))
    assert len(blob) == 808 and label == 3, len(blob)  # a 24-byte header: 3%


def test_shuffled_dataset(comm):
    """A user's map-style dataset: plain indices, transform at every access
    (never at ingest), global reshuffle visible in the ids."""
    calls = []
    sh = pshuffle.Shuffler(comm, seed=3, strategy="global")
    ds = ShuffledDataset(_Squares(), sh, transform=lambda x: x + 1, target_transform=lambda y: y * 10)
    sampler = PartialShuffleSampler(ds)
    loader = torch.utils.data.DataLoader(ds, batch_size=4, sampler=sampler, num_workers=2)
    seen = []
    for e in range(2):
        sampler.set_epoch(e)
        for x, y in loader:
            for xi, yi in zip(x, y):
                sid = int(round(float(xi[0]) - 1) ** 0.5 + 0.5)
                assert torch.equal(xi, torch.full((3,), float(sid * sid) + 1)) and int(yi) == (sid % 4) * 10
                seen.append(sid)
    assert len(seen) == 2 * len(sampler)
    every = sorted(set(i for part in comm.allgather(seen) for i in part))
    assert every == list(range(37))
    sampler.finish()
    sh.close()


class _Noisy(torch.utils.data.Dataset):
    def __len__(self):
        return 16

    def __getitem__(self, i):
        return torch.full((8,), float(i)), i % 2


def _augment(x):
    return x + torch.rand_like(x) * 0.5  # floor(x) is still the sample's id


def test_fresh_augmentation_dataset(comm):
    """The transform runs at every access: views of one sample differ
    across epochs (they would be equal if it ran at ingest)."""
    sh = pshuffle.Shuffler(comm, seed=1, strategy="local")
    ds = ShuffledDataset(_Noisy(), sh, transform=_augment)
    sampler = PartialShuffleSampler(ds, shuffle=False)
    views = []
    for e in range(3):
        sampler.set_epoch(e)
        loader = torch.utils.data.DataLoader(ds, batch_size=1, sampler=sampler, num_workers=1)
        views.append([x[0] for x, _ in loader][0])
    sampler.finish()
    assert len({int(v[0]) for v in views}) == 1  # one sample, its first view each epoch
    assert not torch.equal(views[0], views[1]) and not torch.equal(views[1], views[2])
    sh.close()


def _tree(base, rank, size, n=24, classes=("a", "b", "c")):
    """Rank r's own ImageFolder-style tree: files k = r, r+M, ... of n."""
    root = os.path.join(base, f"tree{rank}")
    for k in range(rank, n, size):
        c = classes[k % len(classes)]
        os.makedirs(os.path.join(root, c), exist_ok=True)
        with open(os.path.join(root, c, f"s{k:03d}.raw"), "wb") as f:
            f.write(struct.pack("<I", k) * (1 + k % 5))
    return root


def _load_raw(path):
    with open(path, "rb") as f:
        return torch.tensor(struct.unpack("<I", f.read(4))[0], dtype=torch.float32)


def _tree_files(root):
    out = set()
    for dp, dns, fns in os.walk(root):
        for f in fns:
            out.add(os.path.relpath(os.path.join(dp, f), root))
    return out


def test_shuffled_folder(comm, shared_tmp):
    """The rank's tree follows the exchange: after every epoch it holds
    exactly the rank's samples as files (received written, sent removed,
    nothing temporary left), each with its original bytes; the loader and
    transform run at every access; resume rebuilds the same; a changed tree
    is refused with one line on every rank."""
    root = _tree(shared_tmp, comm.rank, comm.size)
    store = os.path.join(shared_tmp, "store")
    sh = pshuffle.Shuffler(comm, seed=4, strategy="global", store_dir=store, fsync=False)
    ds = ShuffledFolder(root, sh, loader=_load_raw, transform=lambda x: x + 1000)
    assert ds.classes == ["a", "b", "c"] and ds.class_to_idx == {"a": 0, "b": 1, "c": 2}
    sampler = PartialShuffleSampler(ds)
    loader = torch.utils.data.DataLoader(ds, batch_size=3, sampler=sampler, num_workers=2)
    for e in range(3):
        sampler.set_epoch(e)
        got = [int(v) - 1000 for x, _ in loader for v in x]
        files = _tree_files(root)
        want = {ds.names[int(k)] for k in sh.ids()}
        assert files == want, f"epoch {e}: tree {sorted(files)} != held {sorted(want)}"
        for rel in files:
            k = int(rel.split("s")[-1].split(".")[0])
            assert open(os.path.join(root, rel), "rb").read() == struct.pack("<I", k) * (1 + k % 5)
            assert rel.startswith("abc"[k % 3] + "/")
        assert sorted(got) == sorted(int(rel.split("s")[-1].split(".")[0]) for rel in files)
        for i, (path, c) in enumerate(ds.samples):
            assert ds.classes[c] == os.path.basename(os.path.dirname(path))
        every = sorted(k for part in comm.allgather(got) for k in part)
        assert every == list(range(24))
    sampler.finish()
    final = _tree_files(root)
    sh.close()
    # Resume: the same files, and a usable sampler.
    sh = pshuffle.Shuffler(comm, seed=4, strategy="global", store_dir=store, fsync=False)
    assert sh.resumed
    ds = ShuffledFolder(root, sh, loader=_load_raw)
    assert _tree_files(root) == final
    sh.close()
    # A file added to one rank's tree: refused on every rank, same line.
    if comm.rank == comm.size - 1:
        with open(os.path.join(root, "a", "extra.raw"), "wb") as f:
            f.write(b"1234")
    comm.Barrier()
    sh = pshuffle.Shuffler(comm, seed=4, strategy="global", store_dir=store, fsync=False)
    with pytest.raises(pshuffle.PShuffleError, match="not in the dataset") as ei:
        ShuffledFolder(root, sh, loader=_load_raw)
    assert len(set(comm.allgather(str(ei.value)))) == 1
    sh.close()


def test_folder_store_on_other_rank_count(comm, shared_tmp):
    """A folder's directory store made on M ranks, reopened by rank 0
    alone, then by the M ranks again: every time the trees in use hold
    every file exactly once, with the files the store says the rank holds,
    and an epoch visits every sample once."""
    root = _tree(shared_tmp, comm.rank, comm.size)
    store = os.path.join(shared_tmp, "store-ranks")
    sh = pshuffle.Shuffler(comm, seed=4, strategy="global", store_dir=store, fsync=False)
    ds = ShuffledFolder(root, sh, loader=_load_raw)
    sampler = PartialShuffleSampler(ds)
    sampler.set_epoch(0)
    sampler.finish()
    names = list(ds.names)
    sh.close()
    sub = comm.Split(0 if comm.rank == 0 else MPI.UNDEFINED, comm.rank)
    if sub != MPI.COMM_NULL:
        sh = pshuffle.Shuffler(sub, seed=4, strategy="global", store_dir=store, fsync=False)
        assert sh.resumed and len(sh) == len(names)
        ds = ShuffledFolder(root, sh, loader=_load_raw)
        assert _tree_files(root) == set(names)
        s = PartialShuffleSampler(ds)
        s.set_epoch(1)
        assert sorted(int(ds[i][0]) for i in s) == list(range(len(names)))
        s.finish()
        sh.close()
        sub.Free()
    comm.Barrier()
    sh = pshuffle.Shuffler(comm, seed=4, strategy="global", store_dir=store, fsync=False)
    assert sh.resumed
    ds = ShuffledFolder(root, sh, loader=_load_raw)
    files = _tree_files(root)
    assert files == {ds.names[int(k)] for k in sh.ids()}
    every = [f for part in comm.allgather(sorted(files)) for f in part]
    assert sorted(every) == sorted(names), "a file lost or in two trees"
    sh.close()


def test_fresh_augmentation_folder(comm, shared_tmp):
    root = _tree(shared_tmp, comm.rank, comm.size, n=8)
    sh = pshuffle.Shuffler(comm, seed=2, strategy="local")
    ds = ShuffledFolder(root, sh, loader=_load_raw, transform=lambda x: x + torch.rand(()))
    sampler = PartialShuffleSampler(ds, shuffle=False)
    views = []
    for e in range(3):
        sampler.set_epoch(e)
        views.append(float(ds[next(iter(sampler))][0]))
    assert len(set(views)) == 3
    sampler.finish()
    sh.close()


def test_changed_dataset_refused(comm, shared_tmp):
    store = os.path.join(shared_tmp, "dstore")
    sh = pshuffle.Shuffler(comm, seed=3, strategy="global", store_dir=store, fsync=False)
    ShuffledDataset(_Squares(), sh)
    sh.close()
    sh = pshuffle.Shuffler(comm, seed=3, strategy="global", store_dir=store, fsync=False)

    class _More(_Squares):
        def __len__(self):
            return 40
    with pytest.raises(pshuffle.PShuffleError, match="holds 37 samples, the dataset has 40") as ei:
        ShuffledDataset(_More(), sh)
    assert len(set(comm.allgather(str(ei.value)))) == 1
    sh.close()


def test_state_dict_mid_epoch(comm):
    """Resume inside an epoch: a new job (fresh shuffler and dataset) with
    the saved state yields exactly the rest of that epoch, then the same
    next epochs."""
    def job():
        sh = pshuffle.Shuffler(comm, seed=9, strategy="global")
        ds = ShuffledDataset(_Squares(), sh)
        return sh, ds, PartialShuffleSampler(ds)

    sh, ds, sampler = job()
    sampler.set_epoch(0)
    sampler.set_epoch(1)
    ids = lambda idx: [int(round(float(ds[i][0][0]) ** 0.5)) for i in idx]
    it = iter(sampler)
    first = [next(it) for _ in range(5)]
    state = sampler.state_dict()
    assert state["epoch"] == 1 and state["position"] == 5
    rest = list(it)
    full1 = ids(first + rest)
    sampler.set_epoch(2)
    full2 = ids(list(sampler))
    sampler.finish()
    sh.close()

    sh, ds, sampler = job()
    sampler.load_state_dict(state)
    assert sampler.start_epoch == 1
    sampler.set_epoch(sampler.start_epoch)
    assert len(sampler) == len(full1) - 5
    assert ids(list(sampler)) == full1[5:]
    sampler.set_epoch(2)
    assert ids(list(sampler)) == full2
    bad = dict(state, total=99)
    with pytest.raises(pshuffle.PShuffleError, match="dataset size 99") as ei:
        sampler.load_state_dict(bad)
    assert len(set(comm.allgather(str(ei.value)))) == 1
    sampler.finish()
    sh.close()
